"""Kind `chroma`, the SQL part: the store's layout in chroma.sqlite3, whose records are the subject's,
and what Chroma's own delete does to the metadata segment and the log (see the package docstring)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import apsw

from erasure.errors import StoreError
from erasure.identity import Identity, fold
from erasure.sqlite import connect, transaction
from erasure.subject import Subject
from erasure.target_kinds.chroma import ChromaConfig

DB_FILE = "chroma.sqlite3"
VECTOR_SCOPE = "VECTOR"
OP_DELETE = 3


def open_store(cfg: ChromaConfig) -> apsw.Connection:
    """A connection to the store's chroma.sqlite3 (`StoreError` when there is none)."""
    db = cfg.path / DB_FILE
    if not db.is_file():
        raise StoreError(f"no Chroma store at {cfg.path} ({DB_FILE} is missing)")
    return connect(db)


# --- the store's layout ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Collection:
    id: str
    name: str
    space: str
    metadata_segments: tuple[str, ...]
    vector_segments: tuple[str, ...]


def _space(config_json: str | None, schema_json: str | None, legacy: str | None) -> str:
    """The collection's distance space: schema (chromadb >= 1.1), then configuration, then the legacy
    `hnsw:space` metadata, then Chroma's default (l2)."""

    def find(node: Any) -> str | None:
        if isinstance(node, dict):
            vi = node.get("vector_index")
            if isinstance(vi, dict) and isinstance(vi.get("config"), dict):
                sp = vi["config"].get("space")
                if isinstance(sp, str):
                    return sp
            for v in node.values():
                found = find(v)
                if found:
                    return found
        return None

    for text in (schema_json, config_json):
        if text:
            try:
                doc = json.loads(text)
            except ValueError:
                continue
            sp = find(doc)
            if sp is None and isinstance(doc, dict):
                hnsw = doc.get("hnsw") or doc.get("hnsw_configuration")
                if isinstance(hnsw, dict) and isinstance(hnsw.get("space"), str):
                    sp = hnsw["space"]
            if sp:
                return sp
    return legacy or "l2"


def collections_of(conn: apsw.Connection) -> list[Collection]:
    """Every collection, with its distance space and its segments."""
    cols = {str(r[1]) for r in conn.execute("PRAGMA table_info(collections)")}
    schema = "schema_str" if "schema_str" in cols else "NULL"
    conf = "config_json_str" if "config_json_str" in cols else "NULL"
    legacy = {
        str(cid): str(v)
        for cid, v in conn.execute("SELECT collection_id, str_value FROM collection_metadata WHERE key = 'hnsw:space'")
    }
    segs: dict[str, list[tuple[str, str]]] = {}
    for sid, scope, cid in conn.execute("SELECT id, scope, collection FROM segments"):
        segs.setdefault(str(cid), []).append((str(sid), str(scope)))
    out = []
    for cid, name, cj, sj in conn.execute(f"SELECT id, name, {conf}, {schema} FROM collections ORDER BY name"):
        mine = segs.get(str(cid), [])
        out.append(
            Collection(
                id=str(cid),
                name=str(name),
                space=_space(cj, sj, legacy.get(str(cid))),
                metadata_segments=tuple(s for s, scope in mine if scope != VECTOR_SCOPE),
                vector_segments=tuple(s for s, scope in mine if scope == VECTOR_SCOPE),
            )
        )
    return out


def _topic_collection(topic: str) -> str:
    """`persistent://<tenant>/<database>/<collection id>` -> the collection id."""
    return topic.rsplit("/", 1)[-1]


# --- who is the subject in this store ---------------------------------------------------------------


@dataclass
class Found:
    """The subject's footprint in chroma.sqlite3 (internal ids only)."""

    rows: list[int] = field(default_factory=list)
    """embeddings.id (= full-text rowid) of the subject's live records."""
    ids: dict[str, set[str]] = field(default_factory=dict)
    """collection id -> the subject's record ids (live, or in the log)."""
    queue: list[int] = field(default_factory=list)
    """seq_id of the log rows of the subject."""
    queue_vectors: int = 0


