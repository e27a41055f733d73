from __future__ import annotations

import re

import pytest

from membrane_core.retrieval.retriever import WINDOWS, window
from membrane_core.storage import queries


def test_every_query_loads_with_description() -> None:
    loaded = queries.load()
    assert "hydrate_records" in loaded and "copy_records" in loaded
    # each block has SQL after its description (further comment lines may precede it)
    assert all(
        any(line.strip() and not line.lstrip().startswith("--") for line in sql.splitlines())
        for sql in loaded.values()
    )


def test_fragments_are_written_in_once() -> None:
    """RFC 11.1: ``/*@name*/`` is replaced by that block (fragments nest, not endlessly);
    an unknown fragment refuses."""
    loaded = queries.load()
    assert not any("/*@" in sql for sql in loaded.values())
    fields = loaded["record_fields"]
    # positive control: every statement that hydrates carries the shared column list
    for name in ("hydrate_records", "retrieval_roots", "retrieval_bounded_hydrate", "retrieval_graph_hop"):
        assert fields in loaded[name], name
    blocks = {"a": "SELECT /*@b*/", "b": "1", "c": "SELECT /*@nope*/", "d": "/*@b*/ + 2"}
    assert queries._include(blocks, "a") == "SELECT 1"
    assert queries._include({"e": "SELECT /*@d*/", **blocks}, "e") == "SELECT 1 + 2"
    with pytest.raises(ValueError, match="unknown fragment nope"):
        queries._include(blocks, "c")
    with pytest.raises(ValueError, match="nest too deep"):
        queries._include({"loop": "SELECT /*@loop*/"}, "loop")


def test_parser_refuses_missing_description_and_duplicates() -> None:
    assert queries.parse("-- name: a\n-- fine\nSELECT 1;\n", "x") == {"a": "SELECT 1"}
    with pytest.raises(ValueError, match="no one-line description"):
        queries.parse("-- name: a\nSELECT 1;\n", "x")
    with pytest.raises(ValueError, match="defined twice"):
        queries.parse("-- name: a\n-- d\nSELECT 1;\n-- name: a\n-- d\nSELECT 2;\n", "x")


def test_shaped_writes_in_only_nulls_booleans_and_named_integers() -> None:
    """RFC 8.1.5: shape values become literals; every other value stays a bound parameter."""
    params = {
        "all_scopes": False,
        "scopes": ["a'; DROP TABLE x; --"],
        "max_rank": 2,
        "types": None,
        "tags": None,
        "include_retracted": True,
        "include_contested": False,
        "include_proposed": False,
        "min_salience": 0.5,
        "salience_floor": True,
        "now": "2026-01-01T00:00:00Z",
        "as_of": None,
        "valid_at": None,
        "query": "1; select",
        "has_query": True,
        "qvec": None,
        "has_qvec": False,
        "terms": ["x"],
        "id_namespaces": [],
        "id_values": [],
        "arm_k": 50,
        "vec_k": 10,
        "fanout": 25,
        "df_cap": 1000,
        "fts_cap": 5000,
        "tag_cap": 2000,
        "link_scan": 1000,
        "limit": 10,
        "max_bytes": 65536,
        "rrf": False,
        "rrf_k": 60.0,
        "sd_floor_salience": 0.1,
        "semantic_prior": 0.25,
        "when_from": [],
        "when_to": [],
        "when_prior": 2.0,
        "embeddings": "record_embeddings",
        "has_tags": False,
        "hop": False,
        "scoped": True,
        "hop_rows": 0,
        "hop_edges": 0,
        "hop_new": 0,
        "adjacent": False,
        "adjacent_sources": 10,
        "adjacent_reach": 2,
        "adjacent_decay": 0.5,
        "late": True,
        "w_vector": 1.0,
        "w_text": 1.0,
        "w_entity": 1.0,
        "w_salience": 0.25,
    }
    st = queries.shaped("retrieval_roots", params, ints=("max_rank", "vec_k"))
    sql, bound = st.sql, st.bound()
    assert "%(" not in sql and "$1" in sql  # positional: psycopg's RawCursor sends it as is
    assert "NULL::text[] IS NULL" in sql  # types: None written in, the guard folds
    assert "<= 2 + 1" in sql and "LIMIT 10" in sql  # the named integers
    # positive control for what stays bound: strings, floats, timestamps, arrays, free ints
    assert {"scopes", "min_salience", "now", "query", "terms", "arm_k", "fts_cap"} <= set(bound)
    assert f"LIMIT ${st.names.index('arm_k') + 1}" in sql
    assert "DROP TABLE" not in sql and "1; select" not in sql
    # parts (RFC 8.1.5): no expansion, a query and no tag filter leave out the hop, the
    # salience arm's parts and the tagged branch; the other shapes keep them
    assert not {"hop_budget", "sal_groups", "few_tagged", "adj_lift"} & set(re.findall(r"\w+", sql))
    other = queries.shaped(
        "retrieval_roots",
        {**params, "hop": True, "has_query": False, "has_tags": True, "tags": ["t"], "adjacent": True},
    ).sql
    assert {"hop_budget", "sal_groups", "few_tagged", "adj_lift"} <= set(re.findall(r"\w+", other))
    assert not {"all_scopes", "types", "max_rank", "vec_k", "has_qvec"} & set(bound)
    assert max(int(n) for n in re.findall(r"\$(\d+)", sql)) == len(st.names) == len(st.values)
    # a string is never written in, even when named as an integer
    st2 = queries.shaped("retrieval_roots", {**params, "max_rank": "2 OR true"}, ints=("max_rank",))
    assert st2.bound()["max_rank"] == "2 OR true" and "2 OR true" not in st2.sql
    # a relation name is written in only when it is a plain identifier
    st3 = queries.shaped(
        "retrieval_roots", {**params, "embeddings": "record_embeddings_p7"}, relations=("embeddings",)
    )
    assert "FROM record_embeddings_p7 e" in st3.sql and "embeddings" not in st3.names
    for bad in ("x; DROP TABLE y", "Record", "a b", 7):
        with pytest.raises(ValueError, match="not a plain relation name"):
            queries.shaped("retrieval_roots", {**params, "embeddings": bad}, relations=("embeddings",))


