"""RFC 7.5: without API keys only loopback is served, however the app was started; with keys,
credentials never travel in plaintext off loopback (TLS or an explicit opt-in), checked at
start by every entry point (``python -m api``, ``membrane api``, ``membrane run``, Flower)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from api.app import create_app
from api.auth import Listen, plan_listen
from membrane_cli.main import app as cli
from membrane_cli.stack import Stack, StackOptions, port_open
from membrane_core import Membrane, Settings, errors
from membrane_core.inbox.submit import RecordingDispatcher
from tests.support import services
from tests.support.services import EMBEDDING_DIM
from workers import flower
from workers.app import flower_argv


def _get_all(membrane: Membrane, urls: list[str]) -> list[httpx.Response]:
    app = create_app(membrane=membrane, dispatcher=RecordingDispatcher())

    async def run() -> list[httpx.Response]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)  # no network: the URL only fills the scope
            async with httpx.AsyncClient(transport=transport) as client:
                return [await client.post(u, json={"query": "x"}) for u in urls]

    return asyncio.run(run())


def test_non_loopback_address_is_refused_without_keys(membrane: Membrane) -> None:
    loop, v6, public = _get_all(
        membrane, ["http://127.0.0.1/v1/retrieve", "http://[::1]/v1/retrieve", "http://10.1.2.3/v1/retrieve"]
    )
    assert loop.status_code == 200 and v6.status_code == 200  # positive controls
    assert public.status_code == 403
    assert "MEMBRANE_API_KEYS" in public.json()["error"]["message"]


# -- RFC 7.5: credentials never travel in plaintext off loopback -------------------------------

ROOT = Path(__file__).resolve().parents[2]
KEYS = json.dumps({"guard-key": {"read_scopes": ["*"], "write_scopes": ["*"]}})
#: A Postgres nobody listens on: a refusal that connected first would fail differently.
NOWHERE = "postgresql://membrane@127.0.0.1:1/nothing?connect_timeout=1"
WAYS_OUT = ("MEMBRANE_TLS_CERTFILE", "MEMBRANE_TLS_KEYFILE", "MEMBRANE_ALLOW_INSECURE_CREDENTIALS")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMBRANE_", "FLOWER_"))}
    env.update(MEMBRANE_EMBEDDING_DIM=str(EMBEDDING_DIM), PYTHONPATH=str(ROOT), **extra)
    return env


def _refused(host: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api", "--host", host, "--port", str(services.free_port())],
        env=_env(MEMBRANE_DATABASE_URL=NOWHERE, **extra),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@contextlib.contextmanager
def _api(host: str, log: Path, **extra: str) -> Iterator[int]:
    """``python -m api`` on ``host``; yields its port once it runs."""
    port = services.free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "api", "--host", host, "--port", str(port)],
            env=_env(**extra),
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 45
        while not port_open("127.0.0.1", port):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_keys_off_loopback_without_tls_are_refused_before_anything_connects() -> None:
    proc = _refused("0.0.0.0", MEMBRANE_API_KEYS=KEYS)
    assert proc.returncode == 2, proc.stderr
    assert "plain HTTP on '0.0.0.0'" in proc.stderr
    assert all(name in proc.stderr for name in WAYS_OUT), proc.stderr


def test_keys_on_loopback_are_served_over_plain_http(database_url: str, tmp_path: Path) -> None:
    with _api(
        "127.0.0.1", tmp_path / "api.log", MEMBRANE_DATABASE_URL=database_url, MEMBRANE_API_KEYS=KEYS
    ) as port:
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    assert "plain HTTP" not in (tmp_path / "api.log").read_text()


def test_the_insecure_opt_in_starts_and_warns(database_url: str, tmp_path: Path) -> None:
    log = tmp_path / "api.log"
    with _api(
        "0.0.0.0",
        log,
        MEMBRANE_DATABASE_URL=database_url,
        MEMBRANE_API_KEYS=KEYS,
        MEMBRANE_ALLOW_INSECURE_CREDENTIALS="true",
        MEMBRANE_LOG_FORMAT="text",  # RFC 14.3: a log file is JSON unless told otherwise
    ) as port:
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    text = log.read_text()
    assert "WARNING api.server serving API keys over plain HTTP on '0.0.0.0'" in text, text


def test_tls_files_serve_https(database_url: str, tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    with _api(
        "0.0.0.0",
        tmp_path / "api.log",
        MEMBRANE_DATABASE_URL=database_url,
        MEMBRANE_API_KEYS=KEYS,
        MEMBRANE_TLS_CERTFILE=str(cert),
        MEMBRANE_TLS_KEYFILE=str(key),
    ) as port:
        trusted = ssl.create_default_context(cafile=str(cert))
        assert httpx.get(f"https://127.0.0.1:{port}/healthz", verify=trusted, timeout=5).status_code == 200
        assert httpx.get(f"https://127.0.0.1:{port}/healthz", verify=False, timeout=5).status_code == 200
        with pytest.raises(httpx.HTTPError):  # no plaintext beside it
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)


def test_tls_files_must_come_in_pairs_and_exist(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    half = _refused("127.0.0.1", MEMBRANE_TLS_CERTFILE=str(cert))
    assert half.returncode == 2 and "MEMBRANE_TLS_KEYFILE" in half.stderr, half.stderr
    with pytest.raises(errors.InvalidInput, match="MEMBRANE_TLS_CERTFILE"):
        plan_listen("127.0.0.1", {}, keyfile=key)
    with pytest.raises(errors.InvalidInput, match=f"MEMBRANE_TLS_KEYFILE={tmp_path / 'nope.pem'}"):
        plan_listen("0.0.0.0", {"k": {}}, certfile=cert, keyfile=tmp_path / "nope.pem")
    # positive controls: a pair of files is TLS, no files and loopback is plain HTTP
    assert plan_listen("0.0.0.0", {"k": {}}, certfile=cert, keyfile=key) == Listen(cert, key)
    assert plan_listen("0.0.0.0", {"k": {}}, certfile=cert, keyfile=key).scheme == "https"
    assert plan_listen("127.0.0.1", {"k": {}}) == Listen()
    assert plan_listen("127.0.0.1", {}, certfile=Path(""), keyfile="") == Listen()  # empty is unset


def test_the_rules_in_one_function() -> None:
    with pytest.raises(errors.Forbidden, match="without API keys"):
        plan_listen("0.0.0.0", {}, allow_insecure=True)  # the opt-in never lifts the no-keys rule
    with pytest.raises(errors.Forbidden, match="MEMBRANE_ALLOW_INSECURE_CREDENTIALS"):
        plan_listen("10.1.2.3", {"k": {}})
    opted = plan_listen("10.1.2.3", {"k": {}}, allow_insecure=True)
    assert opted.scheme == "http" and opted.warning and "plain HTTP" in opted.warning
    assert plan_listen("::1", {"k": {}}).warning is None


def test_membrane_run_refuses_before_starting_anything(tmp_path: Path) -> None:
    env = {
        "MEMBRANE_HOST": "0.0.0.0",
        "MEMBRANE_API_KEYS": KEYS,
        "MEMBRANE_DATA_DIR": str(tmp_path),
        "MEMBRANE_DATABASE_URL": NOWHERE,
        "COLUMNS": "200",
    }
    out = CliRunner().invoke(cli, ["run", "--no-flower"], env=env)
    assert out.exit_code == 2, out.output
    assert all(name in out.output for name in WAYS_OUT), out.output
    assert not (tmp_path / "logs").exists()  # no child, no Redis, no Postgres
    out = CliRunner().invoke(cli, ["api", "--host", "0.0.0.0"], env=env)
    assert out.exit_code == 2 and "MEMBRANE_ALLOW_INSECURE_CREDENTIALS" in out.output, out.output

    # Flower's generated basic auth follows the same rule, and so does the opt-in
    stack = Stack(
        Settings(host="0.0.0.0", api_keys={"k": {}}, allow_insecure_credentials=True),
        StackOptions(data_dir=tmp_path, host="0.0.0.0"),
    )
    assert stack.preflight().scheme == "http"
    assert [w.split(" over")[0] for w in stack.warnings] == ["serving API keys", "serving Flower basic auth"]
    assert not (tmp_path / "logs").exists()


def test_flower_basic_auth_off_loopback_needs_tls_or_the_opt_in(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], certificate: tuple[Path, Path]
) -> None:
    for name in list(os.environ):
        if name.startswith(("MEMBRANE_", "FLOWER_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MEMBRANE_FLOWER_BASIC_AUTH", "admin:secret")
    with pytest.raises(SystemExit) as refused:
        flower.command(["--address=0.0.0.0"])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert "Flower basic auth" in err and all(name in err for name in WAYS_OUT), err

    argv, _ = flower.command(["--address=127.0.0.1"])  # positive control: loopback
    assert "--address=127.0.0.1" in argv and not any(a.startswith("--certfile") for a in argv)
    monkeypatch.delenv("MEMBRANE_FLOWER_BASIC_AUTH")
    argv, env = flower.command(["--address=0.0.0.0", "--open"])  # no credentials to protect
    assert "--address=0.0.0.0" in argv and "FLOWER_BASIC_AUTH" not in env
    monkeypatch.setenv("MEMBRANE_FLOWER_BASIC_AUTH", "admin:secret")
    cert, key = certificate
    monkeypatch.setenv("MEMBRANE_TLS_CERTFILE", str(cert))
    monkeypatch.setenv("MEMBRANE_TLS_KEYFILE", str(key))
    argv, _ = flower.command(["--address=0.0.0.0"])
    assert argv[-2:] == [f"--certfile={cert}", f"--keyfile={key}"]
    monkeypatch.delenv("MEMBRANE_TLS_CERTFILE")
    monkeypatch.delenv("MEMBRANE_TLS_KEYFILE")
    monkeypatch.setenv("MEMBRANE_ALLOW_INSECURE_CREDENTIALS", "true")
    argv, _ = flower.command(["--address=0.0.0.0"])
    assert "--address=0.0.0.0" in argv
    assert "plain HTTP" in capsys.readouterr().err


@pytest.mark.queue
def test_flower_serves_https_with_the_tls_files(
    redis_url: str, tmp_path: Path, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    port = services.free_port()
    env = _env(
        MEMBRANE_REDIS_URL=redis_url,
        MEMBRANE_FLOWER_BASIC_AUTH="admin:secret",
        MEMBRANE_TLS_CERTFILE=str(cert),
        MEMBRANE_TLS_KEYFILE=str(key),
    )
    log = tmp_path / "flower.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            flower_argv(Settings(), address="127.0.0.1", port=port),
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 45
        while not port_open("127.0.0.1", port):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        trusted = ssl.create_default_context(cafile=str(cert))
        url = f"https://127.0.0.1:{port}/api/workers"
        assert httpx.get(url, verify=trusted, timeout=10).status_code == 401
        assert httpx.get(url, verify=trusted, auth=("admin", "secret"), timeout=10).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)
