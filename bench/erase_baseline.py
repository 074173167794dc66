"""The baseline of `bench/erase.py`: the raw-SQL erasure an expert writes by hand for the reference
store's schema (temp tables of the subject's frame, chunk and entity ids, set-based deletes per table,
point deletes on the vec0 and FTS tables, the blob and session files unlinked, the corpus files
filtered in place, one WAL checkpoint at the end), each part timed."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import apsw

from erasure.config import Home
from erasure.sqlite import checkpoint_truncate, connect, transaction
from erasure.subject import Subject


def fts_phrase(text: str) -> str:
    """An FTS5 phrase query for `text` (the raw-SQL baseline's own quoting)."""
    return '"' + text.replace('"', '""') + '"'


def _ids(conn: apsw.Connection, sql: str, params: Any = ()) -> list[Any]:
    return [r[0] for r in conn.execute(sql, params)]


def _ref(line: str) -> tuple[str, str]:
    item = json.loads(line)
    return str(item.get("source")), str(item.get("source_ref"))


def _checkpoint(conn: apsw.Connection) -> None:
    checkpoint_truncate(conn)


def _vacuum(conn: apsw.Connection) -> None:
    conn.execute("VACUUM")
    checkpoint_truncate(conn)


def _timed(out: dict[str, float], name: str, fn: Callable[[], None]) -> None:
    t = time.perf_counter()
    fn()
    out[name] = out.get(name, 0.0) + time.perf_counter() - t


def baseline(home: Home, subject: Subject) -> dict[str, float]:
    """The hand-written raw-SQL erasure of `subject` (see the module docstring); seconds per part."""
    conn = connect(home.store_db)
    store = home.store_dir
    s = subject.id
    out: dict[str, float] = {}
    x = conn.execute

    def resolve() -> None:
        x("CREATE TEMP TABLE src(source TEXT, source_ref TEXT, PRIMARY KEY (source, source_ref)) WITHOUT ROWID")
        for table in ("raw_archive", "working_sessions", "blobs", "ft_examples", "subprocessor_records"):
            x(f"INSERT OR IGNORE INTO temp.src SELECT source, source_ref FROM {table} WHERE subject_id = ?", (s,))
        x("CREATE TEMP TABLE f(id INTEGER PRIMARY KEY)")
        x("INSERT OR IGNORE INTO temp.f SELECT frame_id FROM frames WHERE subject_id = ?", (s,))
        x(
            "INSERT OR IGNORE INTO temp.f SELECT fr.frame_id FROM raw_archive a JOIN frames fr "
            "ON fr.archive_id = a.archive_id WHERE a.subject_id = ?",
            (s,),
        )
        x(
            "INSERT OR IGNORE INTO temp.f SELECT fr.frame_id FROM temp.src JOIN frames fr "
            "ON fr.turn_key = src.source || '/' || src.source_ref"
        )
        for ident in subject.identifiers():
            x(
                "INSERT OR IGNORE INTO temp.f SELECT fr.frame_id FROM frames_fts JOIN frames fr "
                "ON fr.frame_id = frames_fts.rowid WHERE frames_fts MATCH ? AND fr.kind = 'derived'",
                (fts_phrase(ident),),
            )
        x(
            "INSERT OR IGNORE INTO temp.f WITH RECURSIVE d(id) AS (SELECT id FROM temp.f UNION "
            "SELECT r.frame_id FROM frame_refs r JOIN d ON r.ref_frame_id = d.id) SELECT id FROM d"
        )
        x("CREATE TEMP TABLE c(id INTEGER PRIMARY KEY)")
        x("INSERT INTO temp.c SELECT chunk_id FROM frame_chunks WHERE frame_id IN (SELECT id FROM temp.f)")
        x("CREATE TEMP TABLE e(id INTEGER PRIMARY KEY)")
        for ident in subject.identifiers():
            x(
                "INSERT OR IGNORE INTO temp.e SELECT entity_id FROM kg_entities WHERE name = ? "
                "AND kind IN ('person', 'email', 'phone')",
                (ident,),
            )
        x("CREATE TEMP TABLE cand(id INTEGER PRIMARY KEY)")
        x(
            "INSERT OR IGNORE INTO temp.cand SELECT entity_id FROM kg_entity_frames "
            "WHERE frame_id IN (SELECT id FROM temp.f)"
        )

    def working() -> None:
        sessions = _ids(
            conn,
            "SELECT session_id FROM working_sessions WHERE subject_id = ? UNION "
            "SELECT w.session_id FROM temp.src JOIN working_sessions w "
            "ON w.source = src.source AND w.source_ref = src.source_ref",
            (s,),
        )
        with transaction(conn):
            for sid in sessions:
                (store / "sessions" / f"{sid}.json").unlink(missing_ok=True)
                x("DELETE FROM working_sessions WHERE session_id = ?", (sid,))

    def episodic() -> None:
        with transaction(conn):
            x("DELETE FROM frames WHERE frame_id IN (SELECT id FROM temp.f)")  # chunks, refs, links cascade
            x(
                "UPDATE raw_archive SET content = NULL, subject_id = NULL, archive_uid = hex(randomblob(16)), "
                "erased_at = ?, erasure_ref = 'bench' WHERE archive_id IN (SELECT archive_id FROM raw_archive "
                "WHERE subject_id = ? UNION SELECT a.archive_id FROM temp.src JOIN raw_archive a "
                "ON a.source = src.source AND a.source_ref = src.source_ref WHERE a.erased_at IS NULL)",
                (datetime.now(UTC).isoformat(), s),
            )

    def semantic() -> None:
        with transaction(conn):
            x(
                "INSERT OR IGNORE INTO temp.e SELECT id FROM temp.cand WHERE NOT EXISTS "
                "(SELECT 1 FROM kg_entity_frames l WHERE l.entity_id = cand.id)"
            )
            x(
                "DELETE FROM kg_relations WHERE frame_id IN (SELECT id FROM temp.f) "
                "OR src_entity_id IN (SELECT id FROM temp.e) OR dst_entity_id IN (SELECT id FROM temp.e)"
            )
            x("DELETE FROM kg_entity_frames WHERE entity_id IN (SELECT id FROM temp.e)")
            x("DELETE FROM kg_entities WHERE entity_id IN (SELECT id FROM temp.e)")

    def vectors() -> None:
        with transaction(conn):  # vec0 answers point deletes on its key; an IN list would scan
            chunks, frames = _ids(conn, "SELECT id FROM temp.c"), _ids(conn, "SELECT id FROM temp.f")
            conn.executemany("DELETE FROM chunk_vectors WHERE chunk_id = ?", [(i,) for i in chunks])
            conn.executemany("DELETE FROM frame_vectors WHERE frame_id = ?", [(i,) for i in frames])

    def fine_tune() -> None:
        refs = {(str(a), str(b)) for a, b in conn.execute("SELECT source, source_ref FROM temp.src")}
        paths = [
            store / str(p)
            for p in _ids(
                conn,
                "SELECT DISTINCT c.path FROM ft_examples x JOIN ft_corpora c "
                "ON c.corpus_id = x.corpus_id WHERE x.subject_id = ?",
                (s,),
            )
        ]
        for path in paths:
            if path.exists():
                kept = [
                    ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and _ref(ln) not in refs
                ]
                path.write_text("".join(k + "\n" for k in kept), encoding="utf-8")
        with transaction(conn):
            x("DELETE FROM ft_examples WHERE subject_id = ?", (s,))

    def uploads() -> None:
        keys = _ids(conn, "SELECT blob_key FROM blobs WHERE subject_id = ?", (s,))
        with transaction(conn):
            for key in keys:
                for loc in _ids(conn, "SELECT location FROM blob_locations WHERE blob_key = ?", (key,)):
                    (store / str(loc) / key[:2] / key).unlink(missing_ok=True)
                x("DELETE FROM blobs WHERE blob_key = ?", (key,))

    def derivatives() -> None:
        with transaction(conn):
            frames = _ids(conn, "SELECT id FROM temp.f")
            conn.executemany("DELETE FROM frames_fts WHERE rowid = ?", [(i,) for i in frames])
            x("DELETE FROM recall_cache WHERE frame_id IN (SELECT id FROM temp.f)")

    def subprocessor_records() -> None:
        with transaction(conn):
            x("DELETE FROM subprocessor_records WHERE subject_id = ?", (s,))

    def audit_log() -> None:
        with transaction(conn):
            x("DELETE FROM audit_vault WHERE subject_id = ?", (s,))

    try:
        parts: list[tuple[str, Callable[[], None]]] = [
            ("prepare", resolve),
            ("working", working),
            ("episodic", episodic),
            ("semantic", semantic),
            ("vectors", vectors),
            ("fine_tune", fine_tune),
            ("uploads", uploads),
            ("derivatives", derivatives),
            ("subprocessors", subprocessor_records),
            ("audit_log", audit_log),
            ("checkpoint", lambda: _checkpoint(conn)),
            ("scrub", lambda: _vacuum(conn)),
        ]
        for name, fn in parts:
            _timed(out, name, fn)
    finally:
        conn.close()
    return out
