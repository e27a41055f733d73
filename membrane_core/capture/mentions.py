"""Capture-time entity mentions: extraction, normalisation, budgets (RFC 3.5); pure, no I/O.

A capture's mentions come from three sources, in this priority order: the explicit
``content.entities`` list, the subject and object of an observation, and a bounded,
deliberately conservative scan of the episode's text (namespaced identifiers,
``@handles`` and capitalised names). Every stage runs under a budget declared
below; exceeding one truncates deterministically (later mentions are dropped
first) and is counted in :class:`MentionSet.truncated`.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from membrane_core.enums import MemoryType
from membrane_core.models import (
    EntityAlias,
    EntityIdentifier,
    EntityPayload,
    EpisodicPayload,
    Lifecycle,
    MemoryRecord,
)
from membrane_core.policy import Policy

# -- budgets (RFC 3.5.3) ----------------------------------------------------------

#: Most mentions one capture resolves; later ones are dropped.
MAX_MENTIONS_PER_CAPTURE = 16
#: Most extra forms (aliases and identifiers) one mention carries besides its name.
MAX_ALIASES_PER_MENTION = 8
#: Longest normalised term (bytes of UTF-8); a longer form is dropped, never cut.
MAX_TERM_BYTES = 128
#: Most normalised bytes over all forms of all mentions of one capture.
MAX_NORMALISED_BYTES_PER_CAPTURE = 2048
#: Most characters of an episode's text scanned by the extractor.
MAX_SCAN_CHARS = 8192
#: Most lookup keys (terms and identifiers) one capture sends to the store.
MAX_LOOKUPS_PER_CAPTURE = 48
#: Most entity-to-entity relations one capture asserts.
MAX_RELATIONS_PER_CAPTURE = 8
#: Longest capitalised name the text scan accepts, in words.
MAX_NAME_WORDS = 4

#: Predicates with a meaning of their own on the record graph (RFC 2.5); an observation
#: cannot assert them between entities.
RESERVED_PREDICATES = frozenset(
    {
        "derived_from",
        "supersedes",
        "superseded_by",
        "contests",
        "contested_by",
        "mentions",
        "merged_into",
        "merged_from",
        "forked_from",
    }
)
#: Namespace given to ``@handle`` mentions.
HANDLE_NAMESPACE = "handle"

_WS = re.compile(r"\s+")
_EDGE_PUNCT = "\"'`()[]{}<>.,;:!?*_~\u201c\u201d\u2018\u2019"
_IDENT = re.compile(r"^([a-z][a-z0-9_.-]{0,30}):([A-Za-z0-9_@][A-Za-z0-9_.@/+#-]{0,127})$")
_IDENT_IN_TEXT = re.compile(r"(?<![\w:/.@-])([a-z][a-z0-9_-]{1,30}):([A-Za-z0-9_@][A-Za-z0-9_.@/+#-]{0,127})")
_HANDLE = re.compile(r"^@([A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,37}[A-Za-z0-9_])?)$")
_HANDLE_IN_TEXT = re.compile(r"(?<![\w.@])@([A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,37}[A-Za-z0-9_])?)")
_NOT_NAMESPACES = frozenset({"http", "https", "ftp", "file", "data", "mailto", "javascript", "urn"})
_CAP_RUN = re.compile(
    r"(?<![\w'\u2019-])[A-Z\u00c0-\u00d6\u00d8-\u00de][\w'\u2019-]*"
    r"(?: [A-Z\u00c0-\u00d6\u00d8-\u00de][\w'\u2019-]*)*"
)
_PREDICATE = re.compile(r"[^0-9a-z]+")

# Capitalised words that start sentences or name times, not entities (RFC 3.5.1).
_STOPWORDS = frozenset(
    """
