"""Kind `langgraph-postgres`: LangGraph's `PostgresStore` (long-term memory, with its pgvector index in
`store_vectors`) and `PostgresSaver` (threads: `checkpoints`, `checkpoint_blobs`, `checkpoint_writes`),
in a team's PostgreSQL cluster, erased by SQL (configuration: `erasure/postgres_target.py`).

Whose is an item or a thread (as for `langgraph-sqlite`): an item is the subject's when any label of its
namespace, or its key, IS a spelling of their id (the whole label, after NFKC and case folding); a
thread is the subject's when any checkpoint's metadata has a top-level value that is their id, under
any key but LangGraph's own. The configured prefixes and keys decide the tier and tell what nobody
configured (counted in the step record).

Why SQL and not the framework's API: `PostgresStore.delete` is `DELETE FROM store WHERE prefix = ? AND
key = ?` (its vectors go by `ON DELETE CASCADE`), `delete_thread` three deletes by thread id; opening
the team's database with our LangGraph would run OUR migrations (`setup()`) on THEIR schema. So this
module never imports LangGraph: in one transaction per target (READ COMMITTED; every statement waits at
most `lock_timeout_ms` on the agent's row locks, and the whole transaction is retried while it cannot
get them) it resolves the subject's namespaces, items and threads and deletes their vectors, items,
writes, blobs and checkpoints, and advances the database's erasure epoch (`epoch.py`, issue 26).
Then the byte hygiene of `hygiene.py` beside it (VACUUM FULL,
statistics, CHECKPOINT, `pg_stat_statements` texts naming the subject: `statements.py`, WAL cycles)
on every run, also when nothing was found: a rerun after a crash
between the deletes and the rewrite must still remove the bytes. Other people's items and threads that
name the subject are counted (`mentions`), never changed. What the erasure cannot reach (WAL archive,
standbys, replication slots, logical replication, a server log that may name the subject and cannot be
read: `server_log.py`) is returned by `beyond_reach` and becomes an
exception in the pack.
"""

from __future__ import annotations

import json
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import psycopg
from psycopg import sql

from erasure.errors import StoreError
from erasure.identity import Identity, fold
from erasure.subject import Subject
from erasure.target_kinds.langgraph_postgres import PostgresTarget, postgres_target
from erasure.targets import Target
from erasure.tiers import Tier
from tasks.mentions import Prefilter
from tasks.targets.eraser import TierOutcome
from tasks.targets.langgraph_postgres import epoch as pg_epoch
from tasks.targets.langgraph_postgres import hygiene as pg_hygiene
from tasks.targets.langgraph_postgres import server_log, statements
from tasks.targets.langgraph_sqlite.namespaces import NamespaceMatcher, names_subject

KIND = "langgraph-postgres"
ITEM_TABLES = ("store_vectors", "store")
"""Keyed by (prefix, key); vectors first (no cascade is relied on)."""
THREAD_TABLES = ("checkpoint_writes", "checkpoint_blobs", "checkpoints")
MIN_CONTENT = 16
MAX_CONTENT = 400


@dataclass
class _Found:
    """The subject's records, resolved inside the erasing transaction (or a read-only one)."""

    prefixes: dict[str, Tier] = field(default_factory=dict)
    keyed: list[tuple[str, str]] = field(default_factory=list)
    """Items elsewhere whose key is the subject's id (`store.put(("profiles",), user_id, ...)`)."""
    threads: dict[str, bool] = field(default_factory=dict)
    """thread id -> whether a configured metadata key names the subject."""
    items: dict[Tier, int] = field(default_factory=lambda: {Tier.episodic: 0, Tier.semantic: 0})
    vectors: int = 0
    thread_rows: dict[str, int] = field(default_factory=dict)
    unconfigured_items: int = 0
    content: list[bytes] = field(default_factory=list)
    vector_pieces: list[bytes] = field(default_factory=list)
    """Bytes of the subject's embeddings as PostgreSQL writes them (heap, index pages, WAL)."""


def _tables(conn: psycopg.Connection[Any], schema: str) -> set[str]:
    rows = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))
    return {str(r[0]) for r in rows}


def _t(cfg: PostgresTarget, table: str) -> sql.Identifier:
    return sql.Identifier(cfg.schema, table)


