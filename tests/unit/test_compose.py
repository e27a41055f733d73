"""compose.yaml and the Dockerfile: structure only (no Docker engine here) (RFC 13.1).

One test compares the Postgres image with the embedded server of the test run.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml  # type: ignore[import-untyped]

from workers.app import DEFAULT_CONCURRENCY, QUEUES, SOFT_SHUTDOWN_SECONDS, WORKER_ENV, worker_argv

ROOT = Path(__file__).resolve().parents[2]
APP_SERVICES = {"api", "beat", "flower", *(f"worker-{q}" for q in QUEUES)}
#: ``pgvector/pgvector:<pgvector version>-pg<Postgres major>[-<Debian release>]``
PGVECTOR_IMAGE = re.compile(r"pgvector/pgvector:(\d+\.\d+\.\d+)-pg(\d+)(-[a-z]+)?")
#: An image tag that names one release: a version (``7.4.11``, ``0.8.5-pg18``), not a moving name.
EXACT_TAG = re.compile(r"\d+\.\d+\.\d+(-[a-z0-9]+)*")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return data


def test_every_service_is_present(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"postgres", "redis", "migrate"} | APP_SERVICES
    assert PGVECTOR_IMAGE.fullmatch(services["postgres"]["image"])
    assert services["redis"]["image"].startswith("redis:")
    for q in QUEUES:
        argv = services[f"worker-{q}"]["command"]
        assert argv[argv.index("-Q") + 1] == q
        assert "-E" in argv  # task events for Flower


def test_ports_are_bound_to_loopback(compose: dict[str, Any]) -> None:
    published = [(name, p) for name, svc in compose["services"].items() for p in svc.get("ports", [])]
    assert {name for name, _ in published} >= {"api", "flower", "postgres", "redis"}
    for name, port in published:
        assert str(port).startswith("127.0.0.1:"), (name, port)


def test_health_checks_and_depends_on_healthy(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, svc in services.items():
        if name != "migrate":
            assert svc["healthcheck"]["test"], name
    for name in APP_SERVICES | {"migrate"}:
        deps = services[name]["depends_on"]
        assert deps["postgres"]["condition"] == "service_healthy", name
        if name != "migrate":
            assert deps["redis"]["condition"] == "service_healthy", name
            assert deps["migrate"]["condition"] == "service_completed_successfully", name


def test_secrets_are_required(compose: dict[str, Any]) -> None:
    text = (ROOT / "compose.yaml").read_text()
    for var in (
        "POSTGRES_PASSWORD",
        "REDIS_PASSWORD",
        "MEMBRANE_API_KEYS",
        "MEMBRANE_FLOWER_BASIC_AUTH",
        "MEMBRANE_METRICS_TOKEN",
    ):
        assert re.search(r"\$\{" + var + r":\?[^}]+\}", text), var
        assert not re.search(r"\$\{" + var + r":-", text), var  # never a default secret
    env = compose["services"]["api"]["environment"]
    assert env["MEMBRANE_API_KEYS"].startswith("${MEMBRANE_API_KEYS:?")
    assert "${POSTGRES_PASSWORD:?" in env["MEMBRANE_DATABASE_URL"]
    assert "--host" in compose["services"]["api"]["command"]  # public inside the container: keys required


def test_dockerfile_ships_every_package() -> None:
    text = (ROOT / "Dockerfile").read_text()
    for part in ("membrane_core", "api", "workers", "membrane_cli", "beat_schedule.py"):
        assert re.search(rf"^COPY .*\b{re.escape(part)}\b", text, re.MULTILINE), part
    assert re.search(r"^USER (?!root)\w+", text, re.MULTILINE)
    # tracing is in the image unless the build leaves it out (RFC 14.4)
    extras = re.search(r"^ARG MEMBRANE_EXTRAS=(\S+)$", text, re.MULTILINE)
    assert extras and "otel" in extras.group(1).split(","), extras
    assert re.search(r'^RUN pip install "\.\[\$\{MEMBRANE_EXTRAS\}\]"', text, re.MULTILINE)


def _tag(image: str) -> str:
    """The tag of an image reference, with a compose default (``${VAR:-default}``) resolved."""
    default = re.fullmatch(r"\$\{\w+:-([^}]+)\}", image)
    ref = default.group(1) if default else image
    assert "@" not in ref and ":" in ref, image
    return ref.rpartition(":")[2]


def test_every_image_is_pinned_to_a_version(compose: dict[str, Any]) -> None:
    for name, svc in compose["services"].items():
        tag = _tag(svc["image"])
        assert EXACT_TAG.fullmatch(tag), (name, svc["image"])
        assert "latest" not in tag, name
    # the application's image is this tree's version
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert {_tag(compose["services"][n]["image"]) for n in APP_SERVICES | {"migrate"}} == {version}
    # the Dockerfile's base too; negative control: the checks refuse a moving tag
    base = re.search(r"^FROM python:(\S+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert base and EXACT_TAG.fullmatch(base.group(1)), base
    assert not any(EXACT_TAG.fullmatch(t) for t in ("latest", "7-alpine", "pg18", "3.11-slim"))


def test_postgres_is_the_embedded_servers_major_and_pgvector(
    compose: dict[str, Any], pg_admin_url: str
) -> None:
    """RFC 11.2, 13.1: production runs what the embedded server (and every test) runs."""
    match = PGVECTOR_IMAGE.fullmatch(compose["services"]["postgres"]["image"])
    assert match, compose["services"]["postgres"]["image"]
    with psycopg.connect(pg_admin_url) as conn:
        row = conn.execute(
            "SELECT current_setting('server_version_num')::int / 10000, default_version"
            "  FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    assert row is not None
    assert (int(match.group(2)), match.group(1)) == (18, row[1]) and row[0] == 18
    # from 18 the image keeps its data below /var/lib/postgresql (in 18/docker)
    assert any(v.endswith(":/var/lib/postgresql") for v in compose["services"]["postgres"]["volumes"])


def test_pools_are_the_stacks_and_llm_runs_one_process(compose: dict[str, Any]) -> None:
    """RFC 12.2: the llm pool's rate limit is per process, so one process is the deployment's rate."""
    for q in QUEUES:
        argv = compose["services"][f"worker-{q}"]["command"]
        assert argv == ["celery", *worker_argv(q)[3:]], q  # what `membrane run` starts
        assert argv[argv.index("-c") + 1] == str(DEFAULT_CONCURRENCY[q]), q
    llm = compose["services"]["worker-llm"]["command"]
    assert llm[llm.index("-c") + 1] == "1"


def test_every_service_has_limits_and_rotated_logs(compose: dict[str, Any]) -> None:
    for name, svc in compose["services"].items():
        limits = svc["deploy"]["resources"]["limits"]
        assert float(limits["cpus"]) > 0 and re.fullmatch(r"\d+[MG]", limits["memory"]), name
        logging = svc["logging"]
        assert logging["driver"] == "json-file", name
        assert re.fullmatch(r"\d+m", logging["options"]["max-size"]), name
        assert int(logging["options"]["max-file"]) >= 2, name


def test_the_application_logs_json_lines(compose: dict[str, Any]) -> None:
    """RFC 14.3: every long-running application container logs JSON (what a shipper parses)."""
    for name in APP_SERVICES:
        env = compose["services"][name]["environment"]
        assert env["MEMBRANE_LOG_FORMAT"] == "${MEMBRANE_LOG_FORMAT:-json}", name


def test_the_api_every_pool_and_flower_are_scrape_targets(compose: dict[str, Any]) -> None:
    """RFC 14.2: each pool serves its own /metrics on the compose network, behind the token."""
    services = compose["services"]
    targets = {"api": "8080", "flower": "5555", **{f"worker-{q}": "9808" for q in QUEUES}}
    for name, port in targets.items():
        labels = services[name]["labels"]
        assert labels["prometheus.io/scrape"] == "true" and labels["prometheus.io/path"] == "/metrics", name
        assert labels["prometheus.io/port"] == port, name
    for q in QUEUES:
        svc = services[f"worker-{q}"]
        env = svc["environment"]
        assert env["MEMBRANE_WORKER_METRICS_PORT"] == "9808" and svc["expose"] == ["9808"], q
        assert env["MEMBRANE_WORKER_METRICS_HOST"] == "0.0.0.0", q  # the network, not the host:
        assert "ports" not in svc, q
        assert env["MEMBRANE_METRICS_TOKEN"].startswith("${MEMBRANE_METRICS_TOKEN:?"), q  # RFC 7.5
    assert services["api"]["environment"]["MEMBRANE_METRICS_TOKEN"].startswith("${MEMBRANE_METRICS_TOKEN:?")


def _bytes(size: str) -> int:
    """A Redis (``192mb``) or compose (``256M``) size in bytes."""
    match = re.fullmatch(r"(\d+)([kmg])b?", size.lower())
    assert match, size
    return int(match.group(1)) << 10 * ("kmg".index(match.group(2)) + 1)


def test_redis_refuses_a_message_rather_than_evict_one(compose: dict[str, Any]) -> None:
    """RFC 9.5: full, the broker refuses a publish (the operation waits in Postgres for
    re-dispatch) before the container's memory limit kills it with every message it holds."""
    redis = compose["services"]["redis"]
    argv = redis["command"]
    assert argv[argv.index("--maxmemory-policy") + 1] == "noeviction"
    limit = _bytes(redis["deploy"]["resources"]["limits"]["memory"])
    assert 0 < _bytes(argv[argv.index("--maxmemory") + 1]) < limit
    assert (_bytes("192mb"), _bytes("256M"), _bytes("2G")) == (192 << 20, 256 << 20, 2 << 30)


