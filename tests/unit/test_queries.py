from __future__ import annotations

import pytest

from membrane_core.storage import queries


def test_every_query_loads_with_description() -> None:
    loaded = queries.load()
    assert "hydrate_records" in loaded and "copy_records" in loaded
    # each block has SQL after its description (further comment lines may precede it)
    assert all(any(line.strip() and not line.lstrip().startswith("--")
                   for line in sql.splitlines()) for sql in loaded.values())


def test_parser_refuses_missing_description_and_duplicates() -> None:
    assert queries.parse("-- name: a\n-- fine\nSELECT 1;\n", "x") == {"a": "SELECT 1"}
    with pytest.raises(ValueError, match="no one-line description"):
        queries.parse("-- name: a\nSELECT 1;\n", "x")
    with pytest.raises(ValueError, match="defined twice"):
        queries.parse("-- name: a\n-- d\nSELECT 1;\n-- name: a\n-- d\nSELECT 2;\n", "x")