def _item_where(found: _Found) -> tuple[sql.Composable, tuple[Any, ...]]:
    return (
        sql.SQL("(prefix = ANY(%s) OR (prefix, key) IN (SELECT * FROM unnest(%s::text[], %s::text[])))"),
        (list(found.prefixes), [p for p, _k in found.keyed], [k for _p, k in found.keyed]),
    )


def _leaves(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _leaves(v)]
    if isinstance(value, list):
        return [s for v in value for s in _leaves(v)]
    return []


def _resolve(conn: psycopg.Connection[Any], cfg: PostgresTarget, subject: Subject) -> _Found:
    """The subject's namespaces, keyed items and threads, with counts (inside the caller's transaction)."""
    matcher = NamespaceMatcher(cfg.namespaces, cfg.episodic, subject)
    tables = _tables(conn, cfg.schema)
    found = _Found()
    items = [t for t in ITEM_TABLES if t in tables]
    for table in items:
        for (prefix,) in conn.execute(sql.SQL("SELECT DISTINCT prefix FROM {}").format(_t(cfg, table))):
            tier = matcher.tier(str(prefix))
            if tier is not None:
                found.prefixes[str(prefix)] = tier
        for prefix, key in conn.execute(
            sql.SQL("SELECT DISTINCT prefix, key FROM {} WHERE lower(key) = lower(%s) OR key ILIKE %s").format(
                _t(cfg, table)
            ),
            (subject.id, subject.id),
        ):
            if (
                str(prefix) not in found.prefixes
                and fold(str(key)) == matcher.want
                and (str(prefix), str(key)) not in found.keyed
            ):
                found.keyed.append((str(prefix), str(key)))
    if found.prefixes or found.keyed:
        where, args = _item_where(found)
        if "store" in tables:
            for prefix, value in conn.execute(
                sql.SQL("SELECT prefix, value FROM {} WHERE ").format(_t(cfg, "store")) + where, args
            ):
                tier = found.prefixes.get(str(prefix), Tier.semantic)
                found.items[tier] += 1
                if str(prefix) not in found.prefixes or matcher.unconfigured(str(prefix)):
                    found.unconfigured_items += 1
                for text in _leaves(value):
                    if len(text) >= MIN_CONTENT and len(found.content) < MAX_CONTENT:
                        found.content.append(text[:48].encode())
        if "store_vectors" in tables:
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE ").format(_t(cfg, "store_vectors")) + where, args
            ).fetchone()
            found.vectors = int(row[0]) if row else 0
            found.vector_pieces = _vector_pieces(conn, cfg, where, args)
    if "checkpoints" in tables:
        want = fold(subject.id)
        for tid, meta in conn.execute(
            sql.SQL(
                "SELECT thread_id, metadata FROM {} WHERE EXISTS (SELECT 1 FROM jsonb_each_text(metadata) e "
                "WHERE lower(e.value) = lower(%s) OR e.value ILIKE %s)"
            ).format(_t(cfg, "checkpoints")),
            (subject.id, subject.id),
        ):
            keys = names_subject(meta, want)
            if keys:
                found.threads[str(tid)] = found.threads.get(str(tid), False) or bool(keys & set(cfg.thread_keys))
        for table in (t for t in THREAD_TABLES if t in tables):
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE thread_id = ANY(%s)").format(_t(cfg, table)),
                (list(found.threads),),
            ).fetchone()
            found.thread_rows[table] = int(row[0]) if row else 0
    return found


VECTOR_FORMATS = {"vector": "<f", "halfvec": "<e"}
"""pgvector's dense types and the struct format of one element as they store it (little-endian here)."""
MAX_VECTOR_NEEDLES = 64
VECTOR_PIECE_BYTES = 64


