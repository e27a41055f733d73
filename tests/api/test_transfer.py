"""Export and import through HTTP (RFC 15.1, 15.2): ``GET /v1/export`` streams a tar with the
key's trust, ``POST /v1/import`` takes it into another deployment, an operator's call."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.app import create_app
from api.ratelimit import Unlimited
from membrane_core import Membrane, Settings
from membrane_core.inbox.submit import RecordingDispatcher
from tests.support import services
from tests.support.api import ServeFn, Server
from tests.support.services import EMBEDDING_DIM

KEYS: dict[str, dict[str, Any]] = {
    "reader-key": {"read_scopes": ["proj"], "write_scopes": ["proj"], "actor": "reader"},
    "ops-key": {"read_scopes": ["*"], "write_scopes": ["*"], "actor": "ops", "operator": True},
    "eraser-key": {"read_scopes": ["proj"], "write_scopes": ["proj"], "actor": "dpo", "erase": True},
}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def capture(client: httpx.Client, scope: str, s: str, o: str) -> list[str]:
    resp = client.post(
        "/v1/captures",
        params={"wait": 10},
        json={
            "source_kind": "observation",
            "scope": scope,
            "content": {"subject": s, "predicate": "likes", "object": o},
        },
        headers=bearer("ops-key"),
    )
    assert resp.status_code == 200 and resp.json()["status"] == "succeeded", resp.text
    ids: list[str] = resp.json()["record_ids"]
    return ids


@pytest.fixture
def target(pg_admin_url: str, tmp_path: Path) -> Iterator[httpx.Client]:
    """A second deployment on its own database."""
    with services.fresh_database(pg_admin_url) as url:
        settings = Settings(
            database_url=url,
            data_dir=tmp_path / "target",
            embedding_dim=EMBEDDING_DIM,
            api_keys=KEYS,
            request_pool_timeout_seconds=30.0,
        )
        with Membrane(settings) as m:
            app = create_app(settings, membrane=m, dispatcher=RecordingDispatcher(), rate_limiter=Unlimited())
            with Server(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
                yield client


def members(tar_bytes: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        out = {}
        for m in tar.getmembers():
            f = tar.extractfile(m)
            assert f is not None
            out[m.name] = f.read()
        return out


def test_a_tar_streams_out_with_the_keys_trust_and_imports_elsewhere(
    serve: ServeFn, target: httpx.Client
) -> None:
    client = serve(keys=KEYS)
    tea = capture(client, "proj", "ann", "tea")[1]
    capture(client, "other", "bob", "rain")
    resp = client.post(
        f"/v1/records/{tea}/supersede",
        params={"wait": 10},
        json={
            "record": {"object": "coffee"},
            "rationale": "changed",
            "evidence": [{"kind": "observation", "ref": "x"}],
        },
        headers=bearer("ops-key"),
    )
    assert resp.status_code == 200, resp.text

    got = client.get("/v1/export", headers=bearer("reader-key"))
    assert got.status_code == 200 and got.headers["content-type"] == "application/x-tar"
    files = members(got.content)
    assert list(files)[-1] == "manifest.json"
    manifest = json.loads(files["manifest.json"])
    assert manifest["exported_by"] == "reader" and manifest["filters"]["scopes"] is None
    scopes = {json.loads(line)["scope"] for line in files["records-000001.ndjson"].splitlines()}
    assert scopes == {"proj"}  # the key reads proj only: the other scope stays

    denied = client.get("/v1/export", params={"scope": "other"}, headers=bearer("reader-key"))
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "forbidden"

    refused = target.post("/v1/import", content=got.content, headers=bearer("reader-key"))
    assert refused.status_code == 403
    bad = target.post("/v1/import", content=b"not a tar", headers=bearer("ops-key"))
    assert bad.status_code == 422, bad.text
    # it names what the caller sent, never where the server kept it
    message = bad.json()["error"]["message"]
    assert message.startswith("the request body is not a folder or a tar") and "/tmp" not in message
    done = target.post("/v1/import", content=got.content, headers=bearer("ops-key"))
    assert done.status_code == 200, done.text
    assert done.json()["records_written"] == manifest["counts"]["records"]

    found = target.post(
        "/v1/retrieve",
        json={"query": "ann likes tea coffee", "scopes": ["proj"]},
        headers=bearer("reader-key"),
    ).json()["records"]
    objects = {r["payload"]["object"] for r in found if r["type"] == "semantic"}
    assert "coffee" in objects and "tea" not in objects  # the correction moved with the facts
    again = target.post(
        "/v1/import", content=got.content, params={"on_conflict": "fail"}, headers=bearer("ops-key")
    )
    assert again.status_code == 409, again.text


def test_an_erase_key_counts_then_erases_with_the_confirmation(serve: ServeFn) -> None:
    client = serve(keys=KEYS)
    tea = capture(client, "proj", "ann", "tea")[1]
    kept = capture(client, "other", "bob", "rain")[1]
    body = {"scope": "proj", "reason": "asked to be forgotten"}
    assert client.post("/v1/erase", json=body, headers=bearer("ops-key")).status_code == 403  # no erase flag
    assert (
        client.post("/v1/erase", json={**body, "scope": "other"}, headers=bearer("eraser-key")).status_code
        == 403
    )
    unconfirmed = client.post("/v1/erase", json={**body, "dry_run": False}, headers=bearer("eraser-key"))
    assert unconfirmed.status_code == 422 and "confirm" in unconfirmed.text
    dry = client.post("/v1/erase", json=body, headers=bearer("eraser-key"))
    assert dry.status_code == 200, dry.text
    assert dry.json()["dry_run"] is True and dry.json()["counts"]["memory_records"] >= 2
    assert (
        client.get(f"/v1/records/{tea}", headers=bearer("ops-key")).status_code == 200
    )  # a dry run keeps it
    done = client.post(
        "/v1/erase",
        json={**body, "dry_run": False, "confirm": dry.json()["confirm"]},
        headers=bearer("eraser-key"),
    )
    assert done.status_code == 200, done.text
    assert done.json()["erasure_id"] and done.json()["counts"] == dry.json()["counts"]
    assert client.get(f"/v1/records/{tea}", headers=bearer("ops-key")).status_code == 404
    assert (
        client.get(f"/v1/records/{kept}", headers=bearer("ops-key")).status_code == 200
    )  # other scope stays