a an the i i'm i've i'll i'd me my mine we we're our us you you're your he he's his him she she's
her it it's its they they're their them this that these those there here what who whom whose
which when where why how yes no not oh ah wow hey hi hello thanks thank please sorry ok okay
yeah yep sure so and but or if then also just well really definitely maybe let let's do did
does is are was were be been have has had can could would should will shall may might must
good great nice cool awesome amazing glad love congrats congratulations happy dear anyway
as at by for from in into of on to with about after before during over under up down out
all any some every each both one two other again still first last next
bye goodbye go absolutely woohoo yay btw omg lol haha hmm aw aww cheers welcome perfect doing
totally exactly indeed agreed true right sounds wish hope take care see remember
monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday tonight
mon tue tues wed thu thur thurs fri sat sun
january february march april june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec
""".split()
)


def normalise_term(value: str) -> str:
    """RFC 3.5.2: NFKC, case-folded, whitespace collapsed, edge punctuation stripped."""
    text = unicodedata.normalize("NFKC", value).replace("\u2019", "'")
    return _WS.sub(" ", text).strip().strip(_EDGE_PUNCT).strip().casefold()


def normalise_predicate(value: str) -> str:
    """RFC 3.5.4: an observation predicate as a snake_case relation name (``works at``)."""
    return _PREDICATE.sub("_", unicodedata.normalize("NFKC", value).casefold()).strip("_")


def parse_identifier(value: str) -> tuple[str, str] | None:
    """``(namespace, value)`` of ``github:octocat`` or ``@octocat``, normalised; else ``None``."""
    text = value.strip()
    m = _HANDLE.match(text)
    if m:
        return HANDLE_NAMESPACE, m.group(1).casefold()
    m = _IDENT.match(text)
    if m and m.group(1) not in _NOT_NAMESPACES and not m.group(2).startswith("/"):
        return m.group(1), normalise_term(m.group(2))
    return None


@dataclass(frozen=True)
class Mention:
    """One entity mentioned by a capture: a display name and its normalised lookup forms."""

    name: str
    term: str
    aliases: tuple[tuple[str, str], ...] = ()  #: (display, normalised) other names
    identifiers: tuple[tuple[str, str], ...] = ()  #: (namespace, value), normalised
    source: str = "text"  #: explicit | observation | text
    entity_kind: str = "thing"

    def keys(self) -> Iterator[tuple[str | None, str]]:
        """Lookup keys, most specific first: identifiers, then the name, then aliases."""
        yield from self.identifiers
        yield None, self.term
        for _, alias in self.aliases:
            yield None, alias


@dataclass(frozen=True)
class RelationCandidate:
    """An observation's ``subject predicate object`` between two mentioned entities (RFC 3.5.4)."""

    subject: str  #: normalised term of the subject mention
    predicate: str
    object: str  #: normalised term of the object mention


@dataclass
class MentionSet:
    """The mentions of one capture after budgets, with what each budget dropped (RFC 3.5.3)."""

    mentions: list[Mention] = field(default_factory=list)
    relations: list[RelationCandidate] = field(default_factory=list)
    truncated: dict[str, int] = field(default_factory=dict)
    _bytes: int = 0
    _lookups: int = 0

    def drop(self, budget: str, n: int = 1) -> None:
        """Count ``n`` items dropped by ``budget``."""
        self.truncated[budget] = self.truncated.get(budget, 0) + n

    def find(self, term: str) -> Mention | None:
        """The kept mention with name or alias ``term``."""
        for m in self.mentions:
            if m.term == term or any(a == term for _, a in m.aliases):
                return m
        return None

    def add(self, mention: Mention) -> bool:
        """Keep ``mention`` unless a budget refuses it; a repeat of a kept name is merged away."""
        if self.find(mention.term) is not None:
            return True
        if len(self.mentions) >= MAX_MENTIONS_PER_CAPTURE:
            self.drop("mentions")
            return False
        size = sum(len(k[1].encode()) for k in mention.keys())
        lookups = sum(1 for _ in mention.keys())
        if self._bytes + size > MAX_NORMALISED_BYTES_PER_CAPTURE:
            self.drop("bytes")
            return False
        if self._lookups + lookups > MAX_LOOKUPS_PER_CAPTURE:
            self.drop("lookups")
            return False
        self._bytes += size
        self._lookups += lookups
        self.mentions.append(mention)
        return True

    def report(self) -> dict[str, object]:
        """Counts for the capture outcome; ``truncated`` only when a budget cut."""
        out: dict[str, object] = {"mentions": len(self.mentions)}
        if self.truncated:
            out["truncated"] = dict(sorted(self.truncated.items()))
        return out