def _vector_pieces(
    conn: psycopg.Connection[Any], cfg: PostgresTarget, where: sql.Composable, args: tuple[Any, ...]
) -> list[bytes]:
    """A head and a tail piece of up to `MAX_VECTOR_NEEDLES` of the subject's embeddings, as stored.

    Why: an index build (`pg_restore` creates the HNSW index after loading the rows, `REINDEX`) writes
    the vectors to the WAL in index pages that hold no identifier and no text, so a WAL segment can hold
    the subject's vectors alone; two pieces, because a WAL page header can split a record."""
    row = conn.execute(
        "SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'embedding'",
        (f"{cfg.schema}.store_vectors",),
    ).fetchone()
    fmt = VECTOR_FORMATS.get(str(row[0]).split("(")[0]) if row else None
    if fmt is None:
        return []
    out: list[bytes] = []
    query = sql.SQL("SELECT embedding::real[] FROM {} WHERE ").format(_t(cfg, "store_vectors")) + where
    for (floats,) in conn.execute(query + sql.SQL(" LIMIT {}").format(MAX_VECTOR_NEEDLES), args):
        data = struct.pack(f"{fmt[0]}{len(floats)}{fmt[1]}", *floats)
        if len(data) >= 2 * VECTOR_PIECE_BYTES:
            out += [data[:VECTOR_PIECE_BYTES], data[-VECTOR_PIECE_BYTES:]]
    return out


def _delete(
    conn: psycopg.Connection[Any], cfg: PostgresTarget, subject: Subject, request_id: str | None = None
) -> tuple[_Found, dict[str, int]]:
    """One transaction: resolve, then delete vectors, items, writes, blobs, checkpoints, and advance the
    database's erasure epoch for `request_id` (`epoch.py`) in that same transaction."""
    removed: dict[str, int] = {}
    with conn.transaction():
        if request_id is not None:
            pg_epoch.advance(conn, cfg, request_id)
        found = _resolve(conn, cfg, subject)
        tables = _tables(conn, cfg.schema)
        if found.prefixes or found.keyed:
            where, args = _item_where(found)
            for table in (t for t in ITEM_TABLES if t in tables):
                cur = conn.execute(sql.SQL("DELETE FROM {} WHERE ").format(_t(cfg, table)) + where, args)
                removed[table] = cur.rowcount
        if found.threads:
            for table in (t for t in THREAD_TABLES if t in tables):
                cur = conn.execute(
                    sql.SQL("DELETE FROM {} WHERE thread_id = ANY(%s)").format(_t(cfg, table)), (list(found.threads),)
                )
                removed[table] = cur.rowcount
    return found, removed


def _measure(cfg: PostgresTarget, subject: Subject) -> _Found:
    conn = pg_hygiene.connect(cfg, autocommit=False)
    try:
        with conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            return _resolve(conn, cfg, subject)
    finally:
        conn.close()


def _needles(subject: Subject, found: _Found) -> list[bytes]:
    """What the WAL cycles look for: the subject's identifiers as written, heads of their items, and
    pieces of their vectors."""
    out = [s.encode() for s in (subject.id, subject.email, subject.name, subject.phone) if s]
    if subject.phone:
        out.append("".join(c for c in subject.phone if c.isdigit()).encode())
    return [n for n in dict.fromkeys([*out, *found.content, *found.vector_pieces]) if len(n) >= 6]


def _reset_statements(cfg: PostgresTarget, needles: list[bytes]) -> dict[str, int]:
    conn = pg_hygiene.connect(cfg, autocommit=True)
    try:
        return statements.reset(cfg, conn, needles)
    finally:
        conn.close()


def _rewrite_logs(cfg: PostgresTarget, needles: list[bytes]) -> dict[str, int]:
    conn = pg_hygiene.connect(cfg, autocommit=True)
    try:
        return server_log.rewrite(cfg, conn, needles)
    finally:
        conn.close()


def _store_mentions(conn: psycopg.Connection[Any], cfg: PostgresTarget, found: _Found, identity: Identity) -> int:
    """Other people's items whose value names the subject by the rule (docs/matching.md), every item read:
    a literal `ILIKE` first missed a spelling the rule reads (an address with soft hyphens, a note pasted
    as base64), which the probes' views then found after every erasure. The items are read a batch at a
    time through a server-side cursor, and the rule runs only on those the erasing side's prefilter lets
    through (`tasks.mentions.Prefilter`: every text naming the subject, and more)."""
    prefilter = Prefilter([identity])
    n = 0
    with conn.cursor(name="erasure_mentions") as cur:
        cur.itersize = MENTION_BATCH
        cur.execute(sql.SQL("SELECT prefix, key, value::text FROM {}").format(_t(cfg, "store")))
        while batch := cur.fetchmany(MENTION_BATCH):
            texts = [
                None if str(prefix) in found.prefixes or (str(prefix), str(key)) in found.keyed else str(text)
                for prefix, key, text in batch
            ]
            # the value as LangGraph wrote it (jsonb's text form escapes what JSON must: the prefilter,
            # which takes an escape for a candidate, sees it as it is)
            for i in prefilter.candidates(texts)[0]:
                n += identity.found_in(json.dumps(json.loads(texts[i] or "null"), ensure_ascii=False)) is not None
    return n


