"""Kind `chroma`: a Chroma `PersistentClient` directory (chromadb 1.x, Rust core), every collection in it.

Configuration: `erasure.target_kinds.chroma` (`path`, `subject_key`, `use_api`). The package's parts:
`sql` (chroma.sqlite3: layout, the subject's records, Chroma's delete by SQL), `hnsw` (the HNSW files:
read, compact, encode, swap folders), `api` (chromadb's own delete); this module ties them.

Tiers: episodic = the subject's records (documents and metadata in chroma.sqlite3, and their copies in
the log, `embeddings_queue`), vectors = their vectors (HNSW files of each collection's vector segment,
and the log), derivatives = the full-text index (`embedding_fulltext_search`, FTS5 trigram).

What the framework's delete (`collection.delete(where={"user_id": ...})`) leaves, measured with
chromadb 1.5.9 on stores built by it (tests/targets/test_target_chroma.py shows each with the probe):

- the log: every write is first a row of `embeddings_queue` (id, float32 vector, metadata JSON with the
  document). Chroma purges rows only once every segment of the collection has applied them, and the
  HNSW segment applies them to disk only every `sync_threshold` (1000) records: the last up to 999
  writes of each collection, the subject's among them, stay in the log with text and vector, and the
  delete adds rows naming their record ids. Freed pages of chroma.sqlite3 keep purged rows (Chroma
  does not set secure_delete).
- the HNSW files: a delete only sets a flag on the element in `data_level0.bin` (the float32 vector,
  normalised for cosine, stays, and the element stays linked in the graph); when fewer than
  `sync_threshold` operations followed, not even that: the element and its id in
  `index_metadata.pickle` stay live on disk. For l2 and ip spaces `length.bin` is written from
  uninitialised memory (hnswlib's `malloc`): we found a vector of the subject in it. Below the
  threshold a collection's segment files are the ones Chroma wrote when it created them: room for 100
  elements, none used, from uninitialised memory too: we found the subject's id, name, email and phone
  there, written by the agent's process or by the framework's delete in ours.
- a document the agent edits (`collection.update`, e.g. to redact a person it names) stays in the log
  as first written until the HNSW segment applies the row: below the threshold, for good.
- the full-text index: FTS5 records a delete as a marker in a new segment; the trigram postings of the
  deleted documents stay in the older segments until a full merge, and in freed pages after it.
- `delete_collection()` drops the rows but leaves the segment folder with all its vectors.

What this module does, every run (so a rerun after a crash anywhere finishes the job):

1. (`use_api`, default true) deletes the subject's records through the installed chromadb, when it is
   importable and would open this store without migrating it (its migrations equal the store's); else
   it does what that delete does to chroma.sqlite3 itself (step 2 always runs, as a sweep).
2. in one transaction on chroma.sqlite3 (`secure_delete=ON`): deletes the subject's remaining rows
   (embeddings, embedding_metadata, embedding_metadata_array, full-text rows), every log row of the
   subject (their ids, or metadata naming them), log rows every segment has applied (what Chroma's own
   purge does, which it only does per collection on the next write), log rows of dropped collections,
   and log rows the metadata segment applied whose record no longer exists (the deletes the framework
   logged carry the erased ids; step 3 drops those ids from the index, so replaying none of their
   rows is what replaying all of them would do). The log's newest row is kept (Chroma numbers the
   next write after it) and blanked to a delete of no record (id '') when it was one of those. A log
   row the metadata segment applied whose metadata names the subject (someone else's document, as it
   was before the agent redacted it) keeps its id, operation and vector, all the HNSW segment reads,
   and loses its metadata.
3. rewrites each collection's HNSW segment without the subject's elements, without tombstones (deleted
   elements, whoever's) and without elements whose id no longer exists: the survivors keep their
   labels, vectors and links; a survivor that lost a neighbour is relinked to the nearest survivors
   among the lost neighbour's neighbours (graph repair); `length.bin` keeps the survivors' norms for
   cosine and is zeroed for l2/ip (it is never read there). The new folder is written beside the old
   one and swapped in by two renames (a crash in between is finished by the next run), while a write
   lock on chroma.sqlite3 keeps Chroma writers out. A segment is written whole (no capacity past the
   survivors, unused link slots and level padding zero) whenever its files differ by a byte from that,
   even with nothing to drop, so no byte of it is one the index does not read; one already so written
   is left alone (a rerun rewrites nothing).
4. removes orphaned segment folders (no segment row names them: dropped collections).
5. rebuilds the full-text index (`'rebuild'`: from the remaining documents only), re-runs `ANALYZE`
   where `sqlite_stat4` keeps sampled index keys, then `VACUUM` (freed pages and b-tree gaps) and, for
   a WAL store, a TRUNCATE checkpoint.

The agent: Chroma is not process-safe (its docs; chroma-core/chroma#3792). A process that keeps a
PersistentClient open holds each collection's HNSW index in memory (chromadb caches it per path even
across `PersistentClient(...)` calls): after an erasure it still answers queries with the erased ids
(without documents: those come from SQLite), and a write would persist its stale index over ours. We
wait on its SQLite locks, never fail on them, and leave the files loadable; the agent must then drop
its client: `chromadb.api.client.SharedSystemClient.clear_system_cache()` and a new `PersistentClient`
(or a restart), before it writes again. The same holds for this process: step 1 closes its client.

`count` reports the subject's items and, beside them, deleted data still on disk whoever it was
(HNSW elements and log rows of records that no longer exist, orphaned folders): once a record id is
gone nothing shows whose it was, so the framework's delete leaves a non-zero count and an erasure
leaves zero. What `count` cannot attribute is the full-text postings of deleted rows (the index would
have to be decoded): step 5 rebuilds the index on every run instead, and the probe decodes it.

Other people's records that name the subject (document or metadata) are counted (`mentions`), never
changed (their copies in the log lose their metadata once applied: step 2). Counts only in what is
returned.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import apsw

from erasure.errors import ConfigError
from erasure.identity import Identity
from erasure.sqlite import transaction
from erasure.subject import Subject
from erasure.target_kinds.chroma import ChromaConfig
from erasure.targets import Target
from erasure.tiers import Tier
from tasks.targets.chroma.api import api_delete
from tasks.targets.chroma.hnsw import (
    check_segments,
    classify,
    finish_swaps,
    orphan_folders,
    read_hnsw,
    rewrite_segment,
    segment_folder,
    swap_leftovers,
)
from tasks.targets.chroma.sql import (
    DB_FILE,
    Collection,
    Found,
    applied_seqs,
    collections_of,
    fts_rows,
    live_ids,
    open_store,
    pending_ids,
    queue_rows_of_deleted,
    resolve,
    segment_ids,
    sql_delete,
)
from tasks.targets.eraser import TierOutcome, rebuild_pages, retry_busy

KIND = "chroma"
STORE = "the chroma store"


def rewrite_indexes(
    conn: apsw.Connection, cfg: ChromaConfig, found: Found, collections: list[Collection]
) -> dict[str, int]:
    """Steps 3 and 4, under a write lock on chroma.sqlite3 (no Chroma write can start meanwhile)."""
    out: dict[str, int] = {}

    def add(d: dict[str, int]) -> None:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v

    with transaction(conn):
        add({"swaps_finished": finish_swaps(cfg.path)})
        for col in collections:
            live = (live_ids(conn, col) | pending_ids(conn, col)) if col.metadata_segments else None
            for seg in col.vector_segments:
                add(rewrite_segment(cfg.path, seg, col.space, found.ids.get(col.id, set()), live))
        orphans = orphan_folders(cfg.path, segment_ids(conn))
        for p in orphans:
            shutil.rmtree(p)
        out["orphan_folders_removed"] = len(orphans)
    return out


def hygiene(conn: apsw.Connection) -> dict[str, int]:
    """Step 5: the full-text index rebuilt from what is left, freed pages and b-tree gaps rebuilt."""
    out = {"fts_rebuilt": 0, "analyzed": 0, "vacuumed": 0, "checkpoint_busy": 0}
    if conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'embedding_fulltext_search'").fetchone():
        with transaction(conn):
            conn.execute("INSERT INTO embedding_fulltext_search(embedding_fulltext_search) VALUES ('rebuild')")
        out["fts_rebuilt"] = 1
    # Planner samples keep index keys (the subject's metadata values among them): resampled.
    out |= rebuild_pages(conn, STORE)
    out["vacuumed"] = 1
    return out


@dataclass
class _Counts:
    """What `count` reports. Besides the subject's own items, deleted data still on disk counts: HNSW
    elements of records that no longer exist (tombstoned, or still live on disk because the index was
    not persisted since the delete), log rows of records that no longer exist, orphaned segment
    folders. Once its record id is gone nothing shows whose it was, and an erasure removes it all."""

    records: int = 0
    queue_rows: int = 0
    queue_rows_of_deleted: int = 0
    queue_vectors: int = 0
    hnsw_subject: int = 0
    hnsw_deleted: int = 0
    orphan_folders: int = 0
    fts_rows: int = 0

    def tiers(self) -> dict[Tier, int]:
        return {
            Tier.episodic: self.records + self.queue_rows + self.queue_rows_of_deleted,
            Tier.vectors: self.hnsw_subject + self.hnsw_deleted + self.queue_vectors + self.orphan_folders,
            Tier.derivatives: self.fts_rows,
        }

    def detail(self, tier: Tier) -> dict[str, int]:
        if tier is Tier.episodic:
            return {
                "records": self.records,
                "queue_rows": self.queue_rows,
                "queue_rows_of_deleted_records": self.queue_rows_of_deleted,
            }
        if tier is Tier.vectors:
            return {
                "hnsw_subject": self.hnsw_subject,
                "hnsw_deleted_elements": self.hnsw_deleted,
                "queue_vectors": self.queue_vectors,
                "orphan_folders": self.orphan_folders,
            }
        return {"fts_rows": self.fts_rows}


def _count(conn: apsw.Connection, cfg: ChromaConfig, subject: Subject) -> _Counts:
    collections = collections_of(conn)
    _check(cfg, collections)
    found = resolve(conn, cfg, subject, collections)
    c = _Counts(
        records=len(found.rows),
        queue_rows=len(found.queue),
        queue_vectors=found.queue_vectors,
        fts_rows=fts_rows(conn, found.rows),
    )
    applied = applied_seqs(conn)
    for col in collections:
        live = (live_ids(conn, col) | pending_ids(conn, col)) if col.metadata_segments else None
        for seg in col.vector_segments:
            h = read_hnsw(segment_folder(cfg.path, seg))
            if h is None:
                continue
            _keep, hc = classify(h, found.ids.get(col.id, set()), live)
            c.hnsw_subject += hc.subject
            c.hnsw_deleted += hc.tombstones + hc.unmapped
        c.queue_rows_of_deleted += queue_rows_of_deleted(conn, col, applied, found.queue)
    c.orphan_folders = len(orphan_folders(cfg.path, segment_ids(conn))) + swap_leftovers(cfg.path)
    return c


def _mentions(conn: apsw.Connection, cfg: ChromaConfig, subject: Subject) -> int:
    """Other people's records (or records of no one) whose document or metadata names the subject."""
    ident = Identity.of(subject)
    mine = set(resolve(conn, cfg, subject, collections_of(conn)).rows)
    hits: set[int] = set()
    for rid, value in conn.execute("SELECT id, string_value FROM embedding_metadata WHERE string_value IS NOT NULL"):
        if int(rid) not in mine and int(rid) not in hits and ident.found_in(str(value)):
            hits.add(int(rid))
    return len(hits)


