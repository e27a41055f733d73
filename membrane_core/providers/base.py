"""Provider ports: embedding, triple extraction and re-ranking (RFC 12, 8.2.4).

The rest of the core sees providers only through small Protocols (RFC 12.1 embedding
providers, RFC 12.2 LLM extraction, RFC 8.2.4 rerankers), so the HTTP adapters, the local
models and the offline providers (RFC 12.3) are interchangeable, and an in-memory fake
satisfies them in tests.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

__all__ = [
    "DEFAULT_CONFIDENCE",
    "EmbeddingProvider",
    "ProviderError",
    "Reranker",
    "TransientProviderError",
    "Triple",
    "TripleExtractor",
    "is_external",
    "normalise_predicate",
]


class ProviderError(Exception):
    """An embedding or extraction provider failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__doc__)


class TransientProviderError(ProviderError):
    """A provider failed in a way that may succeed on retry."""


#: Confidence of a triple whose source gives none.
DEFAULT_CONFIDENCE = 0.6

#: Text of one triple slot: stripped, non-empty, at most 512 characters.
TripleText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=512)]


class Triple(BaseModel):
    """A subject-predicate-object fact extracted from text (RFC 12.2)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject: TripleText
    predicate: TripleText
    object: TripleText
    confidence: float = Field(default=DEFAULT_CONFIDENCE, ge=0.0, le=1.0, allow_inf_nan=False)


_NON_WORD = re.compile(r"[^0-9a-z]+")


def normalise_predicate(predicate: str) -> str:
    """Predicate in snake_case, e.g. ``"Works at"`` -> ``works_at`` (RFC 12.2).

    Returns an empty string when nothing word-like is left.
    """
    return _NON_WORD.sub("_", predicate.casefold()).strip("_")


#: RFC 7.6, 12.3: the providers that run inside the process: what they read stays in it.
IN_PROCESS_PROVIDERS = frozenset({"local", "hashing", "deterministic", "none"})


def is_external(name: str) -> bool:
    """RFC 7.6: whether the provider kind ``name`` sends what it reads out of the process
    (an HTTP provider, or a kind this module does not know)."""
    return name not in IN_PROCESS_PROVIDERS


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns texts into fixed-length vectors (RFC 12.1).

    ``name`` identifies the provider kind, ``model`` the model behind it and
    ``dim`` the length of every vector it returns.
    """

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector of length ``dim`` per text, in input order (RFC 12.1).

        Raises ``ProviderError``; ``TransientProviderError`` when a retry may
        succeed (timeouts, HTTP 429, HTTP 5xx, connection errors).
        """
        ...


@runtime_checkable
class Reranker(Protocol):
    """Scores how relevant each text is to a question, reading both together (RFC 8.2.4)."""

    @property
    def name(self) -> str: ...

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance score per text, in input order, higher is more relevant; raises
        ``ProviderError``."""
        ...


@dataclass(frozen=True)
class Tokens:
    """One text's word pieces and their last hidden states, one row each, as the model gave
    them: markers included, not normalised (RFC 8.2.3)."""

    pieces: tuple[str, ...]
    vectors: Any  # float32 array, len(pieces) x dim


@runtime_checkable
class TokenEmbedder(Protocol):
    """An embedding provider that also gives each text's tokens (RFC 8.2.3)."""

    @property
    def tokens(self) -> bool:
        """Whether :meth:`embed_tokens` works in this process."""
        ...

    def embed_tokens(self, texts: Sequence[str]) -> tuple[list[list[float]], list[Tokens]]:
        """``embed``'s vectors and every text's tokens, in input order."""
        ...


def token_embedder(provider: object) -> TokenEmbedder | None:
    """``provider`` when it gives tokens in this process, else ``None`` (RFC 8.2.3)."""
    if isinstance(provider, TokenEmbedder) and provider.tokens:
        return provider
    return None


def unit(vector: Sequence[float]) -> list[float] | None:
    """RFC 12.4, 8.1.1: ``vector`` scaled to length 1; ``None`` when it has no direction (all
    zeros) or a component is NaN or infinite.

    Cosine distance does not depend on length. pgvector stores float32, where a vector as
    given may overflow (a component above 3.4e38 is refused) or round to all zeros (its
    distance to anything is then NaN, which Postgres sorts above every number); a unit
    vector can do neither: it has a component of at least 1/sqrt(dim).
    """
    norm = math.hypot(*vector)  # NaN or infinite when a component is; 0 only when all are
    if not math.isfinite(norm) or norm == 0.0:
        return None
    return [x / norm for x in vector]


@runtime_checkable
class TripleExtractor(Protocol):
    """Extracts subject-predicate-object triples from texts (RFC 12.2)."""

    @property
    def name(self) -> str: ...

    def extract(self, texts: Sequence[str]) -> list[list[Triple]]:
        """One list of triples per text, in input order (RFC 12.2).

        Raises ``ProviderError``; ``TransientProviderError`` when a retry may
        succeed.
        """
        ...
