"""Tracing is off by default and costs nothing then; the project runs without the extra (RFC 14.4).

A process sets its tracer provider and its instrumentation once, for good, so each check
that imports or turns on tracing runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from membrane_core import Settings, logs, tracing

ROOT = Path(__file__).resolve().parents[2]

#: What the extra brings: none of it is imported while tracing is off.
EXTRA_MODULES = ("opentelemetry.sdk.trace", "opentelemetry.instrumentation", "opentelemetry.exporter")

#: Makes the named packages (and their submodules) impossible to import, as if not installed.
BLOCKER = """
import sys

class Missing:
    def __init__(self, names):
        self.names = names

    def find_spec(self, name, path=None, target=None):
        if any(name == n or name.startswith(n + ".") for n in self.names):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, Missing(BLOCKED))
"""


def run(script: str, blocked: tuple[str, ...] = ()) -> dict[str, Any]:
    """Run ``script`` in a fresh interpreter (``blocked`` packages missing); it prints one JSON
    object, the last line of its output, which is returned."""
    code = f"BLOCKED = {blocked!r}\n{BLOCKER}\n{textwrap.dedent(script)}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMBRANE_", "OTEL_"))}
    env.update(MEMBRANE_EMBEDDING_PROVIDER="none", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


#: Imports the API and the workers, builds an app, and reports what tracing did.
STARTS = """
import json, logging, sys
logging.basicConfig(level=logging.WARNING)
import api.app, workers.app, workers.tracing
from membrane_core import Settings, logs, tracing

settings = Settings(otel_exporter=EXPORTER)
app = api.app.create_app(settings)
workers.tracing._trace_pool_process()  # what a pool process runs at its start
print(json.dumps({
    "on": tracing.configure(settings, "check"),
    "app_traced": bool(getattr(app, "_is_instrumented_by_opentelemetry", False)),
    "log_hook": logs._span_ids is not None,
    "extra": sorted(m for m in sys.modules if m.startswith(EXTRA)),
}))
"""


def starts(exporter: str, blocked: tuple[str, ...] = ()) -> dict[str, Any]:
    return run(f"EXPORTER = {exporter!r}\nEXTRA = {EXTRA_MODULES!r}\n{STARTS}", blocked)


def test_tracing_is_off_by_default_and_imports_nothing_of_the_extra() -> None:
    off = starts("none")
    assert off == {**off, "on": False, "app_traced": False, "log_hook": False, "extra": []}
    # positive control: named, the same start imports and wraps
    on = starts("otlp")
    assert on["on"] and on["app_traced"] and on["log_hook"]
    assert {m.split(".")[1] for m in on["extra"]} == {"sdk", "instrumentation", "exporter"}


@pytest.mark.parametrize("exporter", ["none", "otlp"])
def test_the_project_runs_without_the_extra(exporter: str) -> None:
    missing = ("opentelemetry.sdk", "opentelemetry.instrumentation", "opentelemetry.exporter")
    got = starts(exporter, blocked=missing)
    assert got == {**got, "on": False, "app_traced": False, "log_hook": False, "extra": []}
    # named without the extra: a warning, and the process goes on untraced
    warned = "the otel extra is not installed" in got["stderr"]
    assert warned is (exporter == "otlp"), got["stderr"]


def test_the_workers_need_no_opentelemetry_at_all() -> None:
    # FastAPI depends on opentelemetry-api; the workers and the core import none of it
    got = run(
        """
        import json, sys
        import workers.app, workers.tracing
        from membrane_core import Settings, tracing
        workers.tracing._trace_pool_process()
        on = tracing.configure(Settings(otel_exporter="otlp"), "check")
        try:
            import opentelemetry
        except ImportError:
            blocked = True
        else:
            blocked = False
        otel = [m for m in sys.modules if "opentelemetry" in m]
        print(json.dumps({"on": on, "blocked": blocked, "otel": otel}))
        """,
        blocked=("opentelemetry",),
    )
    assert got == {**got, "on": False, "blocked": True, "otel": []}


def test_shutdown_undoes_the_wrapping_of_psycopg() -> None:
    got = run(
        """
        import json, psycopg
        from membrane_core import Settings, tracing

        def state():
            raw, conn = vars(psycopg.RawCursor), vars(psycopg.Connection)
            return [psycopg.Cursor.copy, raw.get("execute"), conn["connect"]]

        before = state()
        assert tracing.configure(Settings(otel_exporter="console"), "check")
        during = state()
        tracing.shutdown()
        after = state()
        print(json.dumps({
            "wrapped": [a is not b for a, b in zip(before, during)],
            "restored": [a is b for a, b in zip(before, after)],
            "off": tracing.provider() is None,
        }))
        """
    )
    assert got["wrapped"] == [True, True, True] and got["restored"] == [True, True, True] and got["off"]


def test_an_unknown_exporter_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMBRANE_OTEL_EXPORTER", "jaeger")
    with pytest.raises(ValidationError, match="otel_exporter"):
        Settings()
    monkeypatch.setenv("MEMBRANE_OTEL_EXPORTER", "console")
    assert Settings().otel_exporter == "console"


def test_the_endpoint_is_the_collectors_base_url() -> None:
    assert tracing.traces_url("http://collector:4318") == "http://collector:4318/v1/traces"
    assert tracing.traces_url("http://collector:4318/") == "http://collector:4318/v1/traces"
    assert tracing.traces_url("https://c.example/otlp/v1/traces") == "https://c.example/otlp/v1/traces"


def test_log_lines_carry_the_span_ids_while_a_source_is_set() -> None:
    def line() -> dict[str, Any]:
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", (), None)
        logs.ContextFilter().filter(record)
        parsed: dict[str, Any] = json.loads(logs.JsonFormatter().format(record))
        return parsed

    assert "trace_id" not in line()
    logs.span_ids(lambda: {"trace_id": "a" * 32, "span_id": "b" * 16})
    try:
        got = line()
    finally:
        logs.span_ids(None)
    assert got["trace_id"] == "a" * 32 and got["span_id"] == "b" * 16
    assert "trace_id" not in line()
