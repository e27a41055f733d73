"""A cross-encoder from a local folder, run by ONNX Runtime (RFC 8.2.4).

A cross-encoder reads the question and a record's text together and answers one relevance
logit for the pair. Nothing is fetched: the operator points ``MEMBRANE_RERANKER_PATH`` at a
folder holding a BERT-family sequence-classification model with one output (two are read
as "not relevant, relevant"), in the layout a model hub gives for one:

- ``tokenizer.json`` (a fast tokenizer), or the files ``transformers`` builds one from
  (``vocab.txt`` and ``tokenizer_config.json``); with ``transformers`` installed;
- ``model.onnx`` or ``onnx/model.onnx``, loaded as it is; otherwise the weights
  (``config.json`` and ``model.safetensors`` or ``pytorch_model.bin``), exported once with
  torch into ``<cache_dir>/reranker-<digest>.onnx`` (under a temporary name, then renamed),
  the digest taken of the folder's path, its ``config.json`` and its weights' sizes and
  times, so that changed weights are exported again;
- with ``quantized`` (``MEMBRANE_RERANKER_INT8``), that graph's weights as int8 in
  ``<cache_dir>/reranker-<digest>-int8.onnx``: about half the time a pair.

torch, ``transformers`` and ``onnxruntime`` come with the ``local`` extra; each is imported
only when a reranker is built.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from membrane_core.providers.base import ProviderError
from membrane_core.providers.embedding_local import (
    INSTALL_HINT,
    default_cache_dir,
    export_bert,
    quantize_int8,
)

__all__ = ["MAX_PAIR_TOKENS", "LocalCrossEncoder"]

#: RFC 8.2.4: a question and a record's text are cut to this many word pieces together
#: (the longer of the two first), or to the model's own maximum when that is smaller.
MAX_PAIR_TOKENS = 512
_GRAPHS = ("model.onnx", "onnx/model.onnx")
_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


class LocalCrossEncoder:
    """RFC 8.2.4: relevance logits of (question, text) pairs from a model in ``folder``."""

    def __init__(
        self, folder: Path, *, cache_dir: Path | None = None, batch_size: int = 32, quantized: bool = False
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        folder = Path(folder).expanduser()
        if not folder.is_dir():
            raise ProviderError(f"the reranker folder {folder} does not exist")
        self.name = folder.name
        self.batch_size = batch_size
        try:
            ort = importlib.import_module("onnxruntime")
            self._np = importlib.import_module("numpy")
            tokenizers = importlib.import_module("tokenizers")
        except ImportError as exc:
            raise ProviderError(f"{INSTALL_HINT}; import failed: {exc}") from exc
        config = _config(folder)
        cache = cache_dir or default_cache_dir()
        graph = next((folder / g for g in _GRAPHS if (folder / g).is_file()), None)
        if graph is None:
            graph = _exported(folder, config, cache)
        if quantized:  # RFC 8.2.4: the graph's weights as int8, kept beside the export
            graph = _int8(graph, cache)
            self.name = f"{self.name}-int8"
        try:
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            self._session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise ProviderError(f"cannot load the reranker graph {graph}: {exc}") from exc
        self._inputs = {i.name for i in self._session.get_inputs()}
        if "input_ids" not in self._inputs:
            raise ProviderError(
                f"the reranker graph {graph} takes no input_ids (it takes {sorted(self._inputs)})"
            )
        path = _tokenizer_file(folder, cache)
        try:
            tok = tokenizers.Tokenizer.from_file(str(path))
        except Exception as exc:
            raise ProviderError(f"cannot read the reranker's tokenizer {path}: {exc}") from exc
        limit = min(MAX_PAIR_TOKENS, int(config.get("max_position_embeddings", MAX_PAIR_TOKENS)))
        tok.enable_truncation(max_length=limit, strategy="longest_first")
        tok.enable_padding(pad_id=int(config.get("pad_token_id") or 0))
        self._tokenizer = tok
        #: a model with one token type (RoBERTa's kind) reads both texts as type 0
        self._one_type = int(config.get("type_vocab_size", 2)) < 2

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """RFC 8.2.4: one relevance logit per text, higher is more relevant; a model with two
        outputs answers the second minus the first."""
        if isinstance(texts, str):
            raise TypeError("score() takes a sequence of texts, not a single str")
        out: list[float] = []
        try:
            for i in range(0, len(texts), self.batch_size):
                out += self._run(query, list(texts[i : i + self.batch_size]))
        except ProviderError:
            raise
        except Exception as exc:
            raise ProviderError(f"the reranker {self.name} failed: {exc}") from exc
        return out

    def _run(self, query: str, texts: list[str]) -> list[float]:
        np = self._np
        encoded = self._tokenizer.encode_batch([(query, t) for t in texts])
        feeds = {
            "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64) * (not self._one_type),
        }
        logits = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        logits = np.asarray(logits, dtype=np.float64).reshape(len(texts), -1)
        if logits.shape[1] == 1:
            scores = logits[:, 0]
        elif logits.shape[1] == 2:
            scores = logits[:, 1] - logits[:, 0]
        else:
            raise ProviderError(f"the reranker {self.name} answers {logits.shape[1]} labels; expected 1 or 2")
        return [float(s) for s in scores]


def _config(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ProviderError(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _digest(folder: Path, config: dict[str, Any]) -> str:
    h = hashlib.sha256(str(folder.resolve()).encode())
    h.update(json.dumps(config, sort_keys=True).encode())
    for name in _WEIGHTS:
        path = folder / name
        if path.is_file():
            st = path.stat()
            h.update(f"{name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def _exported(folder: Path, config: dict[str, Any], cache_dir: Path) -> Path:
    """The folder's weights as an ONNX graph in ``cache_dir``, exported on first use."""
    if not config or not any((folder / w).is_file() for w in _WEIGHTS):
        raise ProviderError(
            f"the reranker folder {folder} has no {' or '.join(_GRAPHS)} and no weights to export "
            f"(config.json with {' or '.join(_WEIGHTS)})"
        )
    graph = cache_dir / f"reranker-{_digest(folder, config)}.onnx"
    if graph.is_file():
        return graph
    try:
        transformers = importlib.import_module("transformers")
    except ImportError as exc:
        raise ProviderError(f"{INSTALL_HINT}; import failed: {exc}") from exc
    try:
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            str(folder), local_files_only=True
        ).eval()
    except Exception as exc:
        raise ProviderError(f"cannot load the reranker weights in {folder}: {exc}") from exc
    try:
        export_bert(model, graph, output="logits")
    except Exception as exc:
        raise ProviderError(f"cannot export the reranker in {folder} to ONNX: {exc}") from exc
    return graph


