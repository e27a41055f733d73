"""The pipeline through real Celery workers, a real redis-server and Postgres (RFC 9.1, 9.5).

The project's app runs its tasks in an in-process worker (``celery_worker``,
tests/queue/conftest.py); a SIGKILL mid-batch and beat's re-dispatch need real worker and
beat processes (``spawn``).
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from celery.worker import WorkController

from membrane_core import Membrane, Settings
from membrane_core.enums import OperationKind, OperationStatus
from membrane_core.storage.records import norm_term
from membrane_core.trust import DEVELOPMENT_POLICY
from tests.support.processes import Spawn, wait_until
from tests.support.services import Redis
from tests.support.sql import scalar
from workers.app import make_app
from workers.dispatch import CeleryDispatcher

pytestmark = pytest.mark.slow

DEV = DEVELOPMENT_POLICY


def event(i: int) -> dict[str, object]:
    return {"source_kind": "event", "scope": "proj", "content": {"text": f"step {i} done"}}


def all_finished(m: Membrane, ids: list) -> bool:
    return all(v.status in (OperationStatus.SUCCEEDED, OperationStatus.FAILED) for v in m.inbox.wait(ids, 0))


@pytest.mark.in_process_worker(queues=("ingest",))
def test_capture_through_the_queue(
    live: Membrane, celery_worker: WorkController, dispatcher: CeleryDispatcher, database_url: str
) -> None:
    single = live.inbox.submit_capture(event(0), DEV)
    batch = live.inbox.submit_captures([event(i) for i in range(1, 301)] + [{"source_kind": "bogus"}], DEV)
    assert dispatcher.publish(OperationKind.CAPTURE, [single.operation_id])
    assert dispatcher.publish(OperationKind.CAPTURE, [v.operation_id for v in batch])
    done = live.inbox.wait([single.operation_id] + [v.operation_id for v in batch], 90)
    statuses = [v.status for v in done]
    assert statuses.count(OperationStatus.SUCCEEDED) == 301
    assert statuses[-1] is OperationStatus.FAILED  # the bad item, rejected on its own
    assert done[0].record_ids == [single.record_id]
    payload = live.get(single.record_id).payload
    assert payload is not None and payload["text"] == "step 0 done"
    assert scalar(database_url, "SELECT count(*) FROM memory_records") == 301


def _fact_lock_key(scope: str, s: str, p: str, o: str) -> str:
    return chr(31).join([scope, norm_term(s), norm_term(p), norm_term(o)])


def test_sigkill_mid_batch_commits_every_capture_exactly_once(
    live: Membrane,
    spawn: Spawn,
    dispatcher: CeleryDispatcher,
    database_url: str,
) -> None:
    n = 400
    obs = {
        "source_kind": "observation",
        "scope": "proj",
        "content": {"subject": "user", "predicate": "likes", "object": "tea"},
    }
    views = live.inbox.submit_captures([event(i) for i in range(n)] + [obs], DEV)
    ids = [v.operation_id for v in views]
    dbname = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
    # Hold the fact key's advisory lock: the worker will block inside its batch transaction,
    # after its COPYs and before its commit -- the worst moment to die.
    blocker = psycopg.connect(database_url)
    blocker.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 7214))",
        (_fact_lock_key("proj", "user", "likes", "tea"),),
    )
    worker = spawn("worker", "ingest", concurrency=1, name="doomed")
    assert dispatcher.publish(OperationKind.CAPTURE, ids)

    def worker_blocked() -> bool:
        return (
            scalar(
                database_url,
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                "AND wait_event_type = 'Lock' AND wait_event = 'advisory'",
                dbname,
            )
            == 1
        )

    wait_until(worker_blocked, what="the worker blocked mid-batch")
    worker.kill()
    blocker.rollback()  # let the orphaned backend run into its dead client
    blocker.close()
    wait_until(
        lambda: (
            scalar(
                database_url,
                "SELECT count(*) FROM pg_stat_activity WHERE "
                "datname = %s AND state <> 'idle' AND pid <> pg_backend_pid()",
                dbname,
            )
            == 0
        ),
        what="the dead worker's transaction ended",
    )
    assert scalar(database_url, "SELECT count(*) FROM memory_records") == 0
    assert scalar(database_url, "SELECT count(*) FROM operations WHERE status = 'queued'") == n + 1

    # A new worker and beat's re-dispatch (the killed message is never acked).
    env = {
        "MEMBRANE_REDISPATCH_AFTER_SECONDS": "1",
        "MEMBRANE_BEAT_REDISPATCH_SECONDS": "1",
        "MEMBRANE_BEAT_REAP_SECONDS": "1",
    }
    spawn("worker", "ingest,maintenance", concurrency=2, env=env)
    spawn("beat", env=env)
    wait_until(lambda: all_finished(live, ids), what="every operation finished")
    done = live.inbox.wait(ids, 0)
    assert all(v.status is OperationStatus.SUCCEEDED for v in done)
    assert scalar(database_url, "SELECT count(*) FROM memory_records") == n + 2  # + the fact
    assert scalar(database_url, "SELECT count(DISTINCT id) FROM memory_records") == n + 2
    assert scalar(database_url, "SELECT count(*) FROM audit_log") == n + 2
    assert [v.record_ids[0] for v in done] == [v.record_id for v in views]


def test_broker_down_at_accept_is_processed_after_it_returns(
    live: Membrane,
    spawn: Spawn,
    worker_env: dict[str, str],
    tmp_path: Path,
    database_url: str,
) -> None:
    broker = Redis(tmp_path / "redis")
    broker.start()
    try:
        dispatcher = CeleryDispatcher(make_app(Settings(redis_url=broker.url)))
        broker.stop()
        view = live.inbox.submit_capture(event(1), DEV)
        assert dispatcher.publish(OperationKind.CAPTURE, [view.operation_id]) is False
        assert live.inbox.get(view.operation_id, DEV).status is OperationStatus.QUEUED
        broker.start()
        env = {
            "MEMBRANE_REDIS_URL": broker.url,
            "MEMBRANE_REDISPATCH_AFTER_SECONDS": "1",
            "MEMBRANE_BEAT_REDISPATCH_SECONDS": "1",
        }
        spawn("worker", "ingest,maintenance", env=env)
        spawn("beat", env=env)
        done = live.inbox.wait([view.operation_id], 90)[0]
        assert done.status is OperationStatus.SUCCEEDED and done.record_ids == [view.record_id]
        assert scalar(database_url, "SELECT count(*) FROM memory_records") == 1
    finally:
        broker.stop()


@pytest.mark.in_process_worker(
    queues=("ingest", "embedding", "llm"),
    env={"MEMBRANE_EMBEDDING_PROVIDER": "hashing", "MEMBRANE_LLM_PROVIDER": "deterministic"},
)
def test_embedding_and_llm_pools(
    live: Membrane, celery_worker: WorkController, dispatcher: CeleryDispatcher, database_url: str
) -> None:
    texts = ["Ann lives in Oslo and works at Acme.", "Bob prefers tea.", "Nothing to see here"]
    views = live.inbox.submit_captures(
        [
            {"source_kind": "event", "scope": "team", "sensitivity": "medium", "content": {"text": t}}
            for t in texts
        ],
        DEV,
    )
    dispatcher.publish(OperationKind.CAPTURE, [v.operation_id for v in views])
    assert all(
        v.status is OperationStatus.SUCCEEDED for v in live.inbox.wait([v.operation_id for v in views], 90)
    )
    app = dispatcher.app
    app.send_task("membrane.extract_batch")
    wait_until(
        lambda: scalar(database_url, "SELECT count(*) FROM work_items WHERE kind = 'extract'") == 0,
        what="extraction done",
    )
    app.send_task("membrane.embed_batch")
    wait_until(
        lambda: scalar(database_url, "SELECT count(*) FROM work_items WHERE kind = 'embed'") == 0,
        what="embeddings done",
    )
    with psycopg.connect(database_url) as conn:
        facts = conn.execute(
            "SELECT fact_subject, fact_predicate, fact_object, scope, sensitivity "
            "FROM memory_records WHERE type = 'semantic' ORDER BY 1, 2"
        ).fetchall()
    assert facts == [
        ("ann", "lives_in", "oslo", "team", "medium"),
        ("ann", "works_at", "acme", "team", "medium"),
        ("bob", "prefers", "tea", "team", "medium"),
    ]
    # every record, episodes and extracted facts, has a vector
    records = scalar(database_url, "SELECT count(*) FROM memory_records")
    assert records >= 6  # three episodes, three facts (and any entities capture resolved)
    assert (
        scalar(
            database_url,
            "SELECT count(*) FROM record_embeddings e JOIN memory_records r ON r.id = e.record_id",
        )
        == records
    )


@pytest.mark.in_process_worker(queues=("embedding",), env={"MEMBRANE_EMBEDDING_PROVIDER": "hashing"})
def test_reembed_has_the_embedding_pool_embed_stale_records_again(
    live: Membrane, celery_worker: WorkController, dispatcher: CeleryDispatcher, database_url: str
) -> None:
    """RFC 12.5: the command queues the stale records, asks the pool, and waits for it."""
    from typer.testing import CliRunner

    from membrane_cli.main import app as cli

    # written while no provider was configured: no embed item was scheduled for them
    ids = [live.capture(event(i), DEV).record_ids[0] for i in range(3)]
    assert scalar(database_url, "SELECT count(*) FROM work_items WHERE kind = 'embed'") == 0
    out = CliRunner().invoke(cli, ["reembed", "--timeout", "60"])
    assert out.exit_code == 0, out.output
    assert "3 records to embed with hashing:" in out.output
    assert scalar(database_url, "SELECT count(*) FROM record_embeddings") == 3
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE record_embeddings SET model = 'http:retired' WHERE record_id = ANY(%s)", (ids[:2],)
        )
    out = CliRunner().invoke(cli, ["reembed", "--timeout", "60"])
    assert out.exit_code == 0, out.output
    assert "2 records to embed with hashing:" in out.output and "embed items pending 0" in out.output
    with psycopg.connect(database_url) as conn:
        models = {m for (m,) in conn.execute("SELECT DISTINCT model FROM record_embeddings").fetchall()}
    assert len(models) == 1 and next(iter(models)).startswith("hashing:")  # the pool rewrote both


@pytest.mark.in_process_worker(queues=("revision", "maintenance"))
def test_revision_and_maintenance_through_their_queues(
    live: Membrane, celery_worker: WorkController, dispatcher: CeleryDispatcher
) -> None:
    obs = {
        "source_kind": "observation",
        "scope": "proj",
        "content": {"subject": "user", "predicate": "likes", "object": "tea"},
    }
    fact = live.capture(obs).record_ids[1]
    retract = live.inbox.submit_revision("retract", fact, {"rationale": "not true"}, DEV)
    refused = live.inbox.submit_revision("contest", fact, {"rationale": "later"}, DEV)
    assert dispatcher.publish(OperationKind.RETRACT, [retract.operation_id])
    first = live.inbox.wait([retract.operation_id], 60)[0]
    assert first.status is OperationStatus.SUCCEEDED and first.record_ids == [fact]
    assert live.get(fact).status.value == "retracted"
    assert dispatcher.publish(OperationKind.CONTEST, [refused.operation_id])
    second = live.inbox.wait([refused.operation_id], 60)[0]
    assert second.status is OperationStatus.FAILED and second.error is not None
    run = live.inbox.submit_maintenance(["decay", "embed"], DEV)
    assert dispatcher.publish(OperationKind.MAINTENANCE, [run.operation_id])
    done = live.inbox.wait([run.operation_id], 60)[0]
    assert done.status is OperationStatus.SUCCEEDED, done.error
    assert done.result is not None and set(done.result) == {"decay", "embed"}
