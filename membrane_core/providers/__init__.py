"""Embedding and LLM extraction providers (RFC 12).

RFC 12.1 embedding providers, RFC 12.2 LLM extraction, RFC 12.3 offline
providers. This package is the only part of ``membrane_core`` that imports
httpx. Entry points read the settings and call the two factories below; the
rest of the core receives the built providers.
"""

from __future__ import annotations

from pathlib import Path

from membrane_core.providers.base import (
    DEFAULT_CONFIDENCE,
    EmbeddingProvider,
    ProviderError,
    TransientProviderError,
    Triple,
    TripleExtractor,
    is_external,
    normalise_predicate,
)
from membrane_core.providers.deterministic import (
    DeterministicExtractor,
    HashingEmbeddingProvider,
)
from membrane_core.providers.embedding_http import OpenAIEmbeddingProvider
from membrane_core.providers.embedding_local import INSTALL_HINT, LocalMiniLMProvider
from membrane_core.providers.llm_http import OpenAIChatExtractor, parse_triples
from membrane_core.providers.ratelimit import RateLimiter

__all__ = [
    "DEFAULT_CONFIDENCE",
    "EMBEDDING_KINDS",
    "EXTRACTOR_KINDS",
    "INSTALL_HINT",
    "DeterministicExtractor",
    "EmbeddingProvider",
    "HashingEmbeddingProvider",
    "LocalMiniLMProvider",
    "OpenAIChatExtractor",
    "OpenAIEmbeddingProvider",
    "ProviderError",
    "RateLimiter",
    "TransientProviderError",
    "Triple",
    "TripleExtractor",
    "build_embedding_provider",
    "build_extractor",
    "is_external",
    "normalise_predicate",
    "parse_triples",
]

#: Values of ``MEMBRANE_EMBEDDING_PROVIDER``.
EMBEDDING_KINDS = ("none", "hashing", "http", "local")
#: Values of ``MEMBRANE_LLM_PROVIDER``.
EXTRACTOR_KINDS = ("none", "deterministic", "http")


def _kind(kind: str, allowed: tuple[str, ...], setting: str) -> str:
    normalised = kind.strip().lower()
    if normalised not in allowed:
        raise ValueError(f"{setting} must be one of {', '.join(allowed)}; got {kind!r}")
    return normalised


def _required(value: str | None, setting: str, kind: str) -> str:
    if value is None or not value.strip():
        raise ValueError(f"{setting} is required when the provider is {kind!r}")
    return value.strip()


def build_embedding_provider(
    kind: str,
    *,
    dim: int,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    timeout: float = 30.0,
    cache_dir: Path | None = None,
    threads: int = 0,
) -> EmbeddingProvider | None:
    """The embedding provider named by ``MEMBRANE_EMBEDDING_PROVIDER`` (RFC 12.1).

    ``none`` gives ``None`` (no vector ranking, RFC 12.3); ``hashing`` the
    offline hashing embedder; ``http`` an OpenAI-compatible endpoint, which
    needs ``MEMBRANE_EMBEDDING_BASE_URL`` and ``MEMBRANE_EMBEDDING_MODEL``;
    ``local`` all-MiniLM-L6-v2, which needs ``dim == 384`` (its exported graph is kept
    in ``cache_dir``; ``threads`` caps its ONNX Runtime threads, 0 leaves its default, RFC
    12.4). Raises
    ``ValueError`` naming the setting at fault, and ``ProviderError`` when the
    local model's optional extra is not installed.
    """
    chosen = _kind(kind, EMBEDDING_KINDS, "MEMBRANE_EMBEDDING_PROVIDER")
    if chosen == "none":
        return None
    if dim < 1:
        raise ValueError(f"MEMBRANE_EMBEDDING_DIM must be >= 1, got {dim}")
    if chosen == "hashing":
        return HashingEmbeddingProvider(dim)
    if chosen == "local":
        if dim != LocalMiniLMProvider.dim:
            raise ValueError(
                f"MEMBRANE_EMBEDDING_DIM must be {LocalMiniLMProvider.dim} for the "
                f"local provider ({LocalMiniLMProvider.model}), got {dim}"
            )
        return LocalMiniLMProvider(cache_dir=cache_dir, threads=threads)
    return OpenAIEmbeddingProvider(
        base_url=_required(base_url, "MEMBRANE_EMBEDDING_BASE_URL", chosen),
        model=_required(model, "MEMBRANE_EMBEDDING_MODEL", chosen),
        api_key=api_key or None,
        dim=dim,
        timeout=timeout,
    )


def build_extractor(
    kind: str,
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    timeout: float = 60.0,
    rate_limit_per_second: float = 1.0,
) -> TripleExtractor | None:
    """The triple extractor named by ``MEMBRANE_LLM_PROVIDER`` (RFC 12.2).

    ``none`` gives ``None`` (no extraction); ``deterministic`` the offline rule
    set (RFC 12.3); ``http`` an OpenAI-compatible chat endpoint, which needs
    ``MEMBRANE_LLM_BASE_URL`` and ``MEMBRANE_LLM_MODEL``. Raises
    ``ValueError`` naming the setting at fault.
    """
    chosen = _kind(kind, EXTRACTOR_KINDS, "MEMBRANE_LLM_PROVIDER")
    if chosen == "none":
        return None
    if chosen == "deterministic":
        return DeterministicExtractor()
    return OpenAIChatExtractor(
        base_url=_required(base_url, "MEMBRANE_LLM_BASE_URL", chosen),
        model=_required(model, "MEMBRANE_LLM_MODEL", chosen),
        api_key=api_key or None,
        timeout=timeout,
        rate_limit_per_second=rate_limit_per_second,
    )