def _int8(graph: Path, cache_dir: Path) -> Path:
    """``graph`` with int8 weights (ONNX Runtime's dynamic quantization, as the embedding
    model's, RFC 12.1) in ``cache_dir``, made once per graph file."""
    st = graph.stat()
    key = hashlib.sha256(f"{graph.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
    out = cache_dir / f"reranker-{key}-int8.onnx"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        quantize_int8(graph, out)
    except Exception as exc:
        raise ProviderError(f"cannot quantize the reranker graph {graph}: {exc}") from exc
    return out


def _tokenizer_file(folder: Path, cache_dir: Path) -> Path:
    """The folder's ``tokenizer.json``, or one that ``transformers`` builds from its
    vocabulary, kept in ``cache_dir``."""
    own = folder / "tokenizer.json"
    if own.is_file():
        return own
    built = cache_dir / f"reranker-tokenizer-{_digest(folder, _config(folder))}.json"
    if built.is_file():
        return built
    try:
        transformers = importlib.import_module("transformers")
        fast = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True, use_fast=True)
        backend = fast.backend_tokenizer
    except Exception as exc:
        raise ProviderError(
            f"the reranker folder {folder} has no tokenizer.json and none can be built: {exc}"
        ) from exc
    built.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=built.parent, suffix=".json.part")
    os.close(fd)
    try:
        backend.save(tmp)
        os.replace(tmp, built)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return built
