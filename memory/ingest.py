"""Ingest: the fan-out of one memory item into every tier, as a real agent platform does it.

For each item, in one transaction per batch of items (`BATCH_ITEMS`):
1. the suppression guard FIRST (fail-closed): an erased item (`memory.items.item_key`: its
   conversation and its item_id, or its subject and content) is skipped (`skipped_suppressed`), an
   item whose subject has an erased id, email or phone in any spelling is held
   (`held_erased_identity`: written to no tier, counted only); then the duplicate check on the item
   key against live archive rows (a redacted skeleton of an erased item is not a duplicate: after an
   explicit re-consent the item is imported again). A conversation is not an item: other people's
   items, and the same person's next message, in one `(source, source_ref)` are items of their own;
2. episodic: a raw_archive row (with its item key); one summary frame (subject_id, archive_id) that
   names the subject and quotes the first sentence; one verbatim turn frame per sentence/turn (no
   subject, no archive link: `turn_key = '<source>/<source_ref>'` and the item key, `turn_seq` 0..);
3. every frame: chunks of <= `CHUNK_CHARS` characters, an FTS row (rowid = frame_id), a frame vector,
   and a vector per chunk;
4. semantic: person / email / phone entities of the subject, topic entities (SHARED by everyone who
   mentions the topic), relations person->topic 'discussed', person->email 'has_email',
   person->phone 'has_phone' (frame_id = the summary frame) and a link from EVERY entity to the
   summary frame (no entity is born unlinked);
5. working: one working_sessions row and its session file;
6. uploads: every attachment in every blob location; blobs + blob_locations rows;
7. fine-tune: when `training`, one example line appended to the open version of `assistant-sft`;
8. subprocessors: one pending subprocessor_records row per named processor;
9. audit: one 'memory.ingest' entry (subject id and source_ref only as vault commitments).
After the transactions, pending subprocessor records are synced if `memory.subprocessors` is there.

Row ids of archive rows, frames, chunks, entities and relations come from high-water marks in
`store_meta` (`hwm.<table>`), so an id freed by an erasure is never handed to new data: stale
references that an erasure missed can never point at someone else's row.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import secrets
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import apsw

from erasure.errors import ErasureError, InputError
from erasure.sqlite import transaction
from erasure.subject import Subject
from memory import audit, blobs, corpora, keyed, sessions, suppression
from memory.embedder import Embedder, HashingEmbedder, to_blob
from memory.ingest_text import chunk_text, person_name, split_turns, summary_text, topics_of
from memory.items import MemoryItem, item_key
from memory.row_ids import EntityCache, IdAllocator

BATCH_ITEMS = 500
INGEST_EVENT = "memory.ingest"


# --- inputs and report -----------------------------------------------------------------------------


@dataclass(frozen=True)
class IngestSource:
    """One item ready for the fan-out (attachments as `BlobData`). `keep_session=False` leaves the
    working tier out (the demo generator uses it for expired sessions of old items)."""

    source: str
    source_ref: str
    subject: Subject
    content: str
    attachments: tuple[blobs.BlobData, ...] = ()
    training: bool = False
    subprocessors: tuple[str, ...] = ()
    keep_session: bool = True
    item_id: str | None = None

    @classmethod
    def from_item(cls, item: MemoryItem) -> IngestSource:
        """Convert a validated ingest line; a missing attachment file is an `InputError`."""
        files: list[blobs.BlobData] = []
        for i, name in enumerate(item.attachments):
            # `read_jsonl` resolved and confined it; it must still be that symlink-free regular file,
            # and the file copied later must be this one (`identity`).
            path = Path(name)
            try:
                st = path.stat()
                unchanged = path.is_absolute() and path.resolve(strict=True) == path
            except (OSError, RuntimeError, ValueError):
                raise InputError(f"{item.source}: attachments.{i}: file not found") from None
            if not unchanged or not stat.S_ISREG(st.st_mode):
                raise InputError(f"{item.source}: attachments.{i}: not a regular file with a resolved path")
            files.append(blobs.BlobData(filename=path.name, path=path, identity=(st.st_dev, st.st_ino)))
        return cls(
            item.source,
            item.source_ref,
            item.subject,
            item.content,
            tuple(files),
            item.training,
            tuple(item.subprocessors),
            item_id=item.item_id,
        )


@dataclass
class IngestReport:
    """Counts of what an ingest wrote (never content). `entities` counts entities created (topics
    already known are shared, not created); `vectors` = frame vectors + chunk vectors."""

    ingested: int = 0
    skipped_suppressed: int = 0
    held_erased_identity: int = 0
    """Items whose subject has an erased id, email or phone: stored nowhere (see memory.suppression)."""
    skipped_duplicate: int = 0
    frames: int = 0
    chunks: int = 0
    vectors: int = 0
    entities: int = 0
    blobs: int = 0
    examples: int = 0
    subprocessor_records: int = 0
    audit_entries: int = 0
    elapsed: float = 0.0
    archive_rows: int = 0
    relations: int = 0
    entity_links: int = 0
    sessions: int = 0
    blob_copies: int = 0
    suppression_unreadable: int = 0
    subprocessor_sync: str = "not-needed"
    subprocessor_pending: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        return asdict(self)

    def add(self, other: IngestReport) -> None:
        """Add another report's counts (not elapsed/sync) into this one."""
        for k, v in asdict(other).items():
            if isinstance(v, int) and not isinstance(v, bool):
                setattr(self, k, getattr(self, k) + v)


