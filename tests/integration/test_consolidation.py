"""Consolidation stages on realistic traces (RFC 6.4.2, 6.4.3, 7.4, 5.4)."""

from __future__ import annotations

from typing import Any

import pytest

from membrane_core import Membrane
from membrane_core.trust import DEVELOPMENT_POLICY
from tests.support.sql import execute, rows

FACT = {"subject": "billing-service", "predicate": "depends_on", "object": "postgres 16"}
FRESH = {"subject": "billing-service", "predicate": "deployed_to", "object": "eu-west-1"}


def episode(
    scope: str = "proj",
    *,
    outcome: str = "success",
    facts: list[dict] | None = None,
    calls: list[dict] | None = None,
    sensitivity: str = "low",
    text: str = "task",
) -> dict:
    content: dict[str, Any] = {"text": text, "outcome": outcome}
    if facts is not None:
        content["facts"] = facts
    if calls is not None:
        content["tool_calls"] = calls
    return {"source_kind": "event", "scope": scope, "sensitivity": sensitivity, "content": content}


def facts_with(url: str, subject: str, predicate: str, obj: str) -> list[tuple]:
    return rows(
        url,
        "SELECT id, status, base_salience, sensitivity, scope FROM memory_records "
        "WHERE type = 'semantic' AND fact_subject = %s AND fact_predicate = %s "
        "AND fact_object = %s ORDER BY created_at",
        subject,
        predicate,
        obj,
    )


def consolidate(membrane: Membrane) -> dict[str, Any]:
    return membrane.maintenance.run("consolidate")["consolidate"]


# -- promotion (RFC 6.4.2) ------------------------------------------------------


def test_fact_from_successful_episode_is_promoted(membrane: Membrane, database_url: str) -> None:
    ep = membrane.capture(episode(facts=[FACT], sensitivity="medium")).record_ids[0]
    failed = membrane.capture(episode(facts=[FRESH], outcome="failure")).record_ids[0]
    out = consolidate(membrane)
    assert out["facts_created"] == 1
    ((fid, status, base, sens, scope),) = facts_with(
        database_url, "billing-service", "depends_on", "postgres 16"
    )
    assert (status, base, sens, scope) == ("active", 1.0, "medium", "proj")
    fact = membrane.get(fid)
    assert any(r.predicate == "derived_from" and r.target_id == ep for r in fact.relations)
    assert fact.payload is not None and fact.payload["object"] == "postgres 16"
    # a failed episode's facts are not promoted
    assert failed and facts_with(database_url, "billing-service", "deployed_to", "eu-west-1") == []


def test_reinforces_once_per_distinct_source(membrane: Membrane, clock, database_url: str) -> None:
    membrane.capture(episode(facts=[FACT]))
    consolidate(membrane)
    ((fid, *_),) = facts_with(database_url, "billing-service", "depends_on", "postgres 16")
    clock.advance(days=30)  # the fact decays to 0.5
    second = membrane.capture(episode(facts=[{**FACT, "subject": "Billing-Service"}])).record_ids[0]
    assert consolidate(membrane)["facts_reinforced"] == 1
    assert facts_with(database_url, "billing-service", "depends_on", "postgres 16")[0][2] == pytest.approx(
        0.6
    )
    # the same source again (a duplicated work item) does not reinforce a second time
    execute(
        database_url,
        "INSERT INTO work_items (kind, target_id, due_at) VALUES ('consolidate', %s, %s)",
        second,
        clock(),
    )
    out = consolidate(membrane)
    assert out["episodes"] == 1 and out.get("facts_reinforced", 0) == 0
    assert facts_with(database_url, "billing-service", "depends_on", "postgres 16")[0][2] == pytest.approx(
        0.6
    )
    sources = rows(
        database_url,
        "SELECT count(*) FROM relations WHERE source_id = %s AND predicate = 'derived_from'",
        fid,
    )
    assert sources == [(2,)]
    actions = [
        a for (a,) in rows(database_url, "SELECT action FROM audit_log WHERE record_id = %s ORDER BY id", fid)
    ]
    assert actions == ["create", "reinforce"]