def _is_subject(value: Any, want: str) -> bool:
    if value is None or isinstance(value, bool | float):
        return False
    return fold(str(value)) == want


def resolve(
    conn: apsw.Connection,
    cfg: ChromaConfig,
    subject: Subject,
    collections: list[Collection],
    known: dict[str, set[str]] | None = None,
) -> Found:
    """The subject's live records (metadata `subject_key` equal to their id after NFKC and case
    folding), their record ids, and every log row of those ids or whose metadata names them; `known`
    adds record ids found earlier (before a delete removed their rows). A log row of a record that no
    longer exists whose id names the subject (ids such as `<user_id>/note-1`) counts as theirs."""
    want = fold(subject.id)
    found = Found()
    for cid, ids in (known or {}).items():
        found.ids.setdefault(cid, set()).update(ids)
    seg_to_col = {s: c.id for c in collections for s in c.metadata_segments}
    values = [
        v
        for (v,) in conn.execute(
            "SELECT DISTINCT string_value FROM embedding_metadata WHERE key = ? AND string_value IS NOT NULL",
            (cfg.subject_key,),
        )
        if _is_subject(v, want)
    ]
    ints = [
        v
        for (v,) in conn.execute(
            "SELECT DISTINCT int_value FROM embedding_metadata WHERE key = ? AND int_value IS NOT NULL",
            (cfg.subject_key,),
        )
        if _is_subject(v, want)
    ]
    for column, vals in (("string_value", values), ("int_value", ints)):
        for v in vals:
            for rowid, seg, eid in conn.execute(
                f"SELECT e.id, e.segment_id, e.embedding_id FROM embedding_metadata m JOIN embeddings e"
                f" ON e.id = m.id WHERE m.key = ? AND m.{column} = ?",
                (cfg.subject_key, v),
            ):
                found.rows.append(int(rowid))
                found.ids.setdefault(seg_to_col.get(str(seg), "?"), set()).add(str(eid))
    found.rows = sorted(set(found.rows))
    rows = list(conn.execute("SELECT seq_id, topic, id, metadata, vector IS NOT NULL FROM embeddings_queue"))
    for _seq, topic, rid, meta, _v in rows:
        if meta and cfg.subject_key in str(meta):
            try:
                doc = json.loads(str(meta))
            except ValueError:
                continue
            if isinstance(doc, dict) and _is_subject(doc.get(cfg.subject_key), want):
                found.ids.setdefault(_topic_collection(str(topic)), set()).add(str(rid))
    ident = Identity.of(subject)
    live: dict[str, set[str]] | None = None
    for seq, topic, rid, _meta, has_vector in rows:
        cid = _topic_collection(str(topic))
        if str(rid) not in found.ids.get(cid, ()) and ident.found_in(str(rid)):
            if live is None:
                live = _live_record_ids(conn, collections)
            if str(rid) not in live.get(cid, ()):
                found.ids.setdefault(cid, set()).add(str(rid))
        if str(rid) in found.ids.get(cid, ()):
            found.queue.append(int(seq))
            found.queue_vectors += int(bool(has_vector))
    return found


def _live_record_ids(conn: apsw.Connection, collections: list[Collection]) -> dict[str, set[str]]:
    seg_to_col = {s: c.id for c in collections for s in c.metadata_segments}
    out: dict[str, set[str]] = {}
    for seg, eid in conn.execute("SELECT segment_id, embedding_id FROM embeddings"):
        out.setdefault(seg_to_col.get(str(seg), "?"), set()).add(str(eid))
    return out


# --- Chroma's Delete, and the log ---------------------------------------------------------------------


def in_json(ids: Iterable[int]) -> str:
    """Ids as a JSON array for `json_each(?)`."""
    return json.dumps(sorted(set(ids)))


def _names(ident: Identity, text: str) -> bool:
    """Whether a log row's metadata (JSON) names the subject, as written or with its escapes decoded."""
    if ident.names_in(text):
        return True
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    return isinstance(doc, dict) and any(ident.names_in(str(v)) for v in (*doc, *doc.values()))