# --- the batch writer ------------------------------------------------------------------------------


@dataclass
class _Rows:
    archive: list[tuple[Any, ...]] = field(default_factory=list)
    frames: list[tuple[Any, ...]] = field(default_factory=list)
    chunks: list[tuple[Any, ...]] = field(default_factory=list)
    vec_frames: list[tuple[int, str]] = field(default_factory=list)  # (frame_id, text)
    vec_chunks: list[tuple[int, int, str | None]] = field(default_factory=list)  # (chunk, frame, text|None)
    relations: list[tuple[Any, ...]] = field(default_factory=list)
    links: list[tuple[int, int]] = field(default_factory=list)
    sessions: list[tuple[Any, ...]] = field(default_factory=list)
    session_files: list[tuple[str, str]] = field(default_factory=list)
    blob_rows: list[tuple[Any, ...]] = field(default_factory=list)
    blob_locs: list[tuple[str, str]] = field(default_factory=list)
    blob_files: list[tuple[str, blobs.BlobData]] = field(default_factory=list)
    examples: list[corpora.Example] = field(default_factory=list)
    sub_records: list[tuple[Any, ...]] = field(default_factory=list)
    audits: list[tuple[dict[str, Any], dict[str, tuple[str | None, str]]]] = field(default_factory=list)


def add_frame(
    rows: _Rows,
    ids: IdAllocator,
    frame: tuple[str, str | None, int | None, str | None, int | None, str],
    now: str,
    item: str | None = None,
) -> tuple[int, int]:
    """Queue one frame (kind, subject_id, archive_id, turn_key, turn_seq, content) with its chunks,
    FTS row and vectors; `item`: a turn frame's item key. Returns (frame_id, number of chunks)."""
    kind, subject_id, archive_id, turn_key, turn_seq, content = frame
    fid = ids.take("frames")
    rows.frames.append((fid, kind, subject_id, archive_id, turn_key, item, turn_seq, content, now))
    rows.vec_frames.append((fid, content))
    parts = chunk_text(content)
    first = ids.take("frame_chunks", len(parts))
    for seq, part in enumerate(parts):
        rows.chunks.append((first + seq, fid, seq, part))
        # a single chunk equal to its frame reuses the frame's vector
        rows.vec_chunks.append((first + seq, fid, None if len(parts) == 1 else part))
    return fid, len(parts)