def _check(cfg: ChromaConfig, collections: list[Collection]) -> None:
    check_segments(cfg.path, (s for col in collections for s in col.vector_segments))


class ChromaEraser:
    """The erasing side of kind `chroma` (see the package docstring)."""

    kind: ClassVar[str] = KIND
    tiers: ClassVar[tuple[Tier, ...]] = (Tier.episodic, Tier.vectors, Tier.derivatives)

    def check(self, target: Target) -> None:
        cfg = ChromaConfig.of(target)
        if cfg.path.exists() and not cfg.path.is_dir():
            raise ConfigError(f"targets: target {target.name!r} ({target.kind}): key 'path' must be a folder")

    def files(self, target: Target) -> list[Path]:
        cfg = ChromaConfig.of(target)
        return [cfg.path / DB_FILE, cfg.path]

    def count(self, target: Target, subject: Subject) -> dict[Tier, int]:
        cfg = ChromaConfig.of(target)
        conn = open_store(cfg)
        try:
            return retry_busy(lambda: _count(conn, cfg, subject), STORE).tiers()
        finally:
            conn.close()

    def mentions(self, target: Target, subject: Subject) -> int:
        cfg = ChromaConfig.of(target)
        conn = open_store(cfg)
        try:
            return retry_busy(lambda: _mentions(conn, cfg, subject), STORE)
        finally:
            conn.close()

    def erase(self, target: Target, subject: Subject) -> dict[Tier, TierOutcome]:
        cfg = ChromaConfig.of(target)
        conn = open_store(cfg)
        try:
            before = retry_busy(lambda: _count(conn, cfg, subject), STORE)
            collections = collections_of(conn)
            found = retry_busy(lambda: resolve(conn, cfg, subject, collections), STORE)
        finally:
            conn.close()
        _check(cfg, collections)  # before chromadb's delete, our SQL and any file
        api = api_delete(cfg, found, collections)
        conn = open_store(cfg)
        try:
            collections = collections_of(conn)
            _check(cfg, collections)
            again = retry_busy(lambda: resolve(conn, cfg, subject, collections, found.ids), STORE)
            detail: dict[str, int] = {"framework_api": int(api >= 0), "framework_api_deleted": max(api, 0)}
            detail |= retry_busy(lambda: sql_delete(conn, again, collections, Identity.of(subject)), STORE)
            detail |= retry_busy(lambda: rewrite_indexes(conn, cfg, again, collections), STORE)
            detail |= hygiene(conn)
            after = retry_busy(lambda: _count(conn, cfg, subject), STORE)
        finally:
            conn.close()
        shared = {k: v for k, v in detail.items() if v}
        b, a = before.tiers(), after.tiers()
        return {t: TierOutcome(before=b[t], after=a[t], detail={**before.detail(t), **shared}) for t in self.tiers}


ERASER = ChromaEraser()
