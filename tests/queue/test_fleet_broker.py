"""Redis as the fleet's broker: full, it refuses a message and never drops one (RFC 9.5).

A refused publish leaves the operation queued in Postgres for beat to re-dispatch; an
evicted message would be lost without a trace until ``redispatch_after_seconds``, and an
evicted ``unacked`` entry would let a running task be delivered twice.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import redis

from membrane_cli.stack import Stack, StackOptions
from membrane_core import Settings
from membrane_core.enums import OperationKind
from tests.support.services import Redis
from workers.app import make_app
from workers.dispatch import CeleryDispatcher


def test_a_full_broker_refuses_a_publish_and_keeps_what_it_holds(tmp_path: Path) -> None:
    broker = Redis(tmp_path / "redis")  # started as the tests' redis-server is
    broker.start()
    try:
        client = redis.Redis.from_url(broker.url)
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        dispatcher = CeleryDispatcher(make_app(Settings(redis_url=broker.url)), retry_seconds=0)
        assert dispatcher.publish(OperationKind.CAPTURE, [uuid.uuid4()])
        assert client.llen("ingest") == 1
        used = int(client.info("memory")["used_memory"])
        client.config_set("maxmemory", used // 2)  # full: what an eviction policy would make room in
        assert dispatcher.publish(OperationKind.CAPTURE, [uuid.uuid4()]) is False
        assert client.llen("ingest") == 1  # refused; the message it held is kept
        client.config_set("maxmemory", 0)  # room again: the next publish goes through
        assert dispatcher.publish(OperationKind.CAPTURE, [uuid.uuid4()])
        assert client.llen("ingest") == 2
    finally:
        broker.stop()


def test_membrane_runs_private_redis_server_never_evicts(tmp_path: Path) -> None:
    stack = Stack(
        Settings(redis_url=None, data_dir=tmp_path),
        StackOptions(data_dir=tmp_path, queues=(), beat=False, flower=False),
    )
    try:
        url = stack.start_redis()
        [child] = stack.children
        assert child.argv[child.argv.index("--maxmemory-policy") + 1] == "noeviction"
        assert redis.Redis.from_url(url).config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    finally:
        stack.stop()