def test_several_new_sources_in_one_batch(membrane: Membrane, clock, database_url: str) -> None:
    obs = {"source_kind": "observation", "scope": "proj", "content": FACT}
    fact_id = membrane.capture(obs).record_ids[1]
    clock.advance(days=30)
    # the capture path: two re-observations in one batch reinforce once each
    membrane.capture_many([obs, obs])
    assert facts_with(database_url, "billing-service", "depends_on", "postgres 16")[0][2] == pytest.approx(
        0.7
    )
    clock.advance(days=30)
    # consolidation: two successful episodes with the fact in one batch
    membrane.capture_many([episode(facts=[FACT]), episode(facts=[FACT])])
    assert consolidate(membrane)["facts_reinforced"] == 1
    assert facts_with(database_url, "billing-service", "depends_on", "postgres 16")[0][2] == pytest.approx(
        0.35 + 0.2
    )
    ((n,),) = rows(
        database_url, "SELECT count(*) FROM work_items WHERE kind = 'decay' AND target_id = %s", fact_id
    )
    assert n == 1


def test_observation_fact_is_not_reinforced_by_its_own_episode(membrane: Membrane, database_url: str) -> None:
    obs = {"source_kind": "observation", "scope": "proj", "content": {**FACT, "outcome": "success"}}
    fact_id = membrane.capture(obs).record_ids[1]
    out = consolidate(membrane)
    assert out["episodes"] == 1 and out.get("facts_reinforced", 0) == 0
    assert facts_with(database_url, "billing-service", "depends_on", "postgres 16") == [
        (fact_id, "active", 1.0, "low", "proj")
    ]


@pytest.mark.parametrize("how", ["sql_status", "revision"])
def test_consolidation_after_retraction_does_not_revive(
    membrane: Membrane, clock, database_url: str, how: str
) -> None:
    obs = {"source_kind": "observation", "scope": "proj", "content": {**FACT, "outcome": "success"}}
    fact_id = membrane.capture(obs).record_ids[1]
    consolidate(membrane)
    if how == "sql_status":
        execute(
            database_url,
            "UPDATE memory_records SET status = 'retracted', retracted_at = %s WHERE id = %s",
            clock(),
            fact_id,
        )
    else:
        membrane.revisions.retract(fact_id, {"rationale": "wrong"}, DEVELOPMENT_POLICY)
    clock.advance(hours=1)
    membrane.capture(episode(facts=[FACT, FRESH]))
    out = consolidate(membrane)
    assert out["facts_blocked"] == 1 and out["facts_created"] == 1
    # still exactly one record with the key, still retracted, salience untouched
    assert [
        (r[0], r[1], r[2]) for r in facts_with(database_url, "billing-service", "depends_on", "postgres 16")
    ] == [(fact_id, "retracted", 1.0)]
    # positive control: the fresh fact of the same episode was promoted
    assert [r[1] for r in facts_with(database_url, "billing-service", "deployed_to", "eu-west-1")] == [
        "active"
    ]


def test_contested_fact_is_not_reinforced(membrane: Membrane, clock, database_url: str) -> None:
    membrane.capture(episode(facts=[FACT, FRESH]))
    consolidate(membrane)
    ((fid, *_),) = facts_with(database_url, "billing-service", "depends_on", "postgres 16")
    ((fresh_id, *_),) = facts_with(database_url, "billing-service", "deployed_to", "eu-west-1")
    execute(
        database_url,
        "UPDATE memory_records SET status = 'contested', contested_at = %s WHERE id = %s",
        clock(),
        fid,
    )
    clock.advance(days=30)
    membrane.capture(episode(facts=[FACT, FRESH]))
    out = consolidate(membrane)
    assert out["facts_contested"] == 1 and out["facts_reinforced"] == 1
    assert facts_with(database_url, "billing-service", "depends_on", "postgres 16")[0][2] == 1.0
    assert facts_with(database_url, "billing-service", "deployed_to", "eu-west-1")[0][2] == pytest.approx(0.6)
    assert fresh_id


def test_tool_result_facts_and_max_sensitivity(membrane: Membrane, database_url: str) -> None:
    calls = [{"tool": "inspect_service", "args": {"name": "billing-service"}, "result": {"facts": [FACT]}}]
    membrane.capture_many(
        [
            episode(calls=calls, sensitivity="low"),
            episode(calls=calls, sensitivity="high"),
            episode(calls=calls, scope="other", sensitivity="public"),
        ]
    )
    assert consolidate(membrane)["facts_created"] == 2
    got = {
        (scope, sens)
        for _, _, _, sens, scope in facts_with(database_url, "billing-service", "depends_on", "postgres 16")
    }
    assert got == {("proj", "high"), ("other", "public")}


# -- competence and plan graphs (RFC 6.4.3) ---------------------------------------


