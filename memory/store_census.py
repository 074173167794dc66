"""What a store holds, for comparing and reporting: the row count of every store table, and a digest of
its content (every table and file, minus secrets, salts and what derives from them)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import apsw

COUNTED_TABLES = (
    "raw_archive",
    "frames",
    "frame_refs",
    "frame_chunks",
    "frames_fts",
    "frame_vectors",
    "chunk_vectors",
    "kg_entities",
    "kg_relations",
    "kg_entity_frames",
    "working_sessions",
    "blobs",
    "blob_locations",
    "ft_corpora",
    "ft_examples",
    "model_lineage",
    "recall_cache",
    "subprocessors",
    "subprocessor_records",
    "audit_log",
    "audit_vault",
    "erased_subjects",
    "holds",
)


def table_counts(conn: apsw.Connection) -> dict[str, int]:
    """Row count of every store table."""
    out: dict[str, int] = {}
    for t in COUNTED_TABLES:
        row = conn.execute(f"SELECT count(*) FROM {t}").fetchone()
        out[t] = int(row[0]) if row else 0
    return out


# Columns hashed by `content_digest`: everything except secrets, salts and what derives from them.
_DIGEST_SQL = (
    "SELECT key, value FROM store_meta WHERE key NOT IN ('subject_key_secret') ORDER BY key",
    "SELECT archive_id, archive_uid, source, source_ref, subject_id, content, created_at, erased_at, erasure_ref"
    " FROM raw_archive ORDER BY archive_id",  # not item_key: keyed by the secret
    "SELECT frame_id, kind, subject_id, archive_id, turn_key, turn_seq, content, created_at"
    " FROM frames ORDER BY frame_id",  # not item_key: keyed by the secret
    "SELECT * FROM frame_refs ORDER BY frame_id, ref_frame_id",
    "SELECT * FROM frame_chunks ORDER BY chunk_id",
    "SELECT rowid, content FROM frames_fts ORDER BY rowid",
    "SELECT frame_id, embedding FROM frame_vectors ORDER BY frame_id",
    "SELECT chunk_id, embedding FROM chunk_vectors ORDER BY chunk_id",
    "SELECT * FROM kg_entities ORDER BY entity_id",
    "SELECT * FROM kg_relations ORDER BY relation_id",
    "SELECT * FROM kg_entity_frames ORDER BY entity_id, frame_id",
    "SELECT * FROM working_sessions ORDER BY session_id",
    "SELECT * FROM blobs ORDER BY blob_key",
    "SELECT * FROM blob_locations ORDER BY blob_key, location",
    "SELECT * FROM ft_corpora ORDER BY corpus_id",
    "SELECT * FROM ft_examples ORDER BY example_id",
    "SELECT * FROM model_lineage ORDER BY model_id",
    "SELECT * FROM recall_cache ORDER BY cache_id",
    "SELECT record_id, processor, subject_id, source, source_ref, created_at FROM subprocessor_records"
    " ORDER BY record_id",
    "SELECT seq, at, event, actor FROM audit_log ORDER BY seq",
    "SELECT seq, field, subject_id, value FROM audit_vault ORDER BY seq, field",
)


def content_digest(conn: apsw.Connection, store_dir: Path) -> str:
    """sha256 over the store's content: every table (minus secrets, salts and hashes made from them)
    and every file beside the database (sessions, blobs, corpora), by relative path."""
    h = hashlib.sha256()
    for sql in _DIGEST_SQL:
        h.update(sql.encode())
        for row in conn.execute(sql):
            h.update(repr(row).encode())
    root = Path(store_dir)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("memory.db") or rel == "audit-checkpoint.key":
            continue
        h.update(rel.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()
