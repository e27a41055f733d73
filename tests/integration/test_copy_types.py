"""RFC 3.3: the binary COPYs a write batch makes name each column's type as the catalog has it."""

from __future__ import annotations

import re

import psycopg

from membrane_core.storage.queries import q
from membrane_core.storage.rowbatch import COPY_TYPES

_COPY = re.compile(r"COPY\s+(\w+)\s*\(([^)]*)\)\s+FROM STDIN \(FORMAT BINARY\)", re.S)


def test_each_binary_copy_names_its_columns_types(database_url: str) -> None:
    # every COPY a write batch and the inbox make, so that none is left out of the check
    assert set(COPY_TYPES) == {
        "copy_records",
        "copy_payloads",
        "copy_tags",
        "copy_provenance",
        "copy_relations",
        "copy_audit",
        "copy_work_items",
        "copy_entity_terms",
        "op_copy",
    }
    with psycopg.connect(database_url) as conn:
        for name, types in COPY_TYPES.items():
            match = _COPY.search(q(name))
            assert match, f"{name} is not a binary COPY"
            table, columns = match[1], [c.strip() for c in match[2].split(",")]
            catalog = dict(
                conn.execute(
                    "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
                    " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
                    [table],
                ).fetchall()
            )
            expected = tuple(
                {"timestamp with time zone": "timestamptz"}.get(catalog[c], catalog[c]) for c in columns
            )
            assert types == expected, name
