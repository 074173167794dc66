"""Rewriting one item's text in place, with every projection of it: what redacting a *mention* needs.

A mention is the subject named inside another person's item. The item stays (it is the other
person's); the subject's identifiers leave it. A frame's text lives in five places (the frame, its
chunks, its FTS row, its frame vector, its chunk vectors), so a rewrite replaces all five in the
caller's transaction; chunks get fresh ids (ids are never reused) and vectors are re-embedded from
the new text. Archive rows and session rows/files are rewritten as they are.
"""

from __future__ import annotations

from pathlib import Path

import apsw

from memory.embedder import Embedder, HashingEmbedder, to_blob
from memory.frames import chunk_ids_of, delete_chunk_vectors
from memory.ingest_text import chunk_text
from memory.row_ids import IdAllocator
from memory.sessions import stored_session_path, write_session


def rewrite_frame(conn: apsw.Connection, frame_id: int, content: str, *, embedder: Embedder | None = None) -> int:
    """Replace a frame's text, its chunks (new ids), FTS row and vectors. Returns chunks written."""
    emb = embedder or HashingEmbedder()
    old_chunks = chunk_ids_of(conn, [frame_id])
    delete_chunk_vectors(conn, old_chunks)
    conn.execute("DELETE FROM frame_chunks WHERE frame_id = ?", (frame_id,))
    conn.execute("UPDATE frames SET content = ? WHERE frame_id = ?", (content, frame_id))
    conn.execute("DELETE FROM frames_fts WHERE rowid = ?", (frame_id,))
    conn.execute("INSERT INTO frames_fts(rowid, content) VALUES (?, ?)", (frame_id, content))
    parts = chunk_text(content)
    ids = IdAllocator(conn)
    first = ids.take("frame_chunks", len(parts))
    ids.save(conn)
    vectors = emb.embed([content, *parts])
    conn.execute("DELETE FROM frame_vectors WHERE frame_id = ?", (frame_id,))
    conn.execute("INSERT INTO frame_vectors(frame_id, embedding) VALUES (?, ?)", (frame_id, to_blob(vectors[0])))
    for seq, part in enumerate(parts):
        conn.execute(
            "INSERT INTO frame_chunks(chunk_id, frame_id, seq, content) VALUES (?, ?, ?, ?)",
            (first + seq, frame_id, seq, part),
        )
        conn.execute(
            "INSERT INTO chunk_vectors(chunk_id, embedding) VALUES (?, ?)", (first + seq, to_blob(vectors[seq + 1]))
        )
    return len(parts)


def rewrite_archive(conn: apsw.Connection, archive_id: int, content: str) -> None:
    """Replace a live archive row's content with its mention-redacted text (the append-only trigger
    allows this one change: the new text must carry the `[redacted]` mark)."""
    conn.execute("UPDATE raw_archive SET content = ? WHERE archive_id = ? AND erased_at IS NULL", (content, archive_id))


def rewrite_session(conn: apsw.Connection, store_dir: Path, session_id: str, state: str) -> None:
    """Replace a session's state in its row and its file (the file only where it exists)."""
    path = stored_session_path(store_dir, session_id)
    conn.execute("UPDATE working_sessions SET state = ? WHERE session_id = ?", (state, session_id))
    if path.exists():
        write_session(store_dir, session_id, state, path=path)