def _fan_out(
    conn: apsw.Connection,
    rows: _Rows,
    ids: IdAllocator,
    entities: EntityCache,
    src: IngestSource,
    key: str,
    locations: list[str],
    token: Callable[[], str],
    now: str,
    report: IngestReport,
) -> None:
    sid = src.subject.id
    archive_id = ids.take("raw_archive")
    rows.archive.append((archive_id, token(), src.source, src.source_ref, key, sid, src.content, now))
    turns = split_turns(src.content)
    topics = topics_of(src.content)
    summary = summary_text(src.subject, src.source, turns[0], topics)
    summary_id, n = add_frame(rows, ids, ("summary", sid, archive_id, None, None, summary), now)
    frames, chunks = 1, n
    turn_key = f"{src.source}/{src.source_ref}"
    for seq, turn in enumerate(turns):
        _, n = add_frame(rows, ids, ("turn", None, None, turn_key, seq, turn), now, key)
        frames += 1
        chunks += n

    person = entities.get(conn, ids, "person", person_name(src.subject), now)
    linked = [person]
    for kind, value, predicate in (
        ("email", src.subject.email, "has_email"),
        ("phone", src.subject.phone, "has_phone"),
    ):
        if value:
            eid = entities.get(conn, ids, kind, value, now)
            linked.append(eid)
            rows.relations.append((ids.take("kg_relations"), person, eid, predicate, summary_id, now))
    for topic in topics:
        eid = entities.get(conn, ids, "topic", topic, now)
        linked.append(eid)
        rows.relations.append((ids.take("kg_relations"), person, eid, "discussed", summary_id, now))
    rows.links += [(eid, summary_id) for eid in dict.fromkeys(linked)]

    if src.keep_session:
        session_id = token()
        state = sessions.state_json(sessions.session_state(src.source, src.source_ref, turns, now))
        rows.sessions.append((session_id, sid, src.source, src.source_ref, state, now))
        rows.session_files.append((session_id, state))
        report.sessions += 1

    for blob in src.attachments:
        key = token()
        digest, size = blobs.digest_and_size(blob)
        rows.blob_rows.append((key, sid, src.source, src.source_ref, blob.filename, size, digest, now))
        rows.blob_locs += [(key, loc) for loc in locations]
        rows.blob_files.append((key, blob))

    if src.training:
        completion = " ".join(turns[1:]) or summary
        rows.examples.append(
            corpora.Example(
                sid, src.source, src.source_ref, corpora.example_line(src.source, src.source_ref, turns[0], completion)
            )
        )

    rows.sub_records += [(name, sid, src.source, src.source_ref, now) for name in src.subprocessors]
    rows.audits.append(
        (
            {
                "frames": frames,
                "chunks": chunks,
                "blobs": len(src.attachments),
                "training": src.training,
                "subprocessors": len(src.subprocessors),
            },
            # A source key can name the person (`whatsapp-447958331277`, a ref ending in an email): both
            # halves of the key go to the vault, so the redaction of the subject's vault rows reaches them.
            {"subject_id": (sid, sid), "source": (sid, src.source), "source_ref": (sid, src.source_ref)},
        )
    )
    report.ingested += 1
    report.archive_rows += 1
    report.frames += frames
    report.chunks += chunks