def sql_delete(conn: apsw.Connection, found: Found, collections: list[Collection], ident: Identity) -> dict[str, int]:
    """What Chroma's Delete does to the metadata segment, then the log: one transaction.

    Log rows go when they are the subject's, when every segment of their collection applied them
    (Chroma's own purge), when their collection was dropped, and when the metadata segment applied
    them and their record no longer exists (the deletes the framework logged name the erased ids; the
    vector segment is rewritten without those ids next, so replaying none of their rows is what
    replaying all of them would do).

    A log row the metadata segment applied whose metadata (document included) names the subject keeps
    its id, operation and vector (all the vector segment reads) and loses its metadata: another
    person's document as it was before the agent redacted the subject from it stays in the log until
    the vector segment applies it, which below `sync_threshold` writes never happens."""
    out = {
        "records_deleted": 0,
        "queue_rows_deleted": 0,
        "queue_rows_purged": 0,
        "queue_rows_of_gone_records": 0,
        "queue_row_blanked": 0,
        "queue_metadata_blanked": 0,
    }
    with transaction(conn):
        rows = in_json(found.rows)
        conn.execute("DELETE FROM embedding_fulltext_search WHERE rowid IN (SELECT value FROM json_each(?))", (rows,))
        conn.execute("DELETE FROM embedding_metadata WHERE id IN (SELECT value FROM json_each(?))", (rows,))
        if conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'embedding_metadata_array'").fetchone():
            conn.execute("DELETE FROM embedding_metadata_array WHERE id IN (SELECT value FROM json_each(?))", (rows,))
        conn.execute("DELETE FROM embeddings WHERE id IN (SELECT value FROM json_each(?))", (rows,))
        out["records_deleted"] = conn.changes()
        newest = conn.execute("SELECT max(seq_id) FROM embeddings_queue").fetchone()
        top = int(newest[0]) if newest and newest[0] is not None else -1
        conn.execute(
            "DELETE FROM embeddings_queue WHERE seq_id IN (SELECT value FROM json_each(?)) AND seq_id != ?",
            (in_json(found.queue), top),
        )
        out["queue_rows_deleted"] = conn.changes()
        applied = {str(sid): int(seq) for sid, seq in conn.execute("SELECT segment_id, seq_id FROM max_seq_id")}
        by_id = {c.id: c for c in collections}
        blank = top in found.queue
        for (topic,) in list(conn.execute("SELECT DISTINCT topic FROM embeddings_queue")):
            col = by_id.get(_topic_collection(str(topic)))
            if col is None:
                conn.execute("DELETE FROM embeddings_queue WHERE topic = ? AND seq_id != ?", (topic, top))
                out["queue_rows_purged"] += conn.changes()
                blank = blank or bool(
                    conn.execute(
                        "SELECT 1 FROM embeddings_queue WHERE seq_id = ? AND topic = ?", (top, topic)
                    ).fetchone()
                )
                continue
            segs = (*col.metadata_segments, *col.vector_segments)
            if segs and all(s in applied for s in segs):
                conn.execute(
                    "DELETE FROM embeddings_queue WHERE topic = ? AND seq_id < ? AND seq_id != ?",
                    (topic, min(applied[s] for s in segs), top),
                )
                out["queue_rows_purged"] += conn.changes()
            if not col.metadata_segments or any(s not in applied for s in col.metadata_segments):
                continue
            upto = min(applied[s] for s in col.metadata_segments)
            gone = (
                "topic = ? AND seq_id <= ? AND id NOT IN (SELECT embedding_id FROM embeddings"
                " WHERE segment_id IN (SELECT value FROM json_each(?)))"
            )
            params = (topic, upto, json.dumps(list(col.metadata_segments)))
            blank = blank or bool(
                conn.execute(f"SELECT 1 FROM embeddings_queue WHERE seq_id = ? AND {gone}", (top, *params)).fetchone()
            )
            conn.execute(f"DELETE FROM embeddings_queue WHERE seq_id != ? AND {gone}", (top, *params))
            out["queue_rows_of_gone_records"] += conn.changes()
            naming = [
                int(seq)
                for seq, meta in conn.execute(
                    "SELECT seq_id, metadata FROM embeddings_queue WHERE topic = ? AND seq_id <= ?"
                    " AND metadata IS NOT NULL",
                    (topic, upto),
                )
                if _names(ident, str(meta))
            ]
            conn.execute(
                "UPDATE embeddings_queue SET metadata = NULL WHERE seq_id IN (SELECT value FROM json_each(?))",
                (in_json(naming),),
            )
            out["queue_metadata_blanked"] += conn.changes()
        if blank:
            # Chroma numbers the next write max(seq_id)+1: the newest row stays, as a delete of no record.
            conn.execute(
                "UPDATE embeddings_queue SET operation = ?, id = '', vector = NULL, encoding = NULL,"
                " metadata = NULL WHERE seq_id = ? AND NOT (operation = ? AND id = '' AND vector IS NULL"
                " AND metadata IS NULL)",
                (OP_DELETE, top, OP_DELETE),
            )
            out["queue_row_blanked"] = conn.changes()
    return out


