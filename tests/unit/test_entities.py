"""Mention extraction, normalisation and budgets (RFC 3.5); pure, no database."""

from __future__ import annotations

from datetime import UTC, datetime

from membrane_core.capture import mentions
from membrane_core.capture.plan import plan_capture
from membrane_core.policy import Policy
from membrane_core.requests import CaptureRequest

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def mentions_of(content: dict, source_kind: str = "event") -> mentions.MentionSet:
    req = CaptureRequest.model_validate({"source_kind": source_kind, "scope": "s", "content": content})
    ms = mentions.extract(plan_capture(req, Policy(), now=NOW, actor="t").primary)
    assert ms is not None
    return ms


def terms(ms: mentions.MentionSet) -> list[str]:
    return [m.term for m in ms.mentions]


def test_normalise_term_casefolds_collapses_and_strips_edges() -> None:
    assert mentions.normalise_term("  New\tYork   City. ") == "new york city"
    assert mentions.normalise_term("\u201cStra\u00dfe\u201d") == "strasse"
    assert mentions.normalise_term("Mel\u2019s") == "mel's"
    assert mentions.normalise_predicate("Works  at!") == "works_at"


def test_parse_identifier_namespaces_handles_and_refusals() -> None:
    assert mentions.parse_identifier("github:OctoCat") == ("github", "octocat")
    assert mentions.parse_identifier("@OctoCat") == ("handle", "octocat")
    assert mentions.parse_identifier("https://example.com") is None
    assert mentions.parse_identifier("12:30") is None
    assert mentions.parse_identifier("Octo Cat") is None


def test_explicit_mention_forms_name_aliases_identifiers() -> None:
    ms = mentions.MentionSet()
    m = mentions.parse_mention("Melanie | Mel | github:mel | @melly", ms, source="explicit")
    assert m is not None
    assert (m.name, m.term) == ("Melanie", "melanie")
    assert m.aliases == (("Mel", "mel"),)
    assert m.identifiers == (("github", "mel"), ("handle", "melly"))
    # identifiers are looked up first, then the name, then aliases
    assert list(m.keys()) == [("github", "mel"), ("handle", "melly"), (None, "melanie"), (None, "mel")]
    only_id = mentions.parse_mention("github:octocat", ms, source="explicit")
    assert only_id is not None and only_id.term == "github:octocat"
    assert only_id.identifiers == (("github", "octocat"),) and only_id.entity_kind == "account"
    assert ms.truncated == {}


def test_alias_budget_truncates_later_forms_and_reports() -> None:
    ms = mentions.MentionSet()
    forms = " | ".join(["Main"] + [f"alias{i}" for i in range(12)] + ["gh:main"])
    m = mentions.parse_mention(forms, ms, source="explicit")
    assert m is not None
    assert m.identifiers == (("gh", "main"),)  # the identifier is kept before aliases
    assert len(m.aliases) + len(m.identifiers) == mentions.MAX_ALIASES_PER_MENTION
    assert [a for a, _ in m.aliases] == [f"alias{i}" for i in range(7)]
    assert ms.truncated == {"aliases": 12 - 7}


def test_text_scan_is_conservative() -> None:
    ms = mentions_of(
        {
            "text": (
                "Caroline: Hey Mel! I went to the LGBTQ support group with @octocat. "
                "See https://example.com/x and github:octocat. Mel's sister moved to New York City. "
                "Yesterday we met John Smith at 12:30. The weather was nice."
            )
        }
    )
    assert terms(ms) == ["mel", "lgbtq", "@octocat", "github:octocat", "new york city", "john smith"]
    # positive control for the sentence-start rule: a sentence-initial name seen mid-sentence counts
    again = mentions_of({"text": "Caroline laughed. Then Caroline left."})
    assert terms(again) == ["caroline"]
    alone = mentions_of({"text": "Caroline laughed."})
    assert terms(alone) == []
    # a single word the same text also writes in lower case is no name; Rex is
    lower = mentions_of({"text": "Bye! It was perfect. Perfect day with Rex, bye Rex."})
    assert terms(lower) == ["rex"]