def deploy_calls(version: str) -> list[dict]:
    return [
        {"tool": "run_tests", "args": {"suite": "unit"}, "result": {"passed": 412, "failed": 0}},
        {"tool": "build_image", "args": {"tag": version}, "result": {"image": f"registry/app:{version}"}},
        {
            "tool": "deploy",
            "args": {"image": f"registry/app:{version}", "env": "staging"},
            "result": {"deployment_id": f"dep-{version}", "status": "healthy"},
        },
        {
            "tool": "notify",
            "args": {"channel": "#deploys", "deployment": f"dep-{version}"},
            "result": {"ok": True},
        },
    ]


def procedural(url: str, kind: str) -> list[dict]:
    return [
        dict(body, _scope=scope, _sens=sens, _id=rid)
        for rid, scope, sens, body in rows(
            url,
            "SELECT r.id, r.scope, r.sensitivity, p.body FROM memory_records r "
            "JOIN record_payloads p ON p.record_id = r.id WHERE r.type = %s ORDER BY r.created_at",
            kind,
        )
    ]


def test_competence_needs_two_successful_episodes(membrane: Membrane, clock, database_url: str) -> None:
    calls = [
        {"tool": "search_docs", "args": {"q": "rotate keys"}, "result": ["doc-17"]},
        {"tool": "open_doc", "args": {"id": "doc-17"}, "result": "steps..."},
    ]
    first = membrane.capture(episode(calls=calls, text="rotate the API keys")).record_ids[0]
    membrane.capture(episode(calls=calls, scope="other"))  # same signature, other scope
    membrane.capture(episode(calls=calls[:1]))  # another signature
    consolidate(membrane)
    assert procedural(database_url, "competence") == []  # one success per signature and scope
    clock.advance(hours=1)
    second = membrane.capture(episode(calls=calls, sensitivity="medium")).record_ids[0]
    failed = membrane.capture(episode(calls=calls, outcome="failure")).record_ids[0]
    out = consolidate(membrane)
    assert out["competence_created"] == 1
    (comp,) = procedural(database_url, "competence")
    assert comp["signature"] == ["search_docs", "open_doc"]
    assert comp["performance"]["success_count"] == 2
    assert comp["performance"]["failure_count"] == 1
    assert comp["_scope"] == "proj" and comp["_sens"] == "medium"
    assert [s["tool"] for s in comp["recipe"]] == ["search_docs", "open_doc"]
    sources = {
        t
        for (t,) in rows(
            database_url,
            "SELECT target_id FROM relations WHERE source_id = %s AND predicate = 'derived_from'",
            comp["_id"],
        )
    }
    assert sources == {first, second} and failed not in sources
    # statistics keep up incrementally as episodes arrive
    clock.advance(hours=1)
    membrane.capture_many([episode(calls=calls), episode(calls=calls, outcome="failure")])
    out = consolidate(membrane)
    assert out["procedures_reinforced"] == 1
    (comp,) = procedural(database_url, "competence")
    assert (comp["performance"]["success_count"], comp["performance"]["failure_count"]) == (3, 2)
    view = membrane.get(comp["_id"])
    assert view.payload is not None and view.type.value == "competence"
    # maintenance wrote the statistics in SQL (a timestamp in Postgres's format): retrieval
    # shows them as a read by id does (RFC 8.3)
    got = membrane.retrieve({"scopes": ["proj"], "memory_types": ["competence"]})
    assert [v.model_dump_json(exclude={"score"}) for v in got.records] == [
        view.model_dump_json(exclude={"score"})
    ]


def test_plan_graph_from_multi_step_trace(membrane: Membrane, clock, database_url: str) -> None:
    membrane.capture(episode(calls=deploy_calls("1.4.2"), text="ship release 1.4.2 to staging"))
    membrane.capture(episode(calls=deploy_calls("1.0")[:2]))  # two calls: no plan graph
    out = consolidate(membrane)
    assert out["plans_created"] == 1
    (plan,) = procedural(database_url, "plan_graph")
    assert plan["intent"] == "ship release 1.4.2 to staging"
    assert [n["op"] for n in plan["nodes"]] == ["run_tests", "build_image", "deploy", "notify"]
    edges = {(e["source"], e["target"], e["kind"]) for e in plan["edges"]}
    assert edges == {
        ("step1", "step2", "control"),
        ("step2", "step3", "control"),
        ("step3", "step4", "control"),
        ("step2", "step3", "data"),  # deploy takes the image build_image returned
        ("step3", "step4", "data"),  # notify names the deployment deploy returned
    }
    assert plan["metrics"]["execution_count"] == 1
    # the same sequence again is a reuse of the plan, not a new plan
    clock.advance(hours=1)
    membrane.capture(episode(calls=deploy_calls("1.4.3")))
    consolidate(membrane)
    (plan,) = procedural(database_url, "plan_graph")
    assert plan["metrics"]["execution_count"] == 2
    assert len(procedural(database_url, "competence")) == 1
    view = membrane.get(plan["_id"])
    assert view.type.value == "plan_graph"
    got = membrane.retrieve({"scopes": [plan["_scope"]], "memory_types": ["plan_graph"]})
    assert [v.model_dump_json(exclude={"score"}) for v in got.records] == [
        view.model_dump_json(exclude={"score"})
    ]


