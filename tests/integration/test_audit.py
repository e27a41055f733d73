"""The audit log (RFC 5.5): append-only, hash-chained per record, survives deletion."""

from __future__ import annotations

import dataclasses
import uuid

import psycopg
import pytest

from membrane_core import Membrane, errors
from membrane_core.enums import Sensitivity
from membrane_core.revision import history
from membrane_core.storage import audit
from membrane_core.trust import TrustPolicy

OBS = {
    "source_kind": "observation",
    "scope": "proj",
    "content": {"subject": "user", "predicate": "prefers", "object": "tea"},
}


def fact_with_history(m: Membrane) -> uuid.UUID:
    fact = m.capture(OBS).record_ids[1]
    m.revisions.reinforce(fact, {"rationale": "seen again"}, TrustPolicy(actor="a"))
    m.revisions.contest(fact, {"rationale": "doubt"}, TrustPolicy(actor="b"))
    return fact


def test_history_in_order_with_valid_chain(membrane: Membrane) -> None:
    fact = fact_with_history(membrane)
    h = membrane.audit(fact)
    assert h.record_id == fact and h.chain_valid is True
    assert [(e.action, e.actor, e.rationale) for e in h.entries] == [
        ("create", "development", "derived from observation"),
        ("reinforce", "a", "seen again"),
        ("revise", "b", "doubt"),
    ]
    with pytest.raises(errors.NotFound):
        membrane.audit(uuid.uuid4())


def test_python_hash_matches_the_trigger(membrane: Membrane, database_url: str) -> None:
    fact = fact_with_history(membrane)
    with psycopg.connect(database_url) as conn:
        rows = audit.entries(conn, fact)
        for r in rows:
            db = conn.execute(
                "SELECT audit_content_digest(%s, %s::jsonb), audit_entry_hash(%s, %s, %s, %s, %s, %s)",
                (
                    r.rationale,
                    r.details_text,
                    r.prev_hash,
                    r.record_id,
                    r.action,
                    r.actor,
                    r.ts,
                    r.content_digest,
                ),
            ).fetchone()
            assert db is not None and bytes(db[0]) == r.content_digest and bytes(db[1]) == r.hash
            assert history.content_digest(r.rationale, r.details_text) == r.content_digest
            assert (
                history.entry_hash(r.prev_hash, r.record_id, r.action, r.actor, r.ts, r.content_digest)
                == r.hash
            )
    assert len(rows) == 3


def test_verify_chain_detects_a_modified_copy(membrane: Membrane, database_url: str) -> None:
    fact = fact_with_history(membrane)
    with psycopg.connect(database_url) as conn:
        rows = audit.entries(conn, fact)
    assert history.verify_chain(rows) is True  # positive control
    forged = list(rows)
    forged[1] = dataclasses.replace(rows[1], rationale="never happened")
    assert history.verify_chain(forged) is False
    assert history.verify_chain([rows[0], rows[2]]) is False  # a removed middle entry


def test_tampering_in_the_database_is_detected(membrane: Membrane, database_url: str) -> None:
    fact = fact_with_history(membrane)
    assert membrane.audit(fact).chain_valid is True  # positive control
    with psycopg.connect(database_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE audit_log SET rationale = 'x' WHERE record_id = %s", (fact,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM audit_log WHERE record_id = %s", (fact,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("TRUNCATE audit_log")
        # as superuser, switch the guard off to play the attacker
        conn.execute("ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only")
        conn.execute(
            "UPDATE audit_log SET rationale = 'nothing to see' WHERE record_id = %s AND action = 'reinforce'",
            (fact,),
        )
        conn.execute("ALTER TABLE audit_log ENABLE TRIGGER audit_log_append_only")
    h = membrane.audit(fact)
    assert h.chain_valid is False
    assert "nothing to see" in [e.rationale for e in h.entries]


def test_delete_keeps_history_and_checks_trust(membrane: Membrane, database_url: str) -> None:
    fact = fact_with_history(membrane)
    episode = membrane.capture(
        {"source_kind": "event", "scope": "proj", "content": {"text": "x"}}
    ).record_ids[0]
    outsider = TrustPolicy(read_scopes=frozenset({"other"}), write_scopes=frozenset({"other"}))
    reader = TrustPolicy(read_scopes=frozenset({"proj"}), write_scopes=frozenset({"other"}))
    with pytest.raises(errors.NotFound):
        membrane.delete(fact, outsider, "no")
    with pytest.raises(errors.Forbidden):
        membrane.delete(fact, reader, "no")
    membrane.delete(fact, TrustPolicy(actor="ops"), "gdpr request")
    with pytest.raises(errors.NotFound):
        membrane.get(fact)
    assert membrane.get(episode).id == episode  # positive control: only the fact went
    h = membrane.audit(fact)
    assert h.chain_valid is True
    assert [(e.action, e.actor, e.rationale) for e in h.entries][-1] == ("delete", "ops", "gdpr request")
    assert len(h.entries) == 4
    # trust is checked against the scope stored on the entries
    with pytest.raises(errors.NotFound):
        membrane.audit(fact, outsider)
    assert membrane.audit(fact, reader).entries[-1].action == "delete"
    with psycopg.connect(database_url) as conn:
        left = conn.execute(
            "SELECT (SELECT count(*) FROM work_items WHERE target_id = %s),"
            " (SELECT count(*) FROM relations WHERE source_id = %s"
            "  OR target_id = %s)",
            (fact, fact, fact),
        ).fetchone()
    assert left == (0, 0)
    with pytest.raises(errors.NotFound):
        membrane.delete(fact, TrustPolicy(), "twice")


def test_deletion_policy_never_refuses(membrane: Membrane, database_url: str) -> None:
    fact = membrane.capture(OBS).record_ids[1]
    with psycopg.connect(database_url) as conn:
        conn.execute("UPDATE memory_records SET deletion_policy = 'never' WHERE id = %s", (fact,))
    with pytest.raises(errors.RevisionRefused):
        membrane.delete(fact, TrustPolicy(), "try")
    assert membrane.get(fact).id == fact
    assert [e.action for e in membrane.audit(fact).entries] == ["create"]


def test_redacted_history_hides_rationale(membrane: Membrane) -> None:
    fact = membrane.capture({**OBS, "sensitivity": "high"}).record_ids[1]
    membrane.revisions.retract(fact, {"rationale": "secret reason"}, TrustPolicy())
    medium = TrustPolicy(max_sensitivity=Sensitivity.MEDIUM)
    red = membrane.audit(fact, medium)
    assert [e.action for e in red.entries] == ["create", "revise"]
    assert {e.rationale for e in red.entries} == {""} and red.chain_valid is True
    assert membrane.audit(fact).entries[-1].rationale == "secret reason"
    with pytest.raises(errors.NotFound):
        membrane.audit(fact, TrustPolicy(max_sensitivity=Sensitivity.LOW))
