"""Record ids are version-7 UUIDs and increase within a process (RFC 2.1, 8.2.1)."""

from __future__ import annotations

import threading
import time
import uuid

from membrane_core.capture.plan import new_id


def test_ids_are_version_7_with_the_time_in_front() -> None:
    before = time.time_ns() // 1_000_000
    rid = new_id()
    after = time.time_ns() // 1_000_000
    assert rid.version == 7 and rid.variant == uuid.RFC_4122
    assert before <= rid.int >> 80 <= after + 1


def test_ids_made_in_one_process_increase_even_in_one_millisecond() -> None:
    ids = [new_id() for _ in range(20_000)]  # thousands a millisecond
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert len({i.int >> 80 for i in ids}) < len(ids)  # the premise: many share a millisecond


def test_ids_increase_across_threads() -> None:
    made: list[list[uuid.UUID]] = [[] for _ in range(4)]

    def make(out: list[uuid.UUID]) -> None:
        out.extend(new_id() for _ in range(2_000))

    threads = [threading.Thread(target=make, args=(m,)) for m in made]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for m in made for i in m]
    assert len(set(every)) == len(every)
    assert all(m == sorted(m) for m in made)