def test_parts_are_kept_or_left_out_by_their_written_in_flag() -> None:
    """RFC 8.1.5: a ``/*?flag*/`` part is in the text of the shapes whose flag is written in
    true; the parameters only a left-out part uses are not bound."""
    sql = "SELECT 1/*?hop*/ + %(a)s/*?end*//*?!hop*/ - %(b)s/*?end*/ + %(c)s/*?n*/ * %(d)s/*?end*/"
    queries.load.cache_clear()
    queries._placeholders.cache_clear()
    queries._render.cache_clear()
    loaded = queries.load()
    loaded["t_parts"] = sql  # type: ignore[index]
    try:
        on = queries.shaped(
            "t_parts", {"hop": True, "a": 1.5, "b": 2.5, "c": 3.5, "n": 2, "d": 4.5}, ints=("n",)
        )
        assert on.sql == "SELECT 1 + $1 + $2 * $3" and on.names == ("a", "c", "d")
        off = queries.shaped(
            "t_parts", {"hop": False, "a": 1.5, "b": 2.5, "c": 3.5, "n": 0, "d": 4.5}, ints=("n",)
        )
        assert off.sql == "SELECT 1 - $1 + $2" and off.names == ("b", "c")
        with pytest.raises(ValueError, match="part flag n is not a written-in"):
            queries.shaped("t_parts", {"hop": True, "a": 1, "b": 2, "c": 3, "n": 2, "d": 4})
    finally:
        queries.load.cache_clear()
        queries._placeholders.cache_clear()
        queries._render.cache_clear()
    for bad in (
        "SELECT /*?a*/ 1",
        "SELECT 1 /*?end*/",
        "SELECT /*?a*/ /*?b*/ 1 /*?end*/ /*?end*/",
        "SELECT /*?end*/ 1 /*?end*/",
        "SELECT /*? a */ 1 /*?end*/",
    ):
        with pytest.raises(ValueError, match="unclosed, nested or misspelt"):
            queries._check_parts("t", bad)
    queries._check_parts("t", "SELECT /*?a*/ 1 /*?end*/ + /*?!a*/ 2 /*?end*/")
    # positive control on the real statement: the hop and the salience arm are parts
    roots = queries.load()["retrieval_roots"]
    assert "/*?hop*/" in roots and "/*?!has_query*/" in roots and "/*?has_tags*/" in roots


def test_windows_take_few_values() -> None:
    """RFC 8.1.5: a window is the next one up of six values, capped at the largest."""
    assert [window(n) for n in (1, 10, 11, 40, 50, 51, 399, 400, 5000)] == [
        10,
        10,
        25,
        50,
        50,
        100,
        400,
        400,
        400,
    ]
    assert {window(n) for n in range(1, 2000)} == set(WINDOWS)


def test_json_columns_decode_utf8_without_sniffing() -> None:
    from membrane_core.storage.db import _loads

    text = '{"name": "Zoë", "n": [1, 2.5, null], "s": "\\u00e9"}'
    assert _loads(text.encode()) == _loads(text) == {"name": "Zoë", "n": [1, 2.5, None], "s": "é"}