def _term_ok(term: str, ms: MentionSet) -> bool:
    if not term:
        return False
    if len(term.encode()) > MAX_TERM_BYTES:
        ms.drop("term_bytes")
        return False
    return True


def parse_mention(raw: str, ms: MentionSet, *, source: str) -> Mention | None:
    """RFC 3.5.1: one explicit mention; ``"Melanie | Mel | github:mel"`` lists equal forms."""
    names: list[tuple[str, str]] = []
    idents: list[tuple[str, str]] = []
    forms = [f.strip() for f in raw.split("|") if f.strip()]
    for form in forms:
        ident = parse_identifier(form)
        if ident is not None:
            if _term_ok(ident[1], ms) and ident not in idents:
                idents.append(ident)
            continue
        term = normalise_term(form)
        if _term_ok(term, ms) and term not in (t for _, t in names):
            names.append((_WS.sub(" ", form).strip(), term))
    if not names and not idents:
        return None
    if names:
        name, term = names[0]
    else:
        name = forms[0] if parse_identifier(forms[0]) else f"{idents[0][0]}:{idents[0][1]}"
        term = normalise_term(name)
    # identifiers are the most specific forms: they are kept first
    room = MAX_ALIASES_PER_MENTION
    kept_idents = idents[:room]
    aliases = tuple(names[1:][: room - len(kept_idents)])
    dropped = len(idents) - len(kept_idents) + max(0, len(names) - 1) - len(aliases)
    if dropped:
        ms.drop("aliases", dropped)
    idents = kept_idents
    kind = "account" if idents and not names else "thing"
    return Mention(
        name=name, term=term, aliases=aliases, identifiers=tuple(idents), source=source, entity_kind=kind
    )


def _sentence_starts(text: str) -> set[int]:
    starts = {0}
    for m in re.finditer(r"[.!?:;\n]\s*[\"'(“]*", text):
        starts.add(m.end())
    return starts


def _capitalised(token: str) -> bool:
    return token[:1].isupper() and len(token) > 1 and token.casefold() not in _STOPWORDS


def _name_spans(text: str) -> Iterator[tuple[int, str]]:
    """Runs of capitalised words separated by single spaces; a possessive ends a run."""
    for m in _CAP_RUN.finditer(text):
        words: list[tuple[int, str]] = []
        pos = m.start()
        for token in m.group().split(" "):
            stripped = _strip_possessive(token)
            words.append((pos, stripped))
            pos += len(token) + 1
            if stripped != token:  # "Mel's sister"
                yield from _close(words)
                words = []
        yield from _close(words)