def test_a_deploy_stops_each_pool_softly_within_its_grace(compose: dict[str, Any]) -> None:
    """RFC 9.5: SIGTERM is the soft shutdown, and Docker waits for it before its SIGKILL."""
    services = compose["services"]
    for q in QUEUES:
        svc = services[f"worker-{q}"]
        assert {k: svc["environment"].get(k) for k in WORKER_ENV} == WORKER_ENV, q
        grace = re.fullmatch(r"(\d+)s", svc["stop_grace_period"])
        assert grace and int(grace.group(1)) >= SOFT_SHUTDOWN_SECONDS + 10, q  # time to requeue and exit
        argv = svc["command"]
        assert {"--without-gossip", "--without-mingle"} <= set(argv) and "--without-heartbeat" not in argv, q
    # only the pools: the API, beat and Flower stop as they always did
    for name in ("api", "beat", "flower"):
        assert "REMAP_SIGTERM" not in services[name].get("environment", {}), name


def test_each_service_has_the_database_role_membrane_run_gives_it(compose: dict[str, Any]) -> None:
    """RFC 10.5: compose gives the API, each pool and the migration the role `membrane run`
    gives them (the migration runs as a command: `cli`)."""
    from membrane_cli.stack import ROLES

    env = {name: svc.get("environment", {}) for name, svc in compose["services"].items()}
    assert env["api"]["MEMBRANE_DATABASE_ROLE"] == "api"
    assert env["migrate"]["MEMBRANE_DATABASE_ROLE"] == "cli"
    for q in QUEUES:
        assert env[f"worker-{q}"]["MEMBRANE_DATABASE_ROLE"] == ROLES.get(q, "pool"), q