def test_explicit_entities_come_first_and_repeats_merge() -> None:
    ms = mentions_of({"text": "I met Bob and Alice.", "entities": ["Alice", "alice ", "Zed"]})
    assert terms(ms) == ["alice", "zed", "bob"]


def test_mention_budget_truncates_deterministically_and_reports() -> None:
    names = [f"Entity{i}" for i in range(mentions.MAX_MENTIONS_PER_CAPTURE + 5)]
    ms = mentions_of({"entities": names})
    assert terms(ms) == [n.casefold() for n in names[: mentions.MAX_MENTIONS_PER_CAPTURE]]
    assert ms.report() == {"mentions": mentions.MAX_MENTIONS_PER_CAPTURE, "truncated": {"mentions": 5}}
    assert terms(mentions_of({"entities": names})) == terms(ms)  # same input, same cut


def test_term_and_byte_budgets() -> None:
    long_name = "X" * (mentions.MAX_TERM_BYTES + 1)
    ms = mentions_of({"entities": [long_name, "Short"]})
    assert terms(ms) == ["short"] and ms.truncated == {"term_bytes": 1}
    wide = [f"{'W' * 120}{i} | {'V' * 120}{i}" for i in range(10)]  # ~242 bytes each
    ms = mentions_of({"entities": wide})
    kept = sum(len(k[1].encode()) for m in ms.mentions for k in m.keys())
    assert kept <= mentions.MAX_NORMALISED_BYTES_PER_CAPTURE
    assert len(ms.mentions) == 8 and ms.truncated == {"bytes": 2}
    many_forms = [" | ".join(f"N{i}x{j}" for j in range(5)) for i in range(10)]
    ms = mentions_of({"entities": many_forms})
    assert len(ms.mentions) == mentions.MAX_LOOKUPS_PER_CAPTURE // 5
    assert ms.truncated == {"lookups": 10 - mentions.MAX_LOOKUPS_PER_CAPTURE // 5}


def test_text_scan_budget_reports_unscanned_chars() -> None:
    text = "Early Name is here. " + "x " * mentions.MAX_SCAN_CHARS + " and Late Name."
    ms = mentions_of({"text": text})
    assert "early name" in terms(ms) and "late name" not in terms(ms)
    assert ms.truncated["text_chars"] == len(text) - mentions.MAX_SCAN_CHARS


def test_observation_relation_candidates() -> None:
    ms = mentions_of(
        {"subject": "Alice Jones", "predicate": "works at", "object": "Acme"}, source_kind="observation"
    )
    assert terms(ms) == ["alice jones", "acme"]
    assert ms.relations == [mentions.RelationCandidate("alice jones", "works_at", "acme")]
    plain = mentions_of(
        {"subject": "user", "predicate": "prefers", "object": "dark mode"}, source_kind="observation"
    )
    assert plain.mentions == [] and plain.relations == []
    # an explicit entity makes a lower-case subject a mention too
    forced = mentions_of(
        {"subject": "user", "predicate": "prefers", "object": "Vim", "entities": ["user"]},
        source_kind="observation",
    )
    assert forced.relations == [mentions.RelationCandidate("user", "prefers", "vim")]
    reserved = mentions_of(
        {"subject": "Alpha", "predicate": "supersedes", "object": "Beta"}, source_kind="observation"
    )
    assert reserved.relations == [] and reserved.truncated == {"reserved_predicate": 1}


def test_non_episodic_captures_have_no_mentions() -> None:
    req = CaptureRequest.model_validate(
        {
            "source_kind": "working_state",
            "scope": "s",
            "content": {"thread_id": "t", "task_state": "planning", "context_summary": "Talk to Alice Jones"},
        }
    )
    assert mentions.extract(plan_capture(req, Policy(), now=NOW, actor="t").primary) is None
