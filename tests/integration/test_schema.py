from __future__ import annotations

import dataclasses
import uuid

import psycopg
import pytest

from membrane_core.storage import migrate
from tests.support import services
from tests.support.services import EMBEDDING_DIM

CATALOG = """
SELECT 'column', table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable
       || ' ' || coalesce(column_default, '') || ' ' || coalesce(generation_expression, '')
  FROM information_schema.columns WHERE table_schema = 'public'
UNION ALL
SELECT 'storage', a.attrelid::regclass || '.' || a.attname || ' ' || a.attstorage::text
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
 WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
   AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'index', indexdef FROM pg_indexes WHERE schemaname = 'public'
UNION ALL
SELECT 'constraint', conrelid::regclass || ' ' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = 'public'::regnamespace
UNION ALL
SELECT 'trigger', tgrelid::regclass || ' ' || pg_get_triggerdef(oid)
  FROM pg_trigger WHERE NOT tgisinternal
UNION ALL
SELECT 'function', p.proname || ' ' || pg_get_functiondef(p.oid)
  FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
   AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
ORDER BY 1, 2
"""


def catalog(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return [(a, b) for a, b in conn.execute(CATALOG).fetchall()]


def test_migrations_equal_schema(pg_admin_url: str) -> None:
    name = f"s_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = services.with_database(pg_admin_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(migrate.schema_sql(EMBEDDING_DIM))
    with services.fresh_database(pg_admin_url) as migrated:
        from_schema, from_migrations = catalog(url), catalog(migrated)
    assert len(from_schema) > 50  # positive control: the catalog query sees the schema
    assert from_schema == from_migrations


def test_migrate_is_idempotent(database_url: str) -> None:
    assert migrate.migrate(database_url, EMBEDDING_DIM) == []


def test_enum_checks_reject_bad_values(database_url: str) -> None:
    with psycopg.connect(database_url) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO work_items (kind, target_id) VALUES ('nope', gen_random_uuid())")


def test_audit_log_is_append_only_and_has_no_foreign_key(database_url: str) -> None:
    rid = uuid.uuid4()
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO audit_log (record_id, scope, sensitivity, action, actor, rationale)"
            " VALUES (%s, 's', 'low', 'create', 'me', 'why')",
            (rid,),
        )
        row = conn.execute("SELECT hash FROM audit_log WHERE record_id = %s", (rid,)).fetchone()
        assert row is not None and len(row[0]) == 32
        for stmt in ("UPDATE audit_log SET actor = 'x'", "DELETE FROM audit_log", "TRUNCATE audit_log"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                conn.execute(stmt)
        assert conn.execute("SELECT count(*) FROM audit_log").fetchone() == (1,)


def test_a_process_that_does_not_migrate_refuses_a_schema_behind(pg_admin_url: str, tmp_path) -> None:
    """RFC 11.1: a worker's Membrane checks the schema, naming the remedy; the library migrates."""
    from membrane_core import Membrane, Settings, errors

    name = f"w_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = services.with_database(pg_admin_url, name)
    settings = Settings(database_url=url, data_dir=tmp_path, embedding_dim=EMBEDDING_DIM)
    with pytest.raises(errors.Unavailable, match="membrane migrate"):
        Membrane(settings, run_migrations=False)
    assert migrate.pending(url) == [v for v, _, _ in migrate.migrations()]  # nothing was applied
    with Membrane(settings) as m:  # an entry point migrates first
        assert m.retrieve({"query": "x", "scopes": ["s"]}).records == []
    assert migrate.pending(url) == []
    Membrane(settings, run_migrations=False).close()  # positive control: now it starts


def test_an_entry_admits_only_an_erasure_blanking_its_content(database_url: str) -> None:
    """RFC 5.5, 15.4: the one update the audit log takes blanks rationale and details, once, and
    names an erasure; the chain over the content digest still verifies."""
    from membrane_core.revision import history
    from membrane_core.storage import audit

    rid, erasure = uuid.uuid4(), uuid.uuid4()
    with psycopg.connect(database_url, autocommit=True) as conn:
        for why in ("first", "second"):
            conn.execute(
                "INSERT INTO audit_log (record_id, scope, sensitivity, action, actor, rationale, details)"
                " VALUES (%s, 's', 'low', 'create', 'me', %s, '{\"text\": \"canary\"}')",
                (rid, why),
            )
        conn.execute(
            "INSERT INTO erasures (id, actor, reason, target_kind, target_digest, counts)"
            " VALUES (%s, 'ops', 'asked', 'records', '\\x00', '{}')",
            (erasure,),
        )
        first = "(SELECT min(id) FROM audit_log WHERE record_id = %s)"
        refused = [
            # no erasure named, something else changed, a blank that keeps text
            f"UPDATE audit_log SET rationale = '', details = '{{}}' WHERE id = {first}",
            "UPDATE audit_log SET rationale = '', details = '{}', erased_by = %s, actor = 'x'"
            f" WHERE id = {first}",
            f"UPDATE audit_log SET rationale = 'other', details = '{{}}', erased_by = %s WHERE id = {first}",
        ]
        for n, stmt in enumerate(refused):
            params = (rid,) if n == 0 else (erasure, rid)
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                conn.execute(stmt, params)
        conn.execute(
            f"UPDATE audit_log SET rationale = '', details = '{{}}', erased_by = %s WHERE id = {first}",
            (erasure, rid),
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):  # only once
            conn.execute(
                f"UPDATE audit_log SET rationale = '', details = '{{}}', erased_by = %s WHERE id = {first}",
                (erasure, rid),
            )
        rows = audit.entries(conn, rid)
    assert [(r.rationale, r.erased_by) for r in rows] == [("", erasure), ("second", None)]
    assert history.verify_chain(rows) is True
    # the erased entry verifies by its digest; the intact one by its content (a changed copy fails)
    assert history.broken_link([rows[0], dataclasses.replace(rows[1], rationale="forged")]) == 1
    assert history.broken_link([dataclasses.replace(rows[0], content_digest=b"\0" * 32), rows[1]]) == 0


def test_the_erasable_audit_migration_chains_existing_entries_again(pg_admin_url: str) -> None:
    """RFC 5.5: entries written under the earlier formula get their content digest and a chain
    that verifies under the new one, in append order per record."""
    from membrane_core.revision import history
    from membrane_core.storage import audit

    name = f"m_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = services.with_database(pg_admin_url, name)
    a, b = uuid.uuid4(), uuid.uuid4()
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for version, mname, text in migrate.migrations():
                if version >= 17:
                    break
                conn.execute(migrate.render(text, EMBEDDING_DIM))
                conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, mname)
                )
            for rid, why in ((a, "one"), (b, "other"), (a, "two"), (a, "three")):
                conn.execute(
                    "INSERT INTO audit_log (record_id, scope, sensitivity, action, actor, rationale)"
                    " VALUES (%s, 's', 'low', 'create', 'me', %s)",
                    (rid, why),
                )
        assert migrate.migrate(url, EMBEDDING_DIM) == [v for v, _, _ in migrate.migrations() if v >= 17]
        with psycopg.connect(url) as conn:
            chains = {rid: audit.entries(conn, rid) for rid in (a, b)}
        assert [r.rationale for r in chains[a]] == ["one", "two", "three"]
        assert all(history.verify_chain(rows) for rows in chains.values())
        assert chains[a][0].prev_hash is None and chains[a][1].prev_hash == chains[a][0].hash
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
