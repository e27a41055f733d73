"""The Python SDK's export, import and erasure (RFC 15) against live APIs: a scope exported
from one deployment into a tar file, imported into another with its corrections, and erased
there after a dry run; the async client streams the same bundle."""

from __future__ import annotations

import asyncio
import tarfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from membrane_client import AsyncClient, Client, Conflict, Forbidden

from api.app import create_app
from api.ratelimit import Unlimited
from membrane_core import Membrane, Settings
from membrane_core.inbox.submit import InlineDispatcher
from tests.support import services
from tests.support.api import ServeFn, Server
from tests.support.services import EMBEDDING_DIM

KEYS = {
    "ops-key": {"read_scopes": ["*"], "write_scopes": ["*"], "actor": "ops", "operator": True, "erase": True},
    "reader-key": {"read_scopes": ["proj"], "write_scopes": ["proj"], "actor": "reader"},
}


@pytest.fixture
def target(pg_admin_url: str, tmp_path: Path) -> Iterator[str]:
    """A second deployment on its own database; its URL."""
    with services.fresh_database(pg_admin_url) as url:
        settings = Settings(
            database_url=url,
            data_dir=tmp_path / "t",
            embedding_dim=EMBEDDING_DIM,
            api_keys=KEYS,
            request_pool_timeout_seconds=30.0,
        )
        with Membrane(settings) as m:
            app = create_app(
                settings, membrane=m, dispatcher=InlineDispatcher(m.inbox_worker), rate_limiter=Unlimited()
            )
            with Server(app) as server:
                yield server.url


def test_a_scope_moves_and_is_forgotten_through_the_sdk(serve: ServeFn, target: str, tmp_path: Path) -> None:
    source = str(serve(keys=KEYS).base_url)
    with (
        Client(source, api_key="ops-key", timeout=30.0) as ops,
        Client(source, api_key="reader-key", timeout=30.0) as reader,
        Client(target, api_key="ops-key", timeout=30.0) as there,
    ):
        op = ops.capture(
            {
                "source_kind": "observation",
                "scope": "proj",
                "content": {"subject": "ann", "predicate": "likes", "object": "tea"},
            },
            wait=10,
        )
        tea = op.record_ids[1]
        coffee = ops.supersede(
            tea,
            {"object": "coffee"},
            rationale="changed",
            evidence=[{"kind": "observation", "ref": "x"}],
            wait=10,
        ).record_ids[-1]
        bundle = reader.export(tmp_path / "proj.tar", scope="proj")
        with tarfile.open(bundle) as tar:
            assert tar.getnames()[-1] == "manifest.json"
        with pytest.raises(Forbidden):
            reader.export(tmp_path / "no.tar", scope="other")
        assert not (tmp_path / "no.tar").exists()

        report = there.import_bundle(bundle)
        assert report.records_written >= 3 and report.chains.get("new", 0) >= 3
        assert there.get(coffee).status == "active" and there.get(tea).status == "retracted"
        with pytest.raises(Conflict):
            there.import_bundle(bundle, on_conflict="fail")

        dry = there.erase(scope="proj", reason="asked")
        assert dry.dry_run and dry.counts["memory_records"] == report.records_written
        done = there.erase(scope="proj", reason="asked", confirm=dry.confirm)
        assert not done.dry_run and done.erasure_id is not None
        assert there.list_records(scope="proj").records == []


def test_the_async_client_streams_the_same_bundle(serve: ServeFn, tmp_path: Path) -> None:
    url = str(serve(keys=KEYS).base_url)

    async def main() -> None:
        async with AsyncClient(url, api_key="ops-key", timeout=30.0) as ops:
            await ops.capture(
                {"source_kind": "event", "scope": "proj", "content": {"text": "hello"}}, wait=10
            )
            path = await ops.export(tmp_path / "a.tar", scope=["proj"], with_vectors=False)
            with tarfile.open(path) as tar:
                assert "records-000001.ndjson" in tar.getnames()
            dry = await ops.erase(scope="proj", reason="asked")
            assert dry.counts["memory_records"] == 1

    asyncio.run(main())


def test_the_export_query_and_the_import_body() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/v1/import":
            return httpx.Response(200, json={"records_written": 0})
        return httpx.Response(200, content=b"")

    with Client("http://x", transport=httpx.MockTransport(answer)) as client:
        client.import_bundle(__file__, on_conflict="overwrite")
    assert (
        seen[0].headers["content-type"] == "application/x-tar"
        and seen[0].url.params["on_conflict"] == "overwrite"
    )
    assert seen[0].content == Path(__file__).read_bytes()