def _close(words: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    while words and not _capitalised(words[0][1]):
        words = words[1:]
    while words and not _capitalised(words[-1][1]):
        words = words[:-1]
    if words and len(words) <= MAX_NAME_WORDS:
        yield words[0][0], " ".join(w for _, w in words)


def _strip_possessive(token: str) -> str:
    for suffix in ("'s", "\u2019s", "'", "\u2019"):
        if token.endswith(suffix):
            return token[: -len(suffix)]
    return token


def scan_text(text: str, ms: MentionSet) -> list[Mention]:
    """RFC 3.5.1: identifiers, handles and capitalised names in ``text``, by first appearance.

    Only the first MAX_SCAN_CHARS characters are read. A single capitalised word counts
    only if the text never writes it in lower case and, at the start of a sentence, only
    if the text also capitalises it mid-sentence.
    """
    if len(text) > MAX_SCAN_CHARS:
        ms.drop("text_chars", len(text) - MAX_SCAN_CHARS)
        text = text[:MAX_SCAN_CHARS]
    found: list[tuple[int, Mention]] = []
    taken: list[tuple[int, int]] = []
    for m in _IDENT_IN_TEXT.finditer(text):
        raw = m.group(0).rstrip(".,;:!?)")
        if m.group(1) in _NOT_NAMESPACES or m.group(2).startswith("/"):
            continue
        mention = parse_mention(raw, ms, source="text")
        if mention is not None:
            found.append((m.start(), mention))
            taken.append((m.start(), m.end()))
    for m in _HANDLE_IN_TEXT.finditer(text):
        mention = parse_mention(m.group(0).rstrip(".-"), ms, source="text")
        if mention is not None:
            found.append((m.start(), mention))
            taken.append((m.start(), m.end()))
    starts = _sentence_starts(text)
    spans = [(pos, name) for pos, name in _name_spans(text) if not any(a <= pos < b for a, b in taken)]
    mid_sentence = {normalise_term(n) for pos, n in spans if pos not in starts}
    lower_words = set(re.findall(r"(?<![\w'])[a-z][a-z'-]*", text))
    for pos, name in spans:
        term = normalise_term(name)
        if " " not in name and (term in lower_words or (pos in starts and term not in mid_sentence)):
            continue  # a single word the text also writes in lower case is no name
        if _term_ok(term, ms):
            found.append((pos, Mention(name=name, term=term, source="text")))
    found.sort(key=lambda item: item[0])
    return [mention for _, mention in found]


def _entity_like(value: str) -> bool:
    if parse_identifier(value) is not None:
        return True
    words = value.split()
    return 0 < len(words) <= MAX_NAME_WORDS and all(_capitalised(w) for w in words)


def extract(record: MemoryRecord) -> MentionSet | None:
    """RFC 3.5.1: the budgeted mentions of a capture's primary record; ``None`` if not episodic."""
    p = record.payload
    if not isinstance(p, EpisodicPayload):
        return None
    ms = MentionSet()
    for raw in p.entities:
        mention = parse_mention(raw, ms, source="explicit")
        if mention is not None:
            ms.add(mention)
    subject, predicate, obj = (p.data.get(k) for k in ("subject", "predicate", "object"))
    if p.source_kind == "observation" and all(isinstance(v, str) for v in (subject, predicate, obj)):
        _observation(str(subject), str(predicate), str(obj), ms)
    if p.text:
        for mention in scan_text(p.text, ms):
            ms.add(mention)
    return ms


def _observation(subject: str, predicate: str, obj: str, ms: MentionSet) -> None:
    terms: list[str | None] = []
    for value in (subject, obj):
        known = ms.find(normalise_term(value))
        if known is None and _entity_like(value):
            mention = parse_mention(value, ms, source="observation")
            if mention is not None and ms.add(mention):
                known = ms.find(mention.term)
        terms.append(known.term if known else None)
    pred = normalise_predicate(predicate)
    s, o = terms
    if s is None or o is None or s == o or not pred:
        return
    if pred in RESERVED_PREDICATES:
        ms.drop("reserved_predicate")
    elif len(ms.relations) >= MAX_RELATIONS_PER_CAPTURE:
        ms.drop("relations")
    else:
        ms.relations.append(RelationCandidate(subject=s, predicate=pred, object=o))


def new_entity(
    mention: Mention, source: MemoryRecord, policy: Policy, now: datetime, entity_id: uuid.UUID
) -> MemoryRecord:
    """RFC 3.5.2: the entity record a new mention creates, in the source's scope and sensitivity."""
    payload = EntityPayload(
        canonical_name=mention.name[:512],
        entity_kind=mention.entity_kind,
        aliases=[EntityAlias(value=display) for display, _ in mention.aliases if display],
        identifiers=[EntityIdentifier(namespace=ns, value=v) for ns, v in mention.identifiers],
    )
    return MemoryRecord(
        id=entity_id,
        type=MemoryType.ENTITY,
        scope=source.scope,
        sensitivity=source.sensitivity,
        confidence=source.confidence,
        salience=1.0,
        lifecycle=Lifecycle(
            decay=policy.decay_profile(MemoryType.ENTITY),
            base_salience=1.0,
            reinforced_at=now,
            deletion_policy=policy.deletion[MemoryType.ENTITY],
        ),
        payload=payload,
        summary=mention.name[:4096],
        provenance=source.provenance,
        occurred_at=source.occurred_at,
        created_at=now,
        updated_at=now,
        recorded_at=now,
    )
