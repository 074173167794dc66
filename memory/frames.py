"""Delete primitives for frames and everything projected from them.

One piece of code per table group, used by the cascade's tier steps AND by maintenance (`compact`):
reference 000's leaks came from maintenance paths that deleted frames their own way and left chunk
vectors, FTS rows and cache rows behind. Each function runs inside the caller's transaction and
returns how many rows it removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import apsw

_CHUNK = 500  # bound on the number of SQL variables in one IN (...)


def _batches(ids: Iterable[int], size: int = _CHUNK) -> Iterable[list[int]]:
    batch: list[int] = []
    for i in ids:
        batch.append(int(i))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _in(n: int) -> str:
    return ",".join("?" * n)


def chunk_ids_of(conn: apsw.Connection, frame_ids: Iterable[int]) -> list[int]:
    """Chunk ids of the given frames (read these BEFORE deleting the frames: chunks cascade away)."""
    out: list[int] = []
    for b in _batches(frame_ids):
        sql = f"SELECT chunk_id FROM frame_chunks WHERE frame_id IN ({_in(len(b))})"
        out += [r[0] for r in conn.execute(sql, b)]
    return out


def delete_frame_rows(conn: apsw.Connection, frame_ids: Iterable[int]) -> int:
    """Delete frames; chunks, frame_refs and entity links go by FK cascade. Vectors, FTS rows and cache
    rows are NOT reached by the cascade: delete them with the functions below (or `purge_frames`)."""
    n = 0
    for b in _batches(frame_ids):
        conn.execute(f"DELETE FROM frames WHERE frame_id IN ({_in(len(b))})", b)
        n += conn.changes()
    return n


def _point_deletes(conn: apsw.Connection, table: str, column: str, ids: Iterable[int]) -> int:
    # vec0 answers `column = ?` with a point lookup, but hands an IN (...) list to a full scan of the
    # table (EXPLAIN QUERY PLAN: "INDEX 0:1"): one statement per id keeps a delete independent of size.
    # Counted per statement: vec0's own writes to its shadow tables show in total_changes().
    sql = f"DELETE FROM {table} WHERE {column} = ?"
    n = 0
    for i in ids:
        conn.execute(sql, (int(i),))
        n += conn.changes()
    return n


def delete_frame_vectors(conn: apsw.Connection, frame_ids: Iterable[int]) -> int:
    """Frame vectors by frame id (point deletes on the vec0 key)."""
    return _point_deletes(conn, "frame_vectors", "frame_id", frame_ids)


def delete_chunk_vectors(conn: apsw.Connection, chunk_ids: Iterable[int]) -> int:
    """Chunk vectors by chunk id (point deletes on the vec0 key)."""
    return _point_deletes(conn, "chunk_vectors", "chunk_id", chunk_ids)


def delete_fts_rows(conn: apsw.Connection, frame_ids: Iterable[int]) -> int:
    """FTS rows by rowid (= frame_id). With FTS5 secure-delete on, the terms leave the index."""
    n = 0
    for b in _batches(frame_ids):
        conn.execute(f"DELETE FROM frames_fts WHERE rowid IN ({_in(len(b))})", b)
        n += conn.changes()
    return n


def delete_cache_rows(conn: apsw.Connection, frame_ids: Iterable[int]) -> int:
    n = 0
    for b in _batches(frame_ids):
        conn.execute(f"DELETE FROM recall_cache WHERE frame_id IN ({_in(len(b))})", b)
        n += conn.changes()
    return n


def purge_frames(conn: apsw.Connection, frame_ids: Sequence[int]) -> dict[str, int]:
    """Delete frames and every projection of them: chunk vectors, frame vectors, FTS rows, recall
    cache rows, then the frames (chunks, refs and entity links by cascade). The complete delete that
    maintenance must use."""
    ids = list(frame_ids)
    chunks = chunk_ids_of(conn, ids)
    return {
        "chunk_vectors": delete_chunk_vectors(conn, chunks),
        "frame_vectors": delete_frame_vectors(conn, ids),
        "fts_rows": delete_fts_rows(conn, ids),
        "cache_rows": delete_cache_rows(conn, ids),
        "chunks": len(chunks),
        "frames": delete_frame_rows(conn, ids),
    }
