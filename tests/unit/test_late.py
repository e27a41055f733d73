"""Late interaction's arithmetic (RFC 8.2.3): packing signs, the query's pieces, MaxSim and
the move of the fused score; pure."""

from __future__ import annotations

import math
import uuid

import numpy as np
import pytest

from membrane_core.providers.base import Tokens
from membrane_core.providers.deterministic import HashingEmbeddingProvider
from membrane_core.retrieval import late


def test_pack_keeps_one_sign_bit_a_dimension_of_every_piece_but_the_markers() -> None:
    rows = np.array([[1, 1, 1], [0.5, -2, 3], [-1, -1, 4], [9, 9, 9]], dtype=np.float32)
    blob = late.pack(Tokens(("[CLS]", "kite", "red", "[SEP]"), rows))
    assert len(blob) == 2  # two pieces of ceil(3 / 8) = 1 byte
    back = late.unpack(blob, 3)
    assert back.shape == (2, 3)
    assert np.array_equal(np.sign(back), np.array([[1, -1, 1], [-1, -1, 1]], dtype=np.float32))
    assert np.allclose(np.linalg.norm(back, axis=1), 1.0)  # rows at length 1


def test_unpack_refuses_what_is_not_whole_rows() -> None:
    assert late.unpack(b"", 16).shape == (0, 16)
    assert late.unpack(b"\x01\x02\x03", 16).shape == (0, 16)
    assert late.unpack(b"\x01\x02", 16).shape == (1, 16)  # control: one whole row


def test_pack_stops_at_max_tokens() -> None:
    pieces = ("[CLS]", *[f"w{i}" for i in range(late.MAX_TOKENS + 5)], "[SEP]")
    blob = late.pack(Tokens(pieces, np.ones((len(pieces), 8), dtype=np.float32)))
    assert len(blob) == late.MAX_TOKENS


def test_the_query_keeps_its_content_pieces() -> None:
    pieces = ("[CLS]", "what", "did", "ana", "paint", "##ing", "?", "[SEP]")
    rows = np.arange(len(pieces) * 4, dtype=np.float32).reshape(len(pieces), 4) + 1
    q = late.query_matrix(Tokens(pieces, rows))
    assert q.shape == (2, 4)  # "ana" and "paint"
    assert np.allclose(q[0], rows[3] / np.linalg.norm(rows[3]))
    assert np.allclose(np.linalg.norm(q, axis=1), 1.0)
    # all function words: every piece but the markers is kept
    only = late.query_matrix(Tokens(("[CLS]", "what", "is", "[SEP]"), np.ones((4, 4), dtype=np.float32)))
    assert only.shape == (2, 4)


def test_maxsim_averages_each_query_piece_best_match() -> None:
    q = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    record = np.array([[1.0, 0.0], [math.sqrt(0.5), math.sqrt(0.5)]], dtype=np.float32)
    assert late.maxsim(q, record) == pytest.approx((1.0 + math.sqrt(0.5)) / 2)
    assert late.maxsim(q, np.zeros((0, 2), dtype=np.float32)) is None
    assert late.maxsim(np.zeros((0, 2), dtype=np.float32), record) is None


def test_rerank_adds_the_late_z_score_in_the_fused_units() -> None:
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    fused = {a: 3.0, b: 2.0, c: 1.0}  # mean 2, spread sqrt(2/3)
    moved = late.rerank(fused, {a: 0.2, b: 0.8, c: None}, weight=1.0)
    sd = math.sqrt(2 / 3)
    z = {a: 1 / sd, b: 0.0, c: -1 / sd}  # the fused z-scores
    late_z = {a: -1.0, b: 1.0, c: 0.0}  # 0.2 and 0.8 about their mean; no tokens: 0
    for rid in fused:
        assert moved[rid] == pytest.approx(2.0 + sd * (z[rid] + late_z[rid]) / math.sqrt(2))
    assert moved[b] > moved[a] > moved[c]  # b overtook a
    assert late.rerank(fused, {a: 0.5, b: None, c: None}) == fused  # one late score: nothing moves
    assert late.rerank(fused, {a: 0.5, b: 0.5, c: 0.5}) == fused  # no spread: nothing moves


def test_the_hashing_provider_scores_the_share_of_the_query_words() -> None:
    h = HashingEmbeddingProvider(64)
    _, (full, half, none) = h.embed_tokens(["Ana: red kite", "Bo: red balloon", "Cy: blue sea"])
    _, (query,) = h.embed_tokens(["the red kite"])
    q = late.query_matrix(query)
    ids = [uuid.uuid4() for _ in range(3)]
    got = late.scores_of(q, dict(zip(ids, [late.pack(t) for t in (full, half, none)], strict=True)), 64)
    assert got[ids[0]] == pytest.approx(1.0)
    assert got[ids[0]] > got[ids[1]] > got[ids[2]]


def test_the_pool_product_equals_each_record_maxsim() -> None:
    rng = np.random.default_rng(7)
    dim = 20  # rows of three bytes, the last one partly padding
    q = rng.standard_normal((3, dim)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    stored = {
        uuid.uuid4(): late.pack(Tokens(tuple(f"w{i}" for i in range(n)), rng.standard_normal((n, dim))))
        for n in (1, 4, 9)
    }
    stored[uuid.uuid4()] = b"\x01"  # not whole rows: no score
    got = late.scores_of(q, stored, dim)
    for rid, blob in stored.items():
        want = late.maxsim(q, late.unpack(blob, dim))
        assert (got[rid] is None) == (want is None)
        if want is not None:
            assert got[rid] == pytest.approx(want, abs=1e-5)
    assert sum(v is not None for v in got.values()) == 3  # control: three records scored
