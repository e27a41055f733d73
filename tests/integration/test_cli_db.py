"""``membrane db status|stop|start`` on the embedded Postgres, and where ``membrane run`` says it
is (RFC 11.2).

``status`` is checked against the run's shared server, which it only reads; stopping and
starting happen on a server of the test's own data folder.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from rich.console import Console
from typer.testing import CliRunner

from membrane_cli import main
from membrane_cli.stack import Stack, StackOptions, pid_alive
from membrane_core import Settings
from membrane_core.storage import embedded


def _db(args: list[str], data_dir: Path) -> tuple[int, str]:
    env = {"MEMBRANE_DATA_DIR": str(data_dir), "MEMBRANE_DATABASE_URL": ""}
    out = CliRunner().invoke(main.app, ["db", *args], env=env)
    if out.exception is not None and not isinstance(out.exception, SystemExit):
        raise out.exception
    return out.exit_code, out.output if "--json" in args else " ".join(out.output.split())  # unwrapped


def _status(data_dir: Path) -> tuple[int, dict[str, Any]]:
    code, output = _db(["status", "--json"], data_dir)
    return code, json.loads(output)


@pytest.fixture
def private_dir(tmp_path: Path) -> Iterator[Path]:
    """A data folder of the test's own; its server, if one was started, is stopped after."""
    data_dir = tmp_path / "membrane"
    yield data_dir
    pm = embedded.postmaster(data_dir)
    if pm is not None and pid_alive(pm.pid):  # not the stale pid file of a crash
        embedded.stop(data_dir)


def test_status_reports_what_the_shared_server_says_of_itself(pg_admin_url: str) -> None:
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        pgdata, started = conn.execute(
            "SELECT current_setting('data_directory'), pg_postmaster_start_time()"
        ).fetchone() or (None, None)
    data_dir = Path(str(pgdata)).parent
    postmaster = int((Path(str(pgdata)) / "postmaster.pid").read_text().split()[0])

    code, st = _status(data_dir)
    assert code == 0, st
    assert st["running"] is True and st["error"] is None
    assert st["data_dir"] == str(pgdata)
    assert st["pid"] == postmaster
    socket = psycopg.conninfo.conninfo_to_dict(pg_admin_url)["host"]
    assert st["socket_dir"] == socket
    assert st["started_at"] == started.isoformat()
    assert st["uptime_seconds"] > 0
    assert st["databases"]["membrane_template"] > 1_000_000  # a migrated database, in bytes
    assert "postgres" in st["databases"]

    code, table = _db(["status"], data_dir)
    assert code == 0
    assert "running" in table and f"pid {postmaster}" in table and "membrane_template" in table


def test_stop_and_start_a_server_of_its_own(private_dir: Path) -> None:
    code, st = _status(private_dir)
    assert (code, st["running"], st["pid"]) == (1, False, None)  # nothing was ever started there

    code, output = _db(["start"], private_dir)
    assert code == 0, output
    assert "running" in output
    code, first = _status(private_dir)
    assert code == 0 and first["running"] is True
    assert first["data_dir"] == str(private_dir / "pg")

    code, output = _db(["stop"], private_dir)
    assert code == 0, output
    assert f"stopped the embedded Postgres (pid {first['pid']})" in output
    assert not (private_dir / "pg" / "postmaster.pid").exists()
    code, st = _status(private_dir)
    assert (code, st["running"]) == (1, False)
    code, output = _db(["status"], private_dir)
    assert code == 1 and "not running" in output

    code, output = _db(["stop"], private_dir)  # nothing to stop: not a failure
    assert code == 0 and "does not run" in output

    code, output = _db(["start"], private_dir)  # again, in this process
    assert code == 0, output
    code, second = _status(private_dir)
    assert code == 0 and second["running"] is True
    assert second["pid"] != first["pid"]


def test_a_crashed_server_reads_as_not_running_and_start_recovers_it(private_dir: Path) -> None:
    assert _db(["start"], private_dir)[0] == 0
    pm = embedded.postmaster(private_dir)
    assert pm is not None
    embedded.stop(private_dir)
    (private_dir / "pg" / "postmaster.pid").write_text(  # what a killed postmaster leaves
        f"{2**22 + 7}\n{private_dir / 'pg'}\n0\n{pm.port}\n{pm.socket_dir}\nlocalhost\n0 0\nready\n"
    )
    code, output = _db(["status"], private_dir)
    assert code == 1 and "not running" in output and "a crash" in output
    code, output = _db(["stop"], private_dir)
    assert code == 0 and "does not run" in output
    code, output = _db(["start"], private_dir)
    assert code == 0, output
    assert _status(private_dir)[1]["running"] is True


@pytest.mark.parametrize("keep_db", [False, True])
def test_run_banner_names_the_data_folder_and_socket(
    private_dir: Path, monkeypatch: pytest.MonkeyPatch, keep_db: bool
) -> None:
    stack = Stack(
        Settings(database_url=None, data_dir=private_dir),
        StackOptions(data_dir=private_dir, stop_database=not keep_db),
    )
    stack.embedded, stack.dsn, stack.redis_url = True, embedded.dsn(private_dir), "redis://127.0.0.1:1/0"
    pm = embedded.postmaster(private_dir)
    assert pm is not None and pm.socket_dir is not None
    out = io.StringIO()
    monkeypatch.setattr(main, "console", Console(file=out, width=400))
    main.print_stack(stack)
    banner = out.getvalue()
    assert f"embedded, data {private_dir / 'pg'}, socket {pm.socket_dir} (port {pm.port})" in banner
    assert ("membrane db stop stops it" in banner) is keep_db
