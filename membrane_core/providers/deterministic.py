"""Offline providers: rule-based triples and hashed embeddings (RFC 12.3).

Neither touches the network or a model, and both give the same answer for the
same input on every machine, so they serve tests and deployments that run
without any provider configured.

``DeterministicExtractor`` reads plain English statements of the shapes
"X is Y", "X uses Y", "X prefers Y", "X works at Y", "X lives in Y" and
"X likes Y" (present tense; "are"/"am" count as "is", "works for" as
"works at"; "is working at" and "is living in" as the progressive forms). It
favours precision: questions, negated or hedged statements, pronoun subjects
other than I/we/you, and objects that contain another verb are skipped. A
clause without a subject after "and" or a comma reuses the sentence's subject
("Ann lives in Oslo and works at Acme").

``HashingEmbeddingProvider`` hashes lowercased word unigrams and bigrams into
``dim`` signed buckets with BLAKE2b and L2-normalises the result.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator, Sequence
from itertools import pairwise
from typing import Any

import numpy as np
from pydantic import ValidationError

from membrane_core.providers.base import Tokens, Triple

__all__ = ["DeterministicExtractor", "HashingEmbeddingProvider"]

#: Surface forms, longest first so that "is working at" beats "is".
_VERBS: tuple[tuple[str, str], ...] = (
    (r"is\s+working\s+(?:at|for)|works?\s+(?:at|for)", "works_at"),
    (r"is\s+living\s+in|lives?\s+in", "lives_in"),
    (r"prefers?", "prefers"),
    (r"likes?", "likes"),
    (r"uses?", "uses"),
    (r"is|are|am", "is"),
)
_VERB = re.compile(
    r"\b(?:" + "|".join(f"(?P<{pred}_{i}>{pat})" for i, (pat, pred) in enumerate(_VERBS)) + r")\b",
    re.IGNORECASE,
)
#: Where a subject-less clause with its own verb starts (no capturing groups,
#: or ``split`` would return them).
_CHAIN = re.compile(
    r"(?:\s*,\s*(?:and\s+)?|\s+and\s+)(?=(?:" + "|".join(pat for pat, _ in _VERBS) + r")\b)",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?:])\s+|[;\n]+")
_WORD = re.compile(r"[\w'\u2019-]+")

_ARTICLES = frozenset({"a", "an", "the"})
#: Subjects with no referent of their own.
_PRONOUNS = frozenset(
    """it this that these those there here he she they him her them what who which
    everyone nobody someone""".split()
)
#: Words that make a statement negated, hedged, conditional or subordinate.
_BLOCKERS = frozenset(
    """not no never don't doesn't didn't isn't aren't won't can't cannot might may
    could would should will shall must if when whether who which that because
    although though unless maybe perhaps probably once longer""".split()
)
_TRIM = " \t\"'\u201c\u201d\u2018\u2019()[]{}.,:!"
_MAX_SUBJECT_WORDS = 6
_MAX_OBJECT_WORDS = 12


def _words(text: str) -> list[str]:
    return [w.casefold().replace("\u2019", "'") for w in _WORD.findall(text)]


def _strip_article(phrase: str) -> str:
    head, _, tail = phrase.partition(" ")
    return tail.strip(_TRIM) if tail and head.casefold() in _ARTICLES else phrase


def _clean_subject(raw: str) -> str | None:
    subject = raw.strip(_TRIM)
    words = _words(subject)
    if not words or len(words) > _MAX_SUBJECT_WORDS:
        return None
    if (len(words) == 1 and words[0] in _PRONOUNS) or _BLOCKERS.intersection(words):
        return None
    return _strip_article(subject)


def _clean_object(raw: str) -> str | None:
    obj = raw.strip(_TRIM)
    words = _words(obj)
    if not words or len(words) > _MAX_OBJECT_WORDS or _BLOCKERS.intersection(words):
        return None
    if _VERB.search(obj):
        return None
    return _strip_article(obj)


def _predicate(match: re.Match[str]) -> str:
    group = match.lastgroup or ""
    return group.rsplit("_", 1)[0]


def _sentence_triples(sentence: str) -> Iterator[tuple[str, str, str]]:
    sentence = sentence.strip()
    if not sentence or sentence.endswith("?"):
        return
    sentence = sentence.rstrip(_TRIM)
    first = _VERB.search(sentence)
    if first is None:
        return
    subject = _clean_subject(sentence[: first.start()])
    if subject is None:
        return
    clauses = _CHAIN.split(sentence[first.start() :])
    for clause in clauses:
        verb = _VERB.match(clause.strip())
        if verb is None:
            continue
        obj = _clean_object(clause.strip()[verb.end() :])
        if obj is not None:
            yield subject, _predicate(verb), obj


class DeterministicExtractor:
    """Rule-based English triple extractor, offline and bounded (RFC 12.3)."""

    name = "deterministic"

    def __init__(self, *, max_chars: int = 4000, max_triples: int = 16) -> None:
        if max_chars < 1 or max_triples < 1:
            raise ValueError("max_chars and max_triples must be >= 1")
        self.max_chars = max_chars
        self.max_triples = max_triples

    def extract(self, texts: Sequence[str]) -> list[list[Triple]]:
        """One list of triples per text; scans at most ``max_chars`` (RFC 12.3)."""
        if isinstance(texts, str):
            raise TypeError("extract() takes a sequence of texts, not a single str")
        return [self._extract_one(text) for text in texts]

    def _extract_one(self, text: str) -> list[Triple]:
        triples: list[Triple] = []
        seen: set[tuple[str, str, str]] = set()
        for sentence in _SENTENCE_END.split(text[: self.max_chars]):
            for key in _sentence_triples(sentence):
                if key in seen:
                    continue
                seen.add(key)
                try:
                    triples.append(Triple(subject=key[0], predicate=key[1], object=key[2]))
                except ValidationError:
                    continue
                if len(triples) >= self.max_triples:
                    return triples
        return triples


class HashingEmbeddingProvider:
    """Feature-hashing embedding of word unigrams and bigrams (RFC 12.3).

    Each feature adds +1 or -1 to one of ``dim`` buckets, both chosen by a
    BLAKE2b digest of the feature; the vector is then L2-normalised. A text
    with no words embeds as a fixed unit vector, never as zeros, so cosine
    distance stays defined.
    """

    name = "hashing"
    model = "blake2b-unigram-bigram-v1"

    #: Characters of a text that are hashed; the rest is ignored.
    max_chars = 100_000

    def __init__(self, dim: int, *, tokens: bool = False) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.dim = dim
        #: RFC 8.2.3: whether late interaction uses :meth:`embed_tokens` (off unless asked:
        #: a word-for-word match adds nothing to the full-text arm but noise)
        self.tokens = tokens

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector of length ``dim`` per text (RFC 12.3)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        return [self._embed_one(text) for text in texts]

    def embed_tokens(self, texts: Sequence[str]) -> tuple[list[list[float]], list[Tokens]]:
        """:meth:`embed`'s vectors and each text's words as tokens (RFC 8.2.3): a word's row
        is the same ±1 vector wherever it occurs, drawn from its digest, so that the
        late-interaction score of a text is the share of the query's words it contains."""
        vectors = self.embed(texts)
        out = []
        for text in texts:
            words = re.findall(r"\w+", text[: self.max_chars].casefold())
            pieces = ("[CLS]", *words, "[SEP]")
            out.append(Tokens(pieces, np.array([self._word_row(p) for p in pieces], dtype=np.float32)))
        return vectors, out

    def _word_row(self, word: str) -> Any:
        digest = hashlib.shake_256(word.encode("utf-8")).digest((self.dim + 7) // 8)
        bits = np.unpackbits(np.frombuffer(digest, dtype=np.uint8))[: self.dim]
        return bits.astype(np.float32) * 2.0 - 1.0

    def _embed_one(self, text: str) -> list[float]:
        tokens = re.findall(r"\w+", text[: self.max_chars].casefold())
        features = tokens + [f"{a} {b}" for a, b in pairwise(tokens)]
        if not features:
            features = ["\x00empty"]
        vector = [0.0] * self.dim
        for feature in features:
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=b"membrane").digest()
            value = int.from_bytes(digest, "little")
            vector[(value >> 1) % self.dim] += 1.0 if value & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vector))
        if norm == 0.0:
            # Opposite signs cancelled out in every bucket; fall back to a fixed axis.
            vector[0] = 1.0
            return vector
        return [x / norm for x in vector]
