"""A capture load on the live API from one client thread, and what its accepted captures left."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg


@dataclass
class Outcome:
    """One request of the load: when it started, how long it took, what it got."""

    started: float
    elapsed: float
    method: str
    status: int | None = None  # None: no answer (the client's timeout or a transport error)
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None


class Load:
    """Captures (and reads of the accepted ones) from one client thread, as fast as answered."""

    def __init__(self, base_url: str, timeout: float) -> None:
        self.client = httpx.Client(base_url=base_url, timeout=timeout)
        self.outcomes: list[Outcome] = []
        self.accepted: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.client.close()

    def _request(self, method: str, url: str, **kwargs: Any) -> Outcome:
        t0 = time.monotonic()
        try:
            resp = self.client.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            return Outcome(t0, time.monotonic() - t0, method, error=repr(exc))
        body = resp.json() if resp.headers.get("content-type", "").startswith("application/json") else {}
        return Outcome(t0, time.monotonic() - t0, method, resp.status_code, body, dict(resp.headers))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            i += 1
            if i % 2 == 0 and self.accepted:  # a read of the inbox
                out = self._request("GET", f"/v1/operations/{self.accepted[-1]['operation_id']}")
            else:
                out = self._request(
                    "POST",
                    "/v1/captures",
                    headers={"Idempotency-Key": uuid.uuid4().hex},
                    json={
                        "source_kind": "event",
                        "scope": "fault",
                        "content": {"text": f"event {i} of the fault load"},
                    },
                )
                if out.status == 202:
                    self.accepted.append(out.body)
            self.outcomes.append(out)
            time.sleep(0.01)

    def since(self, t: float) -> list[Outcome]:
        return [o for o in list(self.outcomes) if o.started >= t]

    def wait_for(self, predicate: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not seen after {timeout}s; last: {self.outcomes[-3:]}")
            time.sleep(0.05)


def committed_once(dsn: str, accepted: list[dict[str, Any]]) -> None:
    """Every accepted capture succeeded with its one pre-assigned record, and nothing is twice."""
    ids = [uuid.UUID(a["operation_id"]) for a in accepted]
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT id, status, record_ids FROM operations WHERE id = ANY(%s)", (ids,)
        ).fetchall()
        by_id = {r[0]: r for r in rows}
        assert len(by_id) == len(ids) == len(set(ids))
        for a in accepted:
            _, status, record_ids = by_id[uuid.UUID(a["operation_id"])]
            assert status == "succeeded", a
            assert record_ids == [uuid.UUID(a["record_id"])], a
        records, distinct = conn.execute(
            "SELECT count(*), count(DISTINCT id) FROM memory_records"
        ).fetchone() or (0, 0)
        (succeeded,) = conn.execute(
            "SELECT count(*) FROM operations WHERE kind = 'capture' AND status = 'succeeded'"
        ).fetchone() or (0,)
        (mine,) = conn.execute(
            "SELECT count(*) FROM memory_records WHERE id = ANY(%s)",
            ([uuid.UUID(a["record_id"]) for a in accepted],),
        ).fetchone() or (0,)
    # one record per succeeded capture (an event capture writes one episode): none lost, none
    # twice; a capture answered 503 while its commit went through is a succeeded one too
    assert records == distinct == succeeded
    assert mine == len(accepted)
