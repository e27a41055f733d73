"""Log formats, the log context and request ids (RFC 14.3)."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from api import access
from api.errors import CatchAll
from membrane_core import Settings, logs
from workers import logs as worker_logs

ROOT = Path(__file__).resolve().parents[2]


def record(msg: str = "hello %s", *args: Any, exc: bool = False, **extra: Any) -> logging.LogRecord:
    """A record as ``logger.info(msg, *args, extra=extra)`` makes it, through the context filter."""
    exc_info = None
    if exc:
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            exc_info = sys.exc_info()
    rec = logging.getLogger("membrane.test").makeRecord(
        "membrane.test", logging.INFO, __file__, 1, msg, args or ("world",), exc_info, extra=extra
    )
    logs.ContextFilter().filter(rec)
    return rec


def as_json(rec: logging.LogRecord) -> dict[str, Any]:
    text = logs.JsonFormatter().format(rec)
    assert "\n" not in text  # one line a record
    data: dict[str, Any] = json.loads(text)
    return data


def test_json_lines_carry_the_extra_fields() -> None:
    line = as_json(record(operations=3, kind="capture"))
    assert line["message"] == "hello world" and line["level"] == "INFO" and line["logger"] == "membrane.test"
    assert line["operations"] == 3 and line["kind"] == "capture"
    assert datetime.fromisoformat(line["time"]).tzinfo is not None and isinstance(line["pid"], int)
    # negative control: the record's own attributes are not repeated as fields
    assert not {"args", "msg", "levelno", "pathname", "exc_info", "color_message"} & set(line)


def test_json_lines_carry_the_exception() -> None:
    line = as_json(record(exc=True))
    assert "Traceback" in line["exception"] and "RuntimeError: boom" in line["exception"]
    assert "exception" not in as_json(record())  # control


def test_values_json_cannot_write_are_written_not_dropped() -> None:
    circular: dict[str, Any] = {}
    circular["self"] = circular
    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    ident = uuid.uuid4()
    line = as_json(
        record(
            when=when,
            ident=ident,
            tags={"b"},
            path=Path("/x"),
            thing=object(),
            circular=circular,
            tuple_keys={(1, 2): "v"},
            fine=[1, "two"],
        )
    )
    assert line["when"] == when.isoformat() and line["ident"] == str(ident)
    assert line["tags"] == ["b"] and line["path"] == "/x" and line["thing"].startswith("<object")
    assert line["circular"] == repr(circular) and line["tuple_keys"] == repr({(1, 2): "v"})
    assert line["fine"] == [1, "two"]  # the others are kept as they are


def test_a_field_named_like_a_key_of_the_line_is_kept_apart() -> None:
    line = as_json(record(level="custom", time=1))
    assert line["level"] == "INFO" and line["extra_level"] == "custom" and line["extra_time"] == 1


def test_the_log_context_reaches_every_record_and_is_undone() -> None:
    token = logs.bind(request_id="req-1", actor="key:abc")
    try:
        inner = logs.bind(task="membrane.ingest")
        assert as_json(record())["task"] == "membrane.ingest"
        logs.unbind(inner)
        line = as_json(record())
        assert line["request_id"] == "req-1" and line["actor"] == "key:abc" and "task" not in line
        assert logs.request_id() == "req-1"
        assert as_json(record(request_id="explicit"))["request_id"] == "explicit"  # extra wins
    finally:
        logs.unbind(token)
    assert logs.request_id() is None and "request_id" not in as_json(record())


def test_text_lines_for_a_terminal() -> None:
    rec = record(operations=3, note="two words", request_id="req-1", exc=True)
    text = logs.TextFormatter().format(rec)
    first = text.splitlines()[0]
    assert " INFO membrane.test hello world " in first
    assert first.endswith('operations=3 note="two words" request_id=req-1')
    assert "RuntimeError: boom" in text  # the traceback follows the line
    assert logs.TextFormatter().format(record()).endswith("hello world")  # control: no fields, no pairs


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_is_text_on_a_terminal_and_json_elsewhere() -> None:
    assert logs.resolve("auto", _Tty()) == "text"
    assert logs.resolve("auto", io.StringIO()) == "json"
    assert logs.resolve("json", _Tty()) == "json" and logs.resolve("text", io.StringIO()) == "text"
    with pytest.raises(ValueError, match="json, text or auto"):
        logs.resolve("xml")


def test_levels_and_settings() -> None:
    assert logs.level_name("debug") == "DEBUG" and logs.level_name(logging.WARNING) == "WARNING"
    with pytest.raises(ValueError, match="log level"):
        logs.level_name("loud")
    assert Settings(log_level="warning").log_level == "WARNING" and Settings().log_level is None
    assert Settings().log_format == "auto"
    for bad in ({"log_level": "loud"}, {"log_format": "xml"}):
        with pytest.raises(ValidationError):
            Settings(**bad)


def test_request_ids_are_bounded_safe_tokens() -> None:
    good = ["abc", "6f1c2b3a-0d4e-4f5a-9b8c-7d6e5f4a3b2c", "Root=1-67891233-abcdef", "a" * 128]
    bad = ["", "a b", "a\nb", "a;b", "é", "a" * 129, None, 5]
    assert all(logs.is_request_id(v) for v in good)
    assert not any(logs.is_request_id(v) for v in bad)
    made = logs.new_request_id()
    assert logs.is_request_id(made) and made != logs.new_request_id()


def test_configure_sets_up_a_process(tmp_path: Path) -> None:
    """In a child process: configure() replaces the root's handlers with the chosen format."""
    code = (
        "import logging; from membrane_core import logs\n"
        "logging.basicConfig(format='OLD %(message)s')\n"
        "logs.configure('json', 'info')\n"
        "logs.bind(request_id='req-9')\n"
        "logging.getLogger('x').info('hi', extra={'n': 1})\n"
        "logging.getLogger('x').debug('hidden')\n"
        "logging.getLogger('httpx').info('an HTTP call')\n"
        "logging.getLogger('uvicorn.error').info('from uvicorn')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    lines = [json.loads(line) for line in out.stderr.splitlines()]
    assert [(e["logger"], e["message"]) for e in lines] == [("x", "hi"), ("uvicorn.error", "from uvicorn")]
    assert lines[0]["n"] == 1 and lines[0]["request_id"] == "req-9"
    assert "OLD" not in out.stderr


# -- the API's request context ------------------------------------------------------------------


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.addFilter(logs.ContextFilter())

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _app() -> Starlette:
    def write(request: Request) -> JSONResponse:  # a sync handler: it runs on a thread
        access.identify("key:abc")
        access.operations([uuid.UUID(int=i) for i in range(12)])
        logging.getLogger("membrane.test").info("inside")
        return JSONResponse({"request_id": logs.request_id()}, status_code=202)

    def fail(request: Request) -> PlainTextResponse:
        raise RuntimeError("a bug")

    def healthz(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    app = Starlette(
        routes=[Route("/write", write, methods=["POST"]), Route("/healthz", healthz), Route("/fail", fail)]
    )
    app.add_middleware(CatchAll)  # as the API stacks them (api.app.create_app)
    app.add_middleware(access.RequestContext)
    return app


LOGGERS = ("api.access", "api.errors", "membrane.test")


@pytest.fixture
def lines() -> Any:
    handler = _Lines()
    for name in LOGGERS:
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.DEBUG)
    yield handler.records
    for name in LOGGERS:
        logging.getLogger(name).removeHandler(handler)
        logging.getLogger(name).setLevel(logging.NOTSET)


def test_a_sane_request_id_is_kept_and_reaches_the_handler_and_the_access_line(lines: Any) -> None:
    with TestClient(_app()) as client:
        resp = client.post("/write", headers={"X-Request-ID": "req-42"})
    assert resp.headers["X-Request-ID"] == "req-42" and resp.json() == {"request_id": "req-42"}
    inside, line = lines
    assert inside.request_id == "req-42" and inside.actor == "key:abc"
    assert line.name == "api.access" and line.levelno == logging.INFO
    assert (line.method, line.path, line.status, line.request_id) == ("POST", "/write", 202, "req-42")
    assert line.actor == "key:abc" and line.operations == 12 and len(line.operation_ids) == 10
    assert line.duration_ms >= 0 and line.getMessage() == "POST /write 202"


def test_an_unsafe_request_id_is_replaced_and_probes_are_quiet(lines: Any) -> None:
    with TestClient(_app()) as client:
        made = client.get("/healthz", headers={"X-Request-ID": "two words"}).headers["X-Request-ID"]
        anonymous = client.get("/healthz").headers["X-Request-ID"]
        failed = client.get("/fail")
    assert logs.is_request_id(made) and made != "two words" and made != anonymous
    probe, _, unhandled, error = lines
    assert unhandled.name == "api.errors" and unhandled.request_id == error.request_id  # CatchAll's line
    assert probe.levelno == logging.DEBUG and probe.request_id == made and not hasattr(probe, "actor")
    assert error.status == 500 and error.levelno == logging.INFO and error.path == "/fail"
    assert failed.status_code == 500 and logs.is_request_id(failed.headers["X-Request-ID"])


# -- Celery ---------------------------------------------------------------------------------------


class _Request:
    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


class _Task:
    def __init__(self, name: str, **request: Any) -> None:
        self.name = name
        self.request = _Request(**request)


def test_a_task_binds_its_request_id_and_operations() -> None:
    ids = [str(uuid.UUID(int=i)) for i in range(15)]
    fields = worker_logs.task_fields(_Task("membrane.ingest", membrane_request_id="req-7"), "t1", [ids], {})
    assert fields == {
        "task": "membrane.ingest",
        "task_id": "t1",
        "request_id": "req-7",
        "operation_ids": ids[:10],
        "operations": 15,
    }
    one = worker_logs.task_fields(_Task("membrane.revision"), "t2", [], {"operation_id": ids[0]})
    assert one == {"task": "membrane.revision", "task_id": "t2", "operation_ids": [ids[0]]}
    job = worker_logs.task_fields(
        _Task("membrane.maintenance_job", membrane_request_id="a b"), "t3", ["decay"], {}
    )
    assert job == {"task": "membrane.maintenance_job", "task_id": "t3"}  # no ids; a bad header dropped


def test_a_published_task_carries_the_bound_request_id() -> None:
    headers: dict[str, Any] = {}
    worker_logs._carry_request_id(headers=headers)
    assert headers == {}  # control: nothing bound, nothing sent
    token = logs.bind(request_id="req-8")
    try:
        worker_logs._carry_request_id(headers=headers)
    finally:
        logs.unbind(token)
    assert headers == {worker_logs.HEADER: "req-8"}


def test_a_celery_process_level() -> None:
    assert worker_logs.level(Settings(), logging.DEBUG) == "DEBUG"  # unset: Celery's --loglevel
    assert worker_logs.level(Settings(log_level="error"), logging.DEBUG) == "ERROR"
    assert worker_logs.level(Settings(), None) == "INFO"