def test_retracted_competence_is_not_updated(membrane: Membrane, clock, database_url: str) -> None:
    calls = [{"tool": "a", "args": {}}, {"tool": "b", "args": {}}]
    membrane.capture_many([episode(calls=calls), episode(calls=calls)])
    consolidate(membrane)
    (comp,) = procedural(database_url, "competence")
    execute(
        database_url,
        "UPDATE memory_records SET status = 'retracted', retracted_at = %s WHERE id = %s",
        clock(),
        comp["_id"],
    )
    membrane.capture(episode(calls=calls))
    out = consolidate(membrane)
    assert out.get("procedures_reinforced", 0) == 0 and out.get("competence_created", 0) == 0
    (after,) = procedural(database_url, "competence")
    assert after["performance"]["success_count"] == 2
    ((count,),) = rows(database_url, "SELECT success_count FROM tool_signatures")
    assert count == 3  # positive control: the episode was counted


def test_concurrent_batches_count_every_episode_once(membrane: Membrane, database_url: str) -> None:
    import threading

    calls = [{"tool": "lookup", "args": {}}, {"tool": "answer", "args": {}}]
    membrane.capture_many([episode(calls=calls, facts=[FACT]) for _ in range(24)])
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            while True:
                out = membrane.maintenance.run("consolidate", limit=3)["consolidate"]
                assert "batch_retried" not in out, out  # no deadlock, no item-by-item fallback
                if not out["claimed"]:
                    break
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    assert rows(database_url, "SELECT success_count, failure_count FROM tool_signatures") == [(24, 0)]
    assert len(procedural(database_url, "competence")) == 1
    ((fid, *_),) = facts_with(database_url, "billing-service", "depends_on", "postgres 16")
    ((n,),) = rows(
        database_url,
        "SELECT count(*) FROM relations WHERE source_id = %s AND predicate = 'derived_from'",
        fid,
    )
    assert n == 24  # every episode is a source exactly once


def test_fact_shapes_in_tool_results(membrane: Membrane, database_url: str) -> None:
    calls = [
        {"tool": "kv_get", "args": {}, "result": {**FRESH}},  # a triple as the result
        {
            "tool": "graph_query",
            "args": {},
            "result": [  # a list of triples
                {"subject": "billing-service", "predicate": "owned_by", "object": "team-payments"},
                {"subject": "no predicate", "object": "ignored"},
            ],
        },
        {"tool": "echo", "args": {}, "result": "plain text is not a fact"},
    ]
    assert consolidate_after(membrane, episode(calls=calls))["facts_created"] == 2
    assert [r[1] for r in facts_with(database_url, "billing-service", "deployed_to", "eu-west-1")] == [
        "active"
    ]
    assert [r[1] for r in facts_with(database_url, "billing-service", "owned_by", "team-payments")] == [
        "active"
    ]
    ((n,),) = rows(database_url, "SELECT count(*) FROM memory_records WHERE type = 'semantic'")
    assert n == 2


def test_reinforcing_source_raises_sensitivity_never_lowers(
    membrane: Membrane, clock, database_url: str
) -> None:
    membrane.capture(episode(facts=[FACT], sensitivity="low"))
    consolidate(membrane)
    clock.advance(days=1)
    membrane.capture(episode(facts=[FACT], sensitivity="high"))
    consolidate(membrane)
    assert facts_with(database_url, "billing-service", "depends_on", "postgres 16")[0][3] == "high"
    clock.advance(days=1)
    membrane.capture(episode(facts=[FACT], sensitivity="public"))
    assert consolidate(membrane)["facts_reinforced"] == 1  # positive control: it was reinforced
    assert facts_with(database_url, "billing-service", "depends_on", "postgres 16")[0][3] == "high"


def consolidate_after(membrane: Membrane, body: dict) -> dict[str, Any]:
    membrane.capture(body)
    return consolidate(membrane)