def live_ids(conn: apsw.Connection, col: Collection) -> set[str]:
    """The record ids of the collection's metadata segments."""
    ids: set[str] = set()
    for seg in col.metadata_segments:
        ids |= {str(r[0]) for r in conn.execute("SELECT embedding_id FROM embeddings WHERE segment_id = ?", (seg,))}
    return ids


def pending_ids(conn: apsw.Connection, col: Collection) -> set[str]:
    """Ids the log still has to apply to the collection's vector segment (not on disk yet)."""
    applied = [
        int(r[0])
        for s in col.vector_segments
        for r in conn.execute("SELECT seq_id FROM max_seq_id WHERE segment_id = ?", (s,))
    ]
    since = min(applied) if applied else 0
    topic_like = f"%/{col.id}"
    return {
        str(r[0])
        for r in conn.execute(
            "SELECT id FROM embeddings_queue WHERE topic LIKE ? AND seq_id > ? AND operation != ?",
            (topic_like, since, OP_DELETE),
        )
    }


def segment_ids(conn: apsw.Connection) -> set[str]:
    """Every segment the `segments` table names."""
    return {str(r[0]) for r in conn.execute("SELECT id FROM segments")}


def applied_seqs(conn: apsw.Connection) -> dict[str, int]:
    """Per segment, the newest log row it applied."""
    return {str(sid): int(seq) for sid, seq in conn.execute("SELECT segment_id, seq_id FROM max_seq_id")}


def fts_rows(conn: apsw.Connection, rows: list[int]) -> int:
    """How many of these records the full-text index holds."""
    row = conn.execute(
        "SELECT count(*) FROM embedding_fulltext_search_content WHERE id IN (SELECT value FROM json_each(?))",
        (in_json(rows),),
    ).fetchone()
    return int(row[0]) if row else 0


def queue_rows_of_deleted(conn: apsw.Connection, col: Collection, applied: dict[str, int], mine: list[int]) -> int:
    """Log rows of the collection, applied by its metadata segments, whose record no longer exists
    (the subject's own rows, `mine`, aside)."""
    if not col.metadata_segments or any(s not in applied for s in col.metadata_segments):
        return 0
    r = conn.execute(
        "SELECT count(*) FROM embeddings_queue WHERE topic LIKE ? AND seq_id <= ? AND id != ''"
        " AND seq_id NOT IN (SELECT value FROM json_each(?)) AND id NOT IN (SELECT embedding_id"
        " FROM embeddings WHERE segment_id IN (SELECT value FROM json_each(?)))",
        (
            f"%/{col.id}",
            min(applied[s] for s in col.metadata_segments),
            in_json(mine),
            json.dumps(list(col.metadata_segments)),
        ),
    ).fetchone()
    return int(r[0]) if r else 0
