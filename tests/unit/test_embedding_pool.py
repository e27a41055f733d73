"""The embedding pool yields to queries on a shared host (RFC 12.4): its priority, its
threads apart from the query embedding's, and the bound on its share of time."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

from membrane_core import Settings
from membrane_core.jobs.embed import EmbeddingService
from membrane_core.testing import FakeClock
from workers import app as worker_app
from workers import tasks


def _sender(*queues: str) -> Any:
    q = types.SimpleNamespace(consume_from={name: object() for name in queues})
    return types.SimpleNamespace(app=types.SimpleNamespace(amqp=types.SimpleNamespace(queues=q)))


@pytest.mark.parametrize(
    ("queues", "niced"), [(("embedding",), [10]), (("ingest",), []), (("embedding", "llm"), [])]
)
def test_only_a_pool_of_the_embedding_queue_alone_lowers_its_priority(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, queues: tuple[str, ...], niced: list[int]
) -> None:
    calls: list[int] = []
    group = tmp_path / "autogroup"
    monkeypatch.setattr(worker_app.os, "nice", calls.append)
    monkeypatch.setattr(worker_app.os, "getsid", lambda _: worker_app.os.getpid())  # a session leader
    monkeypatch.setattr(worker_app, "AUTOGROUP", group)
    monkeypatch.setattr(worker_app.config, "settings", lambda: Settings(embedding_pool_nice=10))
    worker_app._embedding_pool_priority(sender=_sender(*queues))
    assert calls == niced
    # RFC 12.4: and its session's scheduler group, where nice alone weighs only inside it
    assert (group.read_text() if group.exists() else None) == (str(niced[0]) if niced else None)


def test_a_pool_in_anothers_session_leaves_that_sessions_group(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    group = tmp_path / "autogroup"
    monkeypatch.setattr(worker_app.os, "nice", lambda _: None)
    monkeypatch.setattr(worker_app.os, "getsid", lambda _: -1)  # started from a shell: its session
    monkeypatch.setattr(worker_app, "AUTOGROUP", group)
    monkeypatch.setattr(worker_app.config, "settings", lambda: Settings(embedding_pool_nice=10))
    worker_app._embedding_pool_priority(sender=_sender("embedding"))
    assert not group.exists()


def test_a_nice_of_zero_leaves_the_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(worker_app.os, "nice", calls.append)
    monkeypatch.setattr(worker_app.config, "settings", lambda: Settings(embedding_pool_nice=0))
    worker_app._embedding_pool_priority(sender=_sender("embedding"))
    assert calls == []


class _Task:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def apply_async(self, **kwargs: Any) -> None:
        self.sent.append(kwargs)


def test_a_full_batch_sends_the_next_after_its_pause_and_a_short_one_sends_none() -> None:
    task = _Task()
    tasks._continue(task, {"claimed": 500}, None, 500, pause=1.5)  # type: ignore[arg-type]
    tasks._continue(task, {"claimed": 500}, None, 500)  # type: ignore[arg-type]
    tasks._continue(task, {"claimed": 12}, None, 500, pause=1.5)  # type: ignore[arg-type]
    assert task.sent == [
        {"kwargs": {"limit": None}, "countdown": 1.5},
        {"kwargs": {"limit": None}, "countdown": None},
    ]


def test_the_query_embedder_is_the_pools_unless_its_threads_differ() -> None:
    built: list[str] = []
    pool, query = types.SimpleNamespace(dim=384), types.SimpleNamespace(dim=384)
    db: Any = types.SimpleNamespace(embedding_dim=384)

    def make(role: str, value: object) -> Any:
        return lambda: built.append(role) or value

    shared = EmbeddingService(db, make("pool", pool), clock=FakeClock())
    assert shared.query_provider is pool and shared.provider is pool
    assert built == ["pool"]
    built.clear()
    split = EmbeddingService(db, make("pool", pool), clock=FakeClock(), query_factory=make("query", query))
    assert split.query_provider is query and split.query_provider is query
    assert built == ["query"]  # built once, and the pool's model not loaded for a query


def test_settings_default_to_one_thread_per_role_and_a_lower_pool_priority() -> None:
    s = Settings(embedding_provider="none")
    assert (s.embedding_pool_threads, s.query_embedding_threads, s.embedding_pool_nice) == (1, 1, 10)
    assert s.embedding_pool_share == 1.0
    with pytest.raises(ValueError, match="embedding_pool_share"):
        Settings(embedding_pool_share=0)