def _write_frames(conn: apsw.Connection, rows: _Rows, embedder: Embedder) -> int:
    """Insert queued frames, chunks, FTS rows and vectors; returns the number of vectors written."""
    ex = conn.executemany
    ex(
        "INSERT INTO frames(frame_id, kind, subject_id, archive_id, turn_key, item_key, turn_seq, content,"
        " created_at) VALUES (?,?,?,?,?,?,?,?,?)",
        rows.frames,
    )
    ex("INSERT INTO frame_chunks(chunk_id, frame_id, seq, content) VALUES (?,?,?,?)", rows.chunks)
    ex("INSERT INTO frames_fts(rowid, content) VALUES (?,?)", [(f[0], f[7]) for f in rows.frames])

    frame_vecs = embedder.embed([t for _, t in rows.vec_frames]) if rows.vec_frames else None
    row_of = {fid: i for i, (fid, _) in enumerate(rows.vec_frames)}
    own = [(cid, t) for cid, _, t in rows.vec_chunks if t is not None]
    chunk_vecs = embedder.embed([t for _, t in own]) if own else None
    own_row = {cid: i for i, (cid, _) in enumerate(own)}
    if frame_vecs is not None:
        ex(
            "INSERT INTO frame_vectors(frame_id, embedding) VALUES (?,?)",
            [(fid, to_blob(frame_vecs[i])) for i, (fid, _) in enumerate(rows.vec_frames)],
        )
        ex(
            "INSERT INTO chunk_vectors(chunk_id, embedding) VALUES (?,?)",
            [
                (
                    cid,
                    to_blob(
                        chunk_vecs[own_row[cid]]
                        if t is not None and chunk_vecs is not None
                        else frame_vecs[row_of[fid]]
                    ),
                )
                for cid, fid, t in rows.vec_chunks
            ],
        )
    return len(rows.vec_frames) + len(rows.vec_chunks)


def _write(
    conn: apsw.Connection,
    store_dir: Path,
    rows: _Rows,
    embedder: Embedder,
    locations: list[str],
    actor: str,
    at: datetime | None,
    now: str,
    undo: list[Callable[[], object]],
    report: IngestReport,
) -> None:
    ex = conn.executemany
    ex(
        "INSERT INTO raw_archive(archive_id, archive_uid, source, source_ref, item_key, subject_id, content,"
        " created_at) VALUES (?,?,?,?,?,?,?,?)",
        rows.archive,
    )
    report.vectors += _write_frames(conn, rows, embedder)
    ex(
        "INSERT INTO kg_relations(relation_id, src_entity_id, dst_entity_id, predicate, frame_id, created_at)"
        " VALUES (?,?,?,?,?,?)",
        rows.relations,
    )
    ex("INSERT OR IGNORE INTO kg_entity_frames(entity_id, frame_id) VALUES (?,?)", rows.links)
    report.relations += len(rows.relations)
    report.entity_links += len(rows.links)
    ex(
        "INSERT INTO working_sessions(session_id, subject_id, source, source_ref, state, updated_at)"
        " VALUES (?,?,?,?,?,?)",
        rows.sessions,
    )
    ex(
        "INSERT INTO blobs(blob_key, subject_id, source, source_ref, filename, size, sha256, created_at)"
        " VALUES (?,?,?,?,?,?,?,?)",
        rows.blob_rows,
    )
    ex("INSERT INTO blob_locations(blob_key, location) VALUES (?,?)", rows.blob_locs)
    ex(
        "INSERT INTO subprocessor_records(processor, subject_id, source, source_ref, created_at) VALUES (?,?,?,?,?)",
        rows.sub_records,
    )
    report.blobs += len(rows.blob_rows)
    report.subprocessor_records += len(rows.sub_records)
    for fields, personal in rows.audits:
        audit.append(conn, INGEST_EVENT, actor, fields, personal, at=at)
    report.audit_entries += len(rows.audits)

    # Files last: a failure here rolls the rows back and `undo` removes what was written.
    for session_id, state in rows.session_files:
        path = sessions.write_session(store_dir, session_id, state)
        undo.append(partial(path.unlink, missing_ok=True))
    for key, blob in rows.blob_files:
        for loc in locations:
            blobs.put_blob(store_dir, loc, key, blob)
            undo.append(partial(blobs.delete_blob, store_dir, loc, key))
            report.blob_copies += 1
    if rows.examples:
        before = corpora.latest(conn, corpora.SFT_CORPUS)
        version = corpora.open_version(conn, store_dir, corpora.SFT_CORPUS, now)
        path = corpora.corpus_file(store_dir, version.path)
        if before is None or before.corpus_id != version.corpus_id:
            undo.append(partial(path.unlink, missing_ok=True))  # the version was started here
        size = corpora.append_examples(conn, store_dir, version, rows.examples)
        undo.append(partial(_truncate, path, size))
        report.examples += len(rows.examples)


