"""The ``membrane`` CLI: library commands in-process, ``membrane run`` as a real process tree."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from membrane_cli.main import app
from membrane_cli.stack import port_open, process_tree
from tests.support import services
from tests.support.services import EMBEDDING_DIM
from tests.support.sql import scalar

FACTS = [
    {
        "source_kind": "observation",
        "scope": "cli-test",
        "content": {"subject": "user", "predicate": "prefers", "object": "dark mode"},
    },
    {"source_kind": "event", "scope": "cli-test", "content": {"text": "opened the settings page"}},
]


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    return {
        "MEMBRANE_DATABASE_URL": database_url,
        "MEMBRANE_EMBEDDING_DIM": str(EMBEDDING_DIM),
        "MEMBRANE_DATA_DIR": str(tmp_path),
    }


def test_migrate_capture_retrieve(env: dict[str, str]) -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["migrate"], env=env)
    assert out.exit_code == 0, out.output
    assert "up to date" in out.output

    out = runner.invoke(app, ["capture", "-"], input=json.dumps(FACTS), env=env)
    assert out.exit_code == 0, out.output
    assert "2 captures, 3 records written" in out.output

    out = runner.invoke(app, ["capture"], input=json.dumps(FACTS[1]), env=env)
    assert out.exit_code == 0, out.output
    assert len(json.loads(out.output)["record_ids"]) == 1

    out = runner.invoke(app, ["retrieve", "dark mode", "--scope", "cli-test", "--json"], env=env)
    assert out.exit_code == 0, out.output
    objects = [(r["payload"] or {}).get("object") for r in json.loads(out.output)["records"]]
    assert "dark mode" in objects

    out = runner.invoke(app, ["retrieve", "dark mode", "--scope", "other-scope", "--json"], env=env)
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["records"] == []


def test_invalid_capture_names_the_field(env: dict[str, str]) -> None:
    out = CliRunner().invoke(app, ["capture"], input=json.dumps({"source_kind": "event"}), env=env)
    assert out.exit_code == 1
    assert "scope" in out.output


def test_bench_query_keeps_to_its_own_store(env: dict[str, str], database_url: str) -> None:
    """RFC 14.1: a benchmark builds its own store, whatever MEMBRANE_DATABASE_URL names."""
    runner = CliRunner()
    out = runner.invoke(app, ["capture"], input=json.dumps(FACTS[1]), env=env)
    assert out.exit_code == 0, out.output  # control: this environment writes to the test database
    written = scalar(database_url, "SELECT count(*) FROM memory_records")
    assert written >= 1
    argv = ["bench", "query", "--embedding", "hashing", "--records", "10", "--queries", "10", "--warmup", "0"]
    out = runner.invoke(app, argv, env=env)
    assert out.exit_code == 0, out.output
    assert "POST /v1/retrieve" in out.output and "vectors stored out of their row: 0 of 10" in out.output
    assert scalar(database_url, "SELECT count(*) FROM memory_records") == written
    assert scalar(database_url, "SELECT count(*) FROM memory_records WHERE scope = 'bench-query'") == 0


def test_groups_list_their_commands() -> None:
    out = CliRunner().invoke(app, ["bench", "--help"])
    assert out.exit_code == 0
    assert "ingest" in out.output
    assert CliRunner().invoke(app, ["--help"]).output.count("run") >= 1


@pytest.mark.slow
@pytest.mark.queue
def test_run_starts_the_stack_runs_the_demo_and_stops_every_child_on_sigterm(
    env: dict[str, str], redis_url: str, tmp_path: Path
) -> None:
    api_port, flower_port = services.free_port(), services.free_port()
    full_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMBRANE_")},
        **env,
        "MEMBRANE_REDIS_URL": redis_url,
        "MEMBRANE_PORT": str(api_port),
        "COLUMNS": "200",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "membrane_cli.main", "run", "--demo", "--flower-port", str(flower_port)],
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "Ctrl-C stops every process" in line:
                break
        output = "".join(lines)
        assert "Ctrl-C stops every process" in output, output
        assert f"http://127.0.0.1:{api_port}" in output
        assert "captured 8 agent events" in output and "8 committed" in output, output
        assert "acme-api runs_on Python 3.13" in output, output
        tree = process_tree(proc.pid)
        assert len(tree) >= 8  # api, five pools (+ their children), beat, flower
        assert port_open("127.0.0.1", api_port)
        # the banner waits for the API's readiness, not Flower's: Flower may bind a moment later
        services.wait_for_port(flower_port, timeout=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest
    assert "stopped." in rest
    time.sleep(0.5)
    alive = [
        p
        for p in tree
        if Path(f"/proc/{p}").exists() and "zombie" not in Path(f"/proc/{p}/status").read_text().lower()
    ]
    assert alive == []
    assert not port_open("127.0.0.1", api_port)
    assert not port_open("127.0.0.1", flower_port)


@pytest.mark.queue
def test_redis_is_reused_when_reachable_else_started_else_explained(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from membrane_cli.stack import Stack, StackError, StackOptions, redis_reachable
    from membrane_core import Settings

    reuse = Stack(Settings(redis_url=redis_url, data_dir=tmp_path), StackOptions(data_dir=tmp_path))
    assert reuse.start_redis() == redis_url
    reuse.stop()
    assert redis_reachable(redis_url)  # not ours: left running

    dead = f"redis://127.0.0.1:{services.free_port()}/0"
    own = Stack(Settings(redis_url=dead, data_dir=tmp_path), StackOptions(data_dir=tmp_path))
    started = own.start_redis()
    try:
        assert started != dead
        assert redis_reachable(started)
    finally:
        own.stop()
    assert not redis_reachable(started)

    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    missing = Stack(Settings(redis_url=dead, data_dir=tmp_path), StackOptions(data_dir=tmp_path))
    with pytest.raises(StackError, match="apt-get install -y redis-server"):
        missing.start_redis()
