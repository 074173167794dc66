"""The store schema: tables exist, FTS secure-delete is on, and every lookup an erasure needs is an
index search (EXPLAIN QUERY PLAN), never a scan of the table."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from memory.demo import build_demo
from memory.ingest import ingest
from memory.items import read_jsonl
from memory.schema import create

FIXTURES = Path(__file__).parents[1] / "fixtures" / "ingest"

TABLES = {
    "store_meta",
    "working_sessions",
    "raw_archive",
    "frames",
    "frame_refs",
    "frame_chunks",
    "kg_entities",
    "kg_relations",
    "kg_entity_frames",
    "ft_corpora",
    "ft_examples",
    "model_lineage",
    "blobs",
    "blob_locations",
    "recall_cache",
    "subprocessors",
    "subprocessor_records",
    "audit_log",
    "audit_vault",
    "audit_checkpoints",
    "audit_merkle",
    "erased_subjects",
    "erased_identities",
    "holds",
    "frames_fts",
    "frame_vectors",
    "chunk_vectors",
}

# (table, WHERE clause) of every lookup the erasure and its probes make.
LOOKUPS = [
    *[
        (t, "subject_id=?")
        for t in (
            "working_sessions",
            "raw_archive",
            "frames",
            "ft_examples",
            "blobs",
            "subprocessor_records",
            "audit_vault",
        )
    ],
    *[
        (t, "source=? AND source_ref=?")
        for t in ("working_sessions", "raw_archive", "ft_examples", "blobs", "subprocessor_records", "erased_subjects")
    ],
    ("frames", "archive_id=?"),
    ("frames", "turn_key=?"),
    ("frames", "frame_id=?"),
    ("frame_refs", "ref_frame_id=?"),
    ("frame_refs", "frame_id=?"),
    ("frame_chunks", "frame_id=?"),
    ("kg_entity_frames", "frame_id=?"),
    ("kg_entity_frames", "entity_id=?"),
    ("recall_cache", "frame_id=?"),
    ("kg_entities", "name=?"),
    ("kg_entities", "kind=? AND name=?"),
    ("kg_relations", "src_entity_id=?"),
    ("kg_relations", "dst_entity_id=?"),
    ("kg_relations", "frame_id=?"),
    ("blob_locations", "blob_key=?"),
    ("ft_examples", "corpus_id=?"),
    ("audit_vault", "seq=?"),
    ("holds", "subject_key=? AND released_at IS NULL"),
    ("erased_identities", "digest IN (?, ?, ?)"),
    ("erased_identities", "erasure_ref=?"),
    ("working_sessions", "session_id=?"),
]


@pytest.fixture(scope="module", params=["fresh", "analyzed-demo"])
def conn(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> apsw.Connection:
    """A store with one ingested item and no statistics, and an ANALYZEd demo store (the planner
    then decides on real row counts)."""
    store = tmp_path_factory.mktemp(request.param) / "store"
    c = create(store)
    if request.param == "analyzed-demo":
        build_demo(c, store, frames=2000, subjects=2, seed=1)
    ingest(c, store, read_jsonl(FIXTURES / "one_item.jsonl"))
    if request.param == "analyzed-demo":
        c.execute("ANALYZE")
    return c


def _plan(conn: apsw.Connection, sql: str) -> list[str]:
    params = tuple(range(sql.count("?")))
    return [str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]


def test_every_table_exists(conn: apsw.Connection) -> None:
    names = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert not TABLES - names, TABLES - names


def test_fts_secure_delete_is_on(conn: apsw.Connection) -> None:
    row = conn.execute("SELECT v FROM frames_fts_config WHERE k='secure-delete'").fetchone()
    assert row is not None and int(row[0]) == 1


@pytest.mark.parametrize(("table", "where"), LOOKUPS, ids=[f"{t}:{w}" for t, w in LOOKUPS])
def test_lookup_uses_an_index(conn: apsw.Connection, table: str, where: str) -> None:
    plan = _plan(conn, f"SELECT * FROM {table} WHERE {where}")
    assert plan, "no plan"
    assert not any(step.startswith(f"SCAN {table}") for step in plan), plan
    assert any(step.startswith(f"SEARCH {table}") for step in plan), plan


@pytest.mark.parametrize(("table", "key"), [("frame_vectors", "frame_id"), ("chunk_vectors", "chunk_id")])
def test_vector_lookup_by_id_is_a_point_query(conn: apsw.Connection, table: str, key: str) -> None:
    # vec0 reports every plan as a virtual-table "SCAN"; its idxStr marks a point lookup by id with '!'.
    # (An `IN (...)` list on the id is NOT a point query in sqlite-vec 0.1.9: delete one id at a time.)
    plan = _plan(conn, f"SELECT {key} FROM {table} WHERE {key}=?")
    assert len(plan) == 1 and "VIRTUAL TABLE INDEX" in plan[0] and "!" in plan[0], plan


def test_fts_lookup_by_rowid_is_a_point_query(conn: apsw.Connection) -> None:
    plan = _plan(conn, "SELECT content FROM frames_fts WHERE rowid=?")
    assert len(plan) == 1 and plan[0].endswith(":="), plan


def test_raw_archive_is_append_only(conn: apsw.Connection) -> None:
    with pytest.raises(apsw.ConstraintError, match="append-only"):
        conn.execute("DELETE FROM raw_archive")
    with pytest.raises(apsw.ConstraintError, match="redacted"):
        conn.execute("UPDATE raw_archive SET content='changed'")


def test_opening_an_existing_store_keeps_its_journal_mode_and_bytes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from erasure.sqlite import journal_mode
    from memory.schema import create

    conn = create(tmp_path / "s", journal_mode="delete")
    conn.close()
    db = tmp_path / "s" / "memory.db"
    before = db.read_bytes()
    again = create(tmp_path / "s")
    assert journal_mode(again) == "delete"
    again.close()
    assert db.read_bytes() == before