MENTION_BATCH = 10_000
"""Store rows read at a time when counting mentions."""


class LangGraphPostgresEraser:
    """The erasing side of kind `langgraph-postgres` (see the module docstring)."""

    kind: ClassVar[str] = KIND
    tiers: ClassVar[tuple[Tier, ...]] = (Tier.working, Tier.episodic, Tier.semantic, Tier.vectors)

    def check(self, target: Target) -> None:
        postgres_target(target)

    def files(self, target: Target) -> list[Path]:
        cfg = postgres_target(target)
        return [cfg.data_dir] if cfg.data_dir is not None else []

    def count(self, target: Target, subject: Subject) -> dict[Tier, int]:
        f = _measure(postgres_target(target), subject)
        return {
            Tier.working: len(f.threads),
            Tier.episodic: f.items[Tier.episodic],
            Tier.semantic: f.items[Tier.semantic],
            Tier.vectors: f.vectors,
        }

    def erase(self, target: Target, subject: Subject, request_id: str | None = None) -> dict[Tier, TierOutcome]:
        """Erase (see the module docstring); with `request_id`, the erasure epoch advances in the deletes'
        transaction."""
        cfg = postgres_target(target)
        conn = pg_hygiene.connect(cfg, autocommit=False)
        try:
            if conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,):
                raise StoreError(
                    f"langgraph-postgres: target {cfg.name!r} is a standby (read-only): point its url at the primary"
                )
            conn.commit()
            t0 = time.perf_counter()
            before, removed = pg_hygiene.retry_locked(
                cfg, lambda: _delete(conn, cfg, subject, request_id), "the deletes"
            )
            delete_ms = int((time.perf_counter() - t0) * 1000)
            present = _tables(conn, cfg.schema)
            conn.commit()
        finally:
            conn.close()
        rewritten = pg_hygiene.rewrite(cfg, [t for t in (*ITEM_TABLES, *THREAD_TABLES) if t in present])
        stats = _reset_statements(cfg, _needles(subject, before))
        wal = pg_hygiene.wal_cycles(cfg, _needles(subject, before))
        logs = _rewrite_logs(cfg, _needles(subject, before)) if cfg.rewrite_logs else {}
        after = _measure(cfg, subject)
        hygiene = {"delete_ms": delete_ms, **rewritten, **stats, **wal, **logs}
        return {
            Tier.working: TierOutcome(
                len(before.threads),
                len(after.threads),
                {
                    "threads": len(before.threads),
                    **{f"{t}_rows": n for t, n in before.thread_rows.items()},
                    **{f"deleted_{t}_rows": removed.get(t, 0) for t in THREAD_TABLES if t in before.thread_rows},
                    "threads_under_unconfigured_metadata_keys": sum(1 for c in before.threads.values() if not c),
                },
            ),
            Tier.episodic: TierOutcome(
                before.items[Tier.episodic], after.items[Tier.episodic], {"items": before.items[Tier.episodic]}
            ),
            Tier.semantic: TierOutcome(
                before.items[Tier.semantic],
                after.items[Tier.semantic],
                {
                    "items": before.items[Tier.semantic],
                    "namespaces": len(before.prefixes),
                    "items_keyed_by_subject_id": len(before.keyed),
                    "items_under_unconfigured_layouts": before.unconfigured_items,
                    **hygiene,
                },
            ),
            Tier.vectors: TierOutcome(
                before.vectors,
                after.vectors,
                {"vectors": before.vectors, "deleted_store_vectors_rows": removed.get("store_vectors", 0)},
            ),
        }

    def mentions(self, target: Target, subject: Subject) -> int:
        """Other people's items and threads whose text names the subject (counted, never changed)."""
        cfg = postgres_target(target)
        identity = Identity.of(subject)
        literals = [s for s in (subject.email, subject.name, subject.id) if s]
        conn = pg_hygiene.connect(cfg, autocommit=False)
        try:
            with conn.transaction():
                conn.execute("SET TRANSACTION READ ONLY")
                found = _resolve(conn, cfg, subject)
                tables = _tables(conn, cfg.schema)
                n = 0
                if "store" in tables:
                    n += _store_mentions(conn, cfg, found, identity)
                threads: set[str] = set()
                raw = [s.encode() for s in literals]
                for table, column in (
                    ("checkpoints", "checkpoint::text::bytea"),
                    ("checkpoint_blobs", "blob"),
                    ("checkpoint_writes", "blob"),
                ):
                    if table not in tables:
                        continue
                    for (tid,) in conn.execute(
                        sql.SQL(
                            "SELECT DISTINCT thread_id FROM {} WHERE EXISTS (SELECT 1 FROM"
                            " unnest(%s::bytea[]) n WHERE position(n IN {}) > 0)"
                        ).format(_t(cfg, table), sql.SQL(column)),
                        (raw,),
                    ):
                        if str(tid) not in found.threads:
                            threads.add(str(tid))
                return n + len(threads)
        finally:
            conn.close()

    # --- the erasure epoch (issue 26; `epoch.py`), read and raised by `tasks/epochs.py` ---------------

    def epoch_current(self, target: Target) -> int:
        """The database's epoch. The table is made on first read, so a backup taken after the target was
        first checked carries it, and a `pg_restore --clean` of that backup brings its old rows back."""
        cfg = postgres_target(target)
        conn = pg_hygiene.connect(cfg, autocommit=False)
        try:
            with conn.transaction():
                missing = conn.execute(
                    "SELECT pg_is_in_recovery() = false AND to_regclass(%s) IS NULL",
                    (sql.Identifier(cfg.schema, pg_epoch.TABLE).as_string(conn),),
                ).fetchone()
            if missing and missing[0]:
                pg_hygiene.retry_locked(cfg, lambda: self._create(conn, cfg), "the erasure epoch")
            with conn.transaction():
                conn.execute("SET TRANSACTION READ ONLY")
                return pg_epoch.current(conn, cfg)
        finally:
            conn.close()

    @staticmethod
    def _create(conn: psycopg.Connection[Any], cfg: PostgresTarget) -> None:
        with conn.transaction():
            pg_epoch.ensure(conn, cfg)

    def _epoch_write(self, target: Target, fn: Any, what: str) -> int:
        cfg = postgres_target(target)
        conn = pg_hygiene.connect(cfg, autocommit=False)
        try:

            def once() -> int:
                with conn.transaction():
                    return int(fn(conn, cfg))

            return pg_hygiene.retry_locked(cfg, once, what)
        finally:
            conn.close()

    def epoch_advance(self, target: Target, request_id: str) -> int:
        return self._epoch_write(target, lambda c, cfg: pg_epoch.advance(c, cfg, request_id), "the erasure epoch")

    def epoch_raise(self, target: Target, to: int, marker: str) -> int:
        return self._epoch_write(target, lambda c, cfg: pg_epoch.raise_to(c, cfg, to, marker), "the erasure epoch")

    def replay_strings(self, target: Target) -> list[str]:
        """What a replay looks for a ledger entry's subject in (`tasks/replay_find.py`): every namespace,
        key and top-level checkpoint metadata value (in memory only)."""
        cfg = postgres_target(target)
        conn = pg_hygiene.connect(cfg, autocommit=False)
        try:
            with conn.transaction():
                conn.execute("SET TRANSACTION READ ONLY")
                tables = _tables(conn, cfg.schema)
                out: list[str] = []
                if "store" in tables:
                    out += [
                        str(v)
                        for r in conn.execute(sql.SQL("SELECT DISTINCT prefix, key FROM {}").format(_t(cfg, "store")))
                        for v in r
                    ]
                if "checkpoints" in tables:
                    out += [
                        str(r[0])
                        for r in conn.execute(
                            sql.SQL("SELECT DISTINCT e.value FROM {}, jsonb_each_text(metadata) e").format(
                                _t(cfg, "checkpoints")
                            )
                        )
                    ]
                return out
        finally:
            conn.close()

    def beyond_reach(self, target: Target) -> list[dict[str, Any]]:
        """WAL archive, standbys, replication slots, logical replication, an unread server log: declared,
        never erased."""
        return pg_hygiene.beyond_reach(postgres_target(target))


ERASER = LangGraphPostgresEraser()
