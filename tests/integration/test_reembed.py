"""Embedding again (RFC 12.5): the records whose stored vector the configured provider would
write differently get an embed item, and only those; the embedding job then rewrites them."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from membrane_core import Membrane, Settings
from membrane_core.providers.deterministic import HashingEmbeddingProvider
from membrane_core.storage.db import Database
from membrane_core.testing import FakeClock
from membrane_core.trust import DEVELOPMENT_POLICY
from tests.support.services import EMBEDDING_DIM


def hashing(settings: Settings, db: Database, clock: FakeClock, *, tokens: bool) -> Membrane:
    m = Membrane(settings.model_copy(update={"embedding_provider": "hashing"}), database=db, clock=clock)
    provider = m.embedding.provider
    assert isinstance(provider, HashingEmbeddingProvider)
    provider.tokens = tokens
    return m


def turn(m: Membrane, clock: FakeClock, text: str, scope: str = "s") -> uuid.UUID:
    clock.advance(seconds=60)
    body = {"source_kind": "event", "scope": scope, "content": {"text": text}}
    return m.capture(body, DEVELOPMENT_POLICY).record_ids[0]


def stored(db: Database) -> dict[uuid.UUID, tuple[str, bool]]:
    """Each embedded record's model and whether it has token signs."""
    with db.transaction() as conn:
        rows = conn.execute(
            "SELECT record_id, model, token_signs IS NOT NULL FROM record_embeddings"
        ).fetchall()
    return {r: (model, has) for r, model, has in rows}


def pending(db: Database) -> set[uuid.UUID]:
    with db.transaction() as conn:
        rows = conn.execute("SELECT target_id FROM work_items WHERE kind = 'embed' AND NOT dead").fetchall()
    return {r for (r,) in rows}


def drain(m: Membrane) -> None:
    while m.embedding.run_batch()["claimed"]:
        pass


def test_only_vectors_of_another_model_or_without_signs_are_embedded_again(
    settings: Settings, db: Database, clock: FakeClock
) -> None:
    plain = hashing(settings, db, clock, tokens=False)
    old, unsigned = turn(plain, clock, "the old model's turn"), turn(plain, clock, "a turn before signs")
    drain(plain)
    with db.transaction() as conn:
        conn.execute("UPDATE record_embeddings SET model = 'http:retired-model' WHERE record_id = %s", (old,))
    m = hashing(settings, db, clock, tokens=True)
    current = turn(m, clock, "a turn of the current model")
    drain(m)
    before = stored(db)
    assert before[current] == (before[unsigned][0], True) and before[unsigned][1] is False
    assert m.embedding.progress() == {
        "without_vector": 0,
        "other_model": 1,
        "without_signs": 2,  # the old model's turn has none either
        "out_of_line": 0,
        "pending": 0,
        "dead": 0,
    }

    assert m.embedding.enqueue_stale(chunk=2) == 2  # chunks of two: the cursor crosses them
    assert pending(db) == {old, unsigned}  # and not the current one
    drain(m)
    after = stored(db)
    assert after[old] == after[unsigned] == after[current] == before[current]
    assert m.embedding.progress()["other_model"] == m.embedding.progress()["without_signs"] == 0
    assert m.embedding.enqueue_stale() == 0  # nothing left to change


def test_all_and_scopes_choose_what_is_embedded_again(
    settings: Settings, db: Database, clock: FakeClock
) -> None:
    m = hashing(settings, db, clock, tokens=True)
    a, b = turn(m, clock, "in scope a", scope="a"), turn(m, clock, "in scope b", scope="b")
    drain(m)
    assert m.embedding.enqueue_stale() == 0
    assert m.embedding.enqueue_stale(every=True, scopes=["a"]) == 1
    assert pending(db) == {a}
    assert m.embedding.enqueue_stale(every=True) == 2
    assert pending(db) == {a, b}


