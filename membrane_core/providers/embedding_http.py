"""OpenAI-compatible HTTP embedding provider (RFC 12.1).

``POST {base_url}/embeddings`` with ``{"model": ..., "input": [...]}``, in
batches of at most ``max_batch`` texts. Vectors are put back in input order by
the ``index`` each item of the answer carries, and each must have ``dim``
floats. Errors are mapped as described in ``membrane_core.providers._http``.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from membrane_core.providers import _http
from membrane_core.providers.base import ProviderError

__all__ = ["OpenAIEmbeddingProvider"]


class _Item(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False)

    index: int
    embedding: list[float]


class _Answer(BaseModel):
    data: list[_Item]


class OpenAIEmbeddingProvider(_http.ClientOwner):
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint (RFC 12.1)."""

    name = "http"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        dim: int,
        timeout: float = 30.0,
        max_batch: int = 256,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self.model = model
        self.dim = dim
        self.max_batch = max_batch
        self._url = _http.endpoint(base_url, "embeddings")
        self._client = _http.build_client(api_key=api_key, timeout=timeout, transport=transport)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One ``dim``-long vector per text, in input order (RFC 12.1)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.max_batch):
            vectors.extend(self._embed_batch(list(texts[start : start + self.max_batch])))
        return vectors

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        body = _http.post_json(self._client, self._url, {"model": self.model, "input": batch})
        try:
            answer = _Answer.model_validate(body)
        except ValidationError as exc:
            raise ProviderError(
                f"malformed embeddings answer from {self._url}: "
                f"{exc.error_count()} validation error(s), first: {exc.errors()[0]['msg']}"
            ) from exc
        by_index = {item.index: item.embedding for item in answer.data}
        if len(answer.data) != len(batch) or set(by_index) != set(range(len(batch))):
            raise ProviderError(
                f"embeddings answer from {self._url} does not match the request: "
                f"expected indexes 0..{len(batch) - 1}, "
                f"got {sorted(item.index for item in answer.data)[:10]}"
            )
        vectors = [by_index[i] for i in range(len(batch))]
        for i, vector in enumerate(vectors):
            if len(vector) != self.dim:
                raise ProviderError(
                    f"embedding dimension mismatch from model {self.model!r}: "
                    f"expected {self.dim}, got {len(vector)} (item {i})"
                )
        return vectors
