"""compose.yaml and the Dockerfile: structure only (no Docker engine here) (RFC 13.1)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from workers.app import QUEUES

ROOT = Path(__file__).resolve().parents[2]
APP_SERVICES = {"api", "beat", "flower", *(f"worker-{q}" for q in QUEUES)}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return data


def test_every_service_is_present(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"postgres", "redis", "migrate"} | APP_SERVICES
    assert services["postgres"]["image"].startswith("pgvector/pgvector:pg17")
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
    for var in ("POSTGRES_PASSWORD", "REDIS_PASSWORD", "MEMBRANE_API_KEYS", "MEMBRANE_FLOWER_BASIC_AUTH"):
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
