"""Every write's audit entries name the key id of its actor, never the key (RFC 10.3, 5.5)."""

from __future__ import annotations

import psycopg

from api.auth import fingerprint
from tests.support.api import ServeFn

SCOPE = "audited"
WRITER = "audit-sekrit-writer-7f3a9c"
PIPELINE = "audit-sekrit-pipeline-0b2e41"
POLICY = {"read_scopes": [SCOPE], "write_scopes": [SCOPE]}
FACT = {
    "source_kind": "observation",
    "scope": SCOPE,
    "content": {"subject": "billing-api", "predicate": "runs_on", "object": "Python 3.12"},
}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_audit_entries_name_the_key_id_and_never_the_key(serve: ServeFn, database_url: str) -> None:
    client = serve(keys={WRITER: POLICY, PIPELINE: {**POLICY, "actor": "pipeline"}})
    made = client.post("/v1/captures", params={"wait": 5}, json=FACT, headers=bearer(WRITER))
    assert made.status_code == 200 and made.json()["status"] == "succeeded", made.text
    episode, fact = made.json()["record_ids"][:2]
    retracted = client.post(
        f"/v1/records/{fact}/retract",
        params={"wait": 5},
        json={"rationale": "marker-rationale: wrong runtime"},
        headers=bearer(PIPELINE),
    )
    assert retracted.status_code == 200 and retracted.json()["status"] == "succeeded", retracted.text

    writer_id = f"key:{fingerprint(WRITER)}"
    history = client.get(f"/v1/records/{fact}/audit", headers=bearer(WRITER)).json()["entries"]
    assert (history[0]["action"], history[0]["actor"]) == ("create", writer_id)
    assert history[-1]["actor"] == "pipeline"  # a configured actor is the key's id

    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT record_id, action, actor, a::text FROM audit_log a").fetchall()
        operations = [r[0] for r in conn.execute("SELECT o::text FROM operations o").fetchall()]
    created = {str(rid) for rid, action, _, _ in rows if action == "create"}
    assert {episode, fact} <= created
    assert {actor for _, action, actor, _ in rows if action == "create"} == {writer_id}
    texts = [text for *_, text in rows]
    # positive controls: the search finds what a row holds, the key id and a rationale
    assert any(writer_id in t for t in texts) and any("marker-rationale" in t for t in texts)
    assert any(writer_id in t for t in operations)
    for key in (WRITER, PIPELINE):
        assert not any(key in t for t in texts), key
        assert not any(key in t for t in operations), key