def _quiet(fn: Callable[..., object], *args: object) -> None:
    # best effort: undo after a failed batch must not mask the first error
    with contextlib.suppress(Exception):
        fn(*args)


def _truncate(path: Path, size: int) -> None:
    with path.open("r+b") as f:
        f.truncate(size)


def _check_processors(conn: apsw.Connection, sources: Sequence[IngestSource]) -> None:
    wanted = {p for s in sources for p in s.subprocessors}
    if not wanted:
        return
    known = {str(r[0]) for r in conn.execute("SELECT name FROM subprocessors")}
    unknown = sorted(wanted - known)
    if unknown:
        raise InputError(f"unknown subprocessor(s) {', '.join(unknown)}: register them first")


def sync_subprocessors(conn: apsw.Connection) -> tuple[str, int]:
    """Push pending subprocessor records with `memory.subprocessors.sync_pending` when that module is
    installed. Returns (status, records still pending): status is "synced" (none pending), "pending"
    (a processor did not take them: a later sync retries), "failed" or "unavailable"."""

    def pending() -> int:
        row = conn.execute("SELECT count(*) FROM subprocessor_records WHERE remote_ref IS NULL").fetchone()
        return int(row[0]) if row else 0

    if importlib.util.find_spec("memory.subprocessors") is None:
        return "unavailable", pending()
    module = importlib.import_module("memory.subprocessors")
    sync = getattr(module, "sync_pending", None)
    if sync is None:
        return "unavailable", pending()
    try:
        sync(conn)
    except ErasureError:
        return "failed", pending()  # records stay pending (remote_ref NULL); a later sync retries them
    left = pending()
    return ("synced" if left == 0 else "pending"), left


def _secret(conn: apsw.Connection) -> bytes | None:
    """The store's keyed-hash secret, or None when it cannot be read (the guard then fails closed)."""
    try:
        return keyed.identity_secret(conn)
    except Exception:  # a missing or broken secret, corruption, I/O: every item is held as unreadable
        return None


def _archived(conn: apsw.Connection, src: IngestSource, key: str) -> bool:
    """Whether the item is live in the archive already: by its item key, or, archived before items had
    keys, as the same subject's same content in the same conversation."""
    by_key = conn.execute("SELECT 1 FROM raw_archive WHERE item_key=? AND erased_at IS NULL LIMIT 1", (key,))
    if by_key.fetchone() is not None:
        return True
    old = conn.execute(
        "SELECT 1 FROM raw_archive WHERE source=? AND source_ref=? AND item_key IS NULL AND erased_at IS NULL"
        " AND subject_id=? AND content=? LIMIT 1",
        (src.source, src.source_ref, src.subject.id, src.content),
    )
    return old.fetchone() is not None


