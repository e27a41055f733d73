"""RFC 5.4: the database refuses a fact under a tombstone and the revival of a retraction."""

from __future__ import annotations

import psycopg
import pytest

from membrane_core import Membrane
from membrane_core.trust import DEVELOPMENT_POLICY

OBS = {
    "source_kind": "observation",
    "scope": "p",
    "content": {"subject": "ann", "predicate": "lives in", "object": "paris"},
}


def test_database_refuses_fact_under_tombstone_and_revival(membrane: Membrane, database_url: str) -> None:
    fact_id = membrane.capture(OBS).record_ids[1]
    rome = {**OBS, "content": {**OBS["content"], "object": "rome"}}
    other_id = membrane.capture(rome).record_ids[1]
    membrane.revisions.retract(fact_id, {"rationale": "wrong"}, DEVELOPMENT_POLICY)
    with psycopg.connect(database_url) as conn:
        with pytest.raises(psycopg.errors.CheckViolation, match="retraction is final"):
            conn.execute("UPDATE memory_records SET status = 'active' WHERE id = %s", (fact_id,))
        conn.rollback()
        with pytest.raises(psycopg.errors.CheckViolation, match="tombstoned"):
            # a writer that skips the key locks and copies the row under a new id
            conn.execute(
                "INSERT INTO memory_records (id, type, scope, sensitivity, confidence, salience,"
                " half_life_seconds, base_salience, reinforced_at, projected_bytes, fact_subject,"
                " fact_predicate, fact_object) SELECT gen_random_uuid(), type, scope, sensitivity,"
                " confidence, salience, half_life_seconds, base_salience, reinforced_at,"
                " projected_bytes, fact_subject, fact_predicate, fact_object"
                " FROM memory_records WHERE id = %s",
                (fact_id,),
            )
        conn.rollback()
        # positive controls: the untombstoned fact can change status, a new key can be written
        conn.execute("UPDATE memory_records SET status = 'contested' WHERE id = %s", (other_id,))
        conn.commit()
    assert membrane.capture({**OBS, "content": {**OBS["content"], "object": "oslo"}}).fact == "created"