def test_a_record_without_a_vector_is_queued_and_a_buried_item_revived(
    settings: Settings, db: Database, clock: FakeClock
) -> None:
    m = hashing(settings, db, clock, tokens=True)
    lost, kept = turn(m, clock, "its item was buried"), turn(m, clock, "embedded")
    with db.transaction() as conn:
        conn.execute("UPDATE work_items SET dead = true WHERE kind = 'embed' AND target_id = %s", (lost,))
    drain(m)
    assert set(stored(db)) == {kept}
    assert m.embedding.progress()["without_vector"] == 1 and m.embedding.progress()["dead"] == 1
    assert m.embedding.enqueue_stale() == 1
    assert pending(db) == {lost}
    drain(m)
    assert set(stored(db)) == {kept, lost}


def test_a_vector_laid_out_of_the_row_is_embedded_again_into_it(
    settings: Settings, db: Database, clock: FakeClock
) -> None:
    """RFC 12.5, 8.2.3: a vector the toaster moved out of line before migration 0014 (made
    here with the old storage, a small TOAST target and a row over the 2 KB threshold: the
    tests' 32 dimensions are too few to pass it) is rewritten in the row."""
    m = hashing(settings, db, clock, tokens=True)
    old = turn(m, clock, "laid out before the migration")
    drain(m)
    parts = [f"record_embeddings_p{i}" for i in range(16)]
    with db.transaction() as conn:
        conn.execute("ALTER TABLE record_embeddings ALTER COLUMN embedding SET STORAGE EXTERNAL")
        for part in parts:
            conn.execute(f"ALTER TABLE {part} SET (toast_tuple_target = 128)")
        conn.execute(
            "UPDATE record_embeddings SET embedding = embedding::text::vector,"
            " token_signs = (SELECT decode(string_agg(md5(i::text), ''), 'hex')"
            " FROM generate_series(1, 200) i)"
            " WHERE record_id = %s",
            (old,),
        )
        conn.execute("ALTER TABLE record_embeddings ALTER COLUMN embedding SET STORAGE MAIN")
        for part in parts:
            conn.execute(f"ALTER TABLE {part} RESET (toast_tuple_target)")
    new = turn(m, clock, "laid out after it")
    drain(m)

    def outside() -> dict[uuid.UUID, bool]:
        with db.transaction() as conn:
            rows = conn.execute(
                "SELECT record_id, pg_column_toast_chunk_id(embedding) IS NOT NULL FROM record_embeddings"
            ).fetchall()
        return dict(rows)

    assert outside() == {old: True, new: False}
    assert m.embedding.progress()["out_of_line"] == 1
    assert m.embedding.enqueue_stale() == 1 and pending(db) == {old}
    drain(m)
    assert outside() == {old: False, new: False}
    assert m.embedding.progress()["out_of_line"] == 0


def test_the_command_embeds_inline_and_refuses_without_a_provider(
    settings: Settings, db: Database, clock: FakeClock, database_url: str, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from membrane_cli.main import app

    m = hashing(settings, db, clock, tokens=False)
    rid = turn(m, clock, "embedded before signs were kept")
    drain(m)
    env: dict[str, Any] = {
        "MEMBRANE_DATABASE_URL": database_url,
        "MEMBRANE_EMBEDDING_DIM": str(EMBEDDING_DIM),
        "MEMBRANE_DATA_DIR": str(tmp_path),
        "MEMBRANE_EMBEDDING_PROVIDER": "none",
    }
    runner = CliRunner()
    out = runner.invoke(app, ["reembed", "--inline"], env=env)
    assert out.exit_code == 2 and "no embedding provider" in out.output
    env["MEMBRANE_EMBEDDING_PROVIDER"] = "hashing"
    with db.transaction() as conn:
        conn.execute("UPDATE record_embeddings SET model = 'http:retired-model'")
    out = runner.invoke(app, ["reembed", "--inline"], env=env)
    assert out.exit_code == 0, out.output
    assert "1 records to embed with hashing:" in out.output and "embed items pending 0" in out.output
    assert stored(db)[rid][0].startswith("hashing:")