def ingest_sources(
    conn: apsw.Connection,
    store_dir: Path,
    sources: Iterable[IngestSource],
    *,
    embedder: Embedder | None = None,
    now: datetime | None = None,
    actor: str = "ingest",
    batch_items: int = BATCH_ITEMS,
    token: Callable[[], str] | None = None,
    sync: bool = True,
    progress: Callable[[int], None] | None = None,
) -> IngestReport:
    """The fan-out of prepared items, `batch_items` per transaction (see the module docstring).

    `token` makes the opaque ids (archive uid, session id, blob key); default: random. `progress`
    is called with the number of items handled after each batch.
    """
    started = time.perf_counter()
    emb = embedder or HashingEmbedder()
    items = list(sources)
    _check_processors(conn, items)
    make_token = token or (lambda: secrets.token_hex(16))
    report = IngestReport()
    store_dir = Path(store_dir)
    for start in range(0, len(items), batch_items):
        batch = items[start : start + batch_items]
        stamp = corpora.iso(now)
        undo: list[Callable[[], object]] = []
        try:
            with transaction(conn):
                part = IngestReport()
                locations = blobs.locations(conn)
                ids = IdAllocator(conn)
                entities = EntityCache()
                rows = _Rows()
                seen: set[str] = set()
                identities = suppression.IdentityGuard(conn)
                secret = _secret(conn)
                for src in batch:
                    key = (
                        None
                        if secret is None
                        else item_key(secret, src.source, src.source_ref, src.subject.id, src.content, src.item_id)
                    )
                    verdict = (
                        suppression.Guard.unreadable
                        if key is None
                        else suppression.check(conn, src.source, src.source_ref, key)
                    )
                    if verdict is not suppression.Guard.allowed:
                        part.skipped_suppressed += 1
                        if verdict is suppression.Guard.unreadable:
                            part.suppression_unreadable += 1
                        continue
                    verdict = identities.check(src.subject)
                    if verdict is not suppression.Guard.allowed:  # held: written nowhere, counted only
                        part.held_erased_identity += 1
                        if verdict is suppression.Guard.unreadable:
                            part.suppression_unreadable += 1
                        continue
                    assert key is not None  # no secret: every item was counted unreadable above
                    if key in seen or _archived(conn, src, key):
                        part.skipped_duplicate += 1
                        continue
                    seen.add(key)
                    _fan_out(conn, rows, ids, entities, src, key, locations, make_token, stamp, part)
                _write(conn, store_dir, rows, emb, locations, actor, now, stamp, undo, part)
                part.entities = entities.created
                ids.save(conn)
        except BaseException:
            for action in reversed(undo):
                _quiet(action)
            raise
        report.add(part)
        if progress is not None:
            progress(len(batch))
    if sync and report.subprocessor_records:
        report.subprocessor_sync, report.subprocessor_pending = sync_subprocessors(conn)
    report.elapsed = round(time.perf_counter() - started, 6)
    return report


def ingest(
    conn: apsw.Connection,
    store_dir: Path,
    items: Iterable[MemoryItem],
    *,
    embedder: Embedder | None = None,
    now: datetime | None = None,
) -> IngestReport:
    """Ingest validated memory items into the store at `store_dir` (see the module docstring).

    Every item is prepared (attachments checked, processors known) before the first write; items
    already erased (`erased_subjects`) or already archived (the same item key) are skipped and counted.
    """
    sources = [IngestSource.from_item(item) for item in items]
    return ingest_sources(conn, store_dir, sources, embedder=embedder, now=now)


def add_derived_frames(
    conn: apsw.Connection,
    frames: Sequence[tuple[str, Sequence[int]]],
    *,
    embedder: Embedder | None = None,
    now: datetime | None = None,
) -> list[int]:
    """Write derived frames (tier 7), each `(content, referenced frame ids)`, with their frame_refs,
    chunks, FTS rows and vectors, as the agent's summariser does. Runs inside the caller's
    transaction; returns the new frame ids (ids from the high-water marks, never reused)."""
    stamp = corpora.iso(now)
    ids = IdAllocator(conn)
    rows = _Rows()
    refs: list[tuple[int, int]] = []
    out: list[int] = []
    for content, refd in frames:
        fid, _ = add_frame(rows, ids, ("derived", None, None, None, None, content), stamp)
        refs += [(fid, int(r)) for r in dict.fromkeys(refd)]
        out.append(fid)
    _write_frames(conn, rows, embedder or HashingEmbedder())
    conn.executemany("INSERT INTO frame_refs(frame_id, ref_frame_id) VALUES (?,?)", refs)
    ids.save(conn)
    return out
