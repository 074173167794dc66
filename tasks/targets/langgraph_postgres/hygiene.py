"""Byte hygiene of a PostgreSQL cluster after an erasure's deletes, and what lies beyond its reach.

A `DELETE` leaves the rows' bytes in dead tuples (heap, TOAST, every index, the HNSW graph of pgvector)
and in the WAL. Measured on PostgreSQL 18 with LangGraph's PostgresStore + PostgresSaver: after the
framework's deletes the subject's email was still in `base/` 170 times; after `VACUUM` 134; after
`VACUUM FULL` + `CHECKPOINT` 0 in `base/` but every WAL segment written since still held it, and a
recycled segment kept it until it was overwritten. So, in order:

1. A rewrite of every touched table: a new file for the heap, its TOAST and every index, the old files
   truncated at commit and unlinked at the next checkpoint. Online where the server offers it
   (`REPACK (CONCURRENTLY)`, `pg_repack`: `online.py`), else `VACUUM (FULL)`, which takes an ACCESS EXCLUSIVE
   lock on the table for its duration: the agent's statements on that table wait (and a statement
   that waits longer than the agent's own `lock_timeout`/`statement_timeout` fails). We wait at most
   `lock_timeout_ms` for the lock (so a long agent transaction is not queued behind, blocking others
   for longer), then retry with a growing pause for up to `wait_seconds`.
2. Planner statistics: `pg_statistic` keeps sampled values (most common values, histogram bounds) of
   the tables' columns, namespaces and keys of the subject among them. When the touched tables have
   statistics we `ANALYZE` them again and `VACUUM (FULL)` `pg_statistic` (superuser, or MAINTAIN).
3. `CHECKPOINT`: dirty buffers written, the old relation files unlinked.
4. WAL: `pg_switch_wal()` + `CHECKPOINT` cycles. A switch fills the rest of the segment with zeros, a
   checkpoint removes or recycles the segments before its redo point; a recycled segment (renamed for
   reuse) still holds its old records until WAL is written over it. When the data directory is
   readable we search the segments after each cycle for the subject's identifiers and content (a
   plain byte search of our own, of the files that changed since the last cycle: the independent
   probe scans them all again through every decoded view) and stop when none holds them; without
   it, or with `wal_compression` on (a compressed full-page image hides the subject from a byte
   search), we run one cycle more than `pg_ls_waldir()` lists segments. Bounded by how many segments
   the server can hold (`max_wal_size` + `wal_keep_size` in `wal_segment_size` segments:
   `wal_limit`), never a constant a larger store runs out of; a target's `wal_cycles` overrides that
   limit. Reported (cycles, the limit, segments holding the subject before and after, segment files
   read) in the step record.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg import errors, sql

from erasure.errors import StoreError
from erasure.target_kinds.langgraph_postgres import PostgresTarget
from tasks.targets.langgraph_postgres import online, server_log, statements

T = TypeVar("T")
RETRYABLE = (errors.LockNotAvailable, errors.DeadlockDetected, errors.SerializationFailure, errors.QueryCanceled)


def retry_locked(cfg: PostgresTarget, fn: Callable[[], T], what: str) -> T:
    """Run `fn`, again while the agent holds a lock we waited `lock_timeout_ms` on (or a deadlock or
    serialisation failure), backing off up to `wait_seconds`; then `StoreError` (nothing is lost:
    a transaction that failed rolled back, and the step reruns)."""
    deadline = time.monotonic() + cfg.wait_seconds
    pause = 0.1
    attempts = 0
    while True:
        attempts += 1
        try:
            return fn()
        except RETRYABLE as exc:
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"langgraph-postgres: {what} stayed locked by another session for "
                    f"{cfg.wait_seconds:.0f} s ({attempts} attempts); nothing is lost: rerun the "
                    "step"
                ) from exc
            time.sleep(pause)
            pause = min(pause * 2, 2.0)


def connect(cfg: PostgresTarget, *, autocommit: bool) -> psycopg.Connection[Any]:
    """A connection to the target's cluster, waiting at most `lock_timeout_ms` on any lock."""
    try:
        conn = psycopg.connect(cfg.url, autocommit=autocommit, connect_timeout=15, application_name="erasure")
    except psycopg.OperationalError as exc:
        raise StoreError(f"langgraph-postgres: target {cfg.name!r}: cannot connect ({type(exc).__name__})") from exc
    conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(f"{cfg.lock_timeout_ms}ms")))
    if autocommit:
        return conn
    conn.commit()
    return conn


def _stat_tables(conn: psycopg.Connection[Any], schema: str, tables: list[str]) -> bool:
    row = conn.execute(
        # pg_stats, not pg_statistic: only a superuser may read the catalog; the view shows the owner's.
        "SELECT count(*) FROM pg_catalog.pg_stats WHERE schemaname = %s AND tablename = ANY(%s)",
        (schema, tables),
    ).fetchone()
    return bool(row and row[0])


def _run(cfg: PostgresTarget, conn: psycopg.Connection[Any], statement: sql.Composed, what: str) -> None:
    retry_locked(cfg, lambda: conn.execute(statement), what)


def rewrite(cfg: PostgresTarget, tables: list[str]) -> dict[str, int]:
    """Rewrite `tables` (in `cfg.schema`): online where the server offers it (`online.py`), else
    VACUUM FULL with its lock-out measured; statistics resampled where they exist; CHECKPOINT.
    Returns timings and flags (counts only) for the step record."""
    conn = connect(cfg, autocommit=True)
    try:
        left, out = online.rewrite_online(conn, cfg, tables, lambda fn, what: retry_locked(cfg, fn, what))
        if left and len(left) == len(tables):
            out["online_rewrite_unavailable" if cfg.online_rewrite else "online_rewrite_off"] = 1
        started = time.perf_counter()
        longest = 0
        for table in left:
            t0 = time.perf_counter()
            _run(
                cfg,
                conn,
                sql.SQL("VACUUM (FULL) {}").format(sql.Identifier(cfg.schema, table)),
                f"VACUUM FULL of {table}",
            )
            ms = int((time.perf_counter() - t0) * 1000)
            out[f"vacuum_full_{table}_ms"] = ms
            longest = max(longest, ms)
        if left:
            out["rewrite_by_vacuum_full"] = len(left)
            out["vacuum_full_ms"] = int((time.perf_counter() - started) * 1000)
            # While VACUUM FULL waits for and holds ACCESS EXCLUSIVE, every statement of the agent on
            # that table waits: the agent is locked out of one table at a time, each for its whole run.
            out["vacuum_full_lockout_longest_ms"] = longest
        out["statistics_rewritten"] = 0
        if tables and _stat_tables(conn, cfg.schema, tables):
            t0 = time.perf_counter()
            for table in tables:
                _run(cfg, conn, sql.SQL("ANALYZE {}").format(sql.Identifier(cfg.schema, table)), f"ANALYZE of {table}")
            # A role that may not VACUUM pg_statistic gets a WARNING and nothing done, not an error:
            # whether it was rewritten is read from its file.
            before = online.filenodes(conn, "pg_catalog", ["pg_statistic"])
            with contextlib.suppress(errors.InsufficientPrivilege):
                retry_locked(
                    cfg, lambda: conn.execute("VACUUM (FULL) pg_catalog.pg_statistic"), "VACUUM FULL of pg_statistic"
                )
            if online.filenodes(conn, "pg_catalog", ["pg_statistic"]) != before:
                out["statistics_rewritten"] = 1
            else:
                out["statistics_not_rewritten_no_privilege"] = 1
            out["statistics_ms"] = int((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        retry_locked(cfg, lambda: conn.execute("CHECKPOINT"), "CHECKPOINT")
        out["checkpoint_ms"] = int((time.perf_counter() - t0) * 1000)
        return out
    finally:
        conn.close()


def _segments(data_dir: Path) -> list[Path]:
    wal = data_dir / "pg_wal"
    return sorted(
        p for p in wal.iterdir() if p.is_file() and len(p.name) == 24 and all(c in "0123456789ABCDEF" for c in p.name)
    )


class WalScan:
    """Which WAL segment files hold any needle (case-insensitive bytes), each file read again only when
    it changed. A cycle writes over one recycled segment and into the current one; the checkpoint renames
    the others for reuse (same inode, same bytes, same mtime). Reading every segment every cycle was 95%
    of the WAL step at 100k items (59 cycles x up to 66 segments of 16 MB)."""

    def __init__(self, data_dir: Path, needles: Iterable[bytes]) -> None:
        self.data_dir = data_dir
        self.lows = [n.lower() for n in needles if n]
        self.reads = 0
        """Segment files read so far (the step record's `wal_segments_read`)."""
        self._seen: dict[tuple[int, int, int], bool] = {}

    def holding(self) -> int:
        """How many segment files hold a needle now."""
        seen: dict[tuple[int, int, int], bool] = {}
        for seg in _segments(self.data_dir):
            try:
                # stat before the read: a write after it changes the key, so the file is read again
                st = seg.stat()
                key = (st.st_ino, st.st_size, st.st_mtime_ns)
                hit = self._seen.get(key)
                if hit is None:
                    data = seg.read_bytes().lower()
                    self.reads += 1
                    hit = any(needle in data for needle in self.lows)
            except OSError:
                continue
            seen[key] = hit
        self._seen = seen
        return sum(seen.values())


_UNIT = re.compile(r"^(\d*)\s*(B|kB|MB|GB|TB)$")
_UNIT_BYTES = {"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def _setting_bytes(setting: str, unit: str | None) -> int:
    """A size setting of `pg_settings` (`setting` in `unit`, e.g. 1024 in MB, 16777216 in B) in bytes."""
    m = _UNIT.match(unit or "B")
    if m is None:
        raise StoreError(f"langgraph-postgres: unexpected unit {unit!r} of a WAL size setting")
    return int(setting) * int(m.group(1) or 1) * _UNIT_BYTES[m.group(2)]


def wal_limit(conn: psycopg.Connection[Any]) -> int:
    """How many segments the server can hold at once, so how many switch + CHECKPOINT cycles write over or
    remove every one of them: `max_wal_size` (recycled segments are kept up to it) plus `wal_keep_size`
    (kept after a checkpoint), in `wal_segment_size` segments, plus the segment being written and the one
    switched to."""
    rows = conn.execute(
        "SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s)",
        (["max_wal_size", "wal_keep_size", "wal_segment_size"],),
    ).fetchall()
    size = {str(name): _setting_bytes(str(setting), unit) for name, setting, unit in rows}
    segment = size.get("wal_segment_size") or 16 << 20
    held = size.get("max_wal_size", 1 << 30) + size.get("wal_keep_size", 0)
    return -(-held // segment) + 2


def _listed(conn: psycopg.Connection[Any]) -> int | None:
    try:
        row = conn.execute("SELECT count(*) FROM pg_ls_waldir()").fetchone()
    except errors.InsufficientPrivilege:
        return None
    return int(row[0]) if row else None


def wal_cycles(cfg: PostgresTarget, needles: list[bytes]) -> dict[str, int]:
    """Switch WAL segments and checkpoint until no segment holds a needle (data directory readable and WAL
    not compressed), else once more than there are segments (each cycle writes over or removes one); at
    most the limit derived from the server's settings (`wal_limit`), or `cfg.wal_cycles` when the target
    sets it. Counts only."""
    conn = connect(cfg, autocommit=True)
    try:
        readable = cfg.data_dir_readable() and cfg.data_dir is not None
        row = conn.execute("SELECT current_setting('wal_compression')").fetchone()
        # Compressed full-page images hold the subject where a byte search cannot see it: the search
        # cannot tell when to stop, so every segment is cycled out.
        compressed = row is not None and str(row[0]) != "off"
        listed = _listed(conn)
        # max_wal_size is a soft limit (a burst of writes, a slot, wal_keep_size can keep more): never
        # fewer cycles than segments are there now.
        limit = cfg.wal_cycles if cfg.wal_cycles is not None else max(wal_limit(conn), (listed or 0) + 1)
        out: dict[str, int] = {
            "wal_data_dir_readable": int(readable),
            "wal_compression_on": int(compressed),
            "wal_cycles_limit": limit,
            "wal_cycles_limit_explicit": int(cfg.wal_cycles is not None),
        }
        scan = WalScan(cfg.data_dir, needles) if readable and cfg.data_dir is not None else None
        if scan is not None:
            holding = scan.holding()
            out["wal_segments_with_subject_before"] = holding
        else:
            holding = 1
        target = limit if readable and not compressed else min(limit, listed + 1 if listed is not None else limit)
        started = time.perf_counter()
        cycles = 0
        while cycles < target and (holding or compressed):
            conn.execute("SELECT pg_switch_wal()")
            retry_locked(cfg, lambda: conn.execute("CHECKPOINT"), "CHECKPOINT")
            cycles += 1
            if scan is not None and (not compressed or cycles == target):  # compressed: the search cannot stop it
                holding = scan.holding()
        out["wal_cycles"] = cycles
        out["wal_cycles_ms"] = int((time.perf_counter() - started) * 1000)
        if scan is not None:
            out["wal_segments_with_subject_after"] = holding
            out["wal_segments_read"] = scan.reads
        return out
    finally:
        conn.close()


def beyond_reach(cfg: PostgresTarget) -> list[dict[str, Any]]:
    """What holds copies of the cluster's WAL or data that the erasure cannot rewrite: WAL archiving,
    streaming standbys, replication slots, logical subscriptions, a server log the verification cannot
    read (`server_log`). Each: `what` (a stable key), `detail`
    (counts and settings, no data) and `ground` (what the team must do)."""
    conn = connect(cfg, autocommit=True)
    try:

        def one(query: str) -> Any:
            row = conn.execute(query).fetchone()
            return row[0] if row else None

        out: list[dict[str, Any]] = []
        mode = str(one("SELECT current_setting('archive_mode')"))
        if mode != "off":
            command = one("SELECT current_setting('archive_command', true)") or ""
            library = one("SELECT current_setting('archive_library', true)") or ""
            archived = one("SELECT archived_count FROM pg_stat_archiver")
            out.append(
                {
                    "what": "wal_archive",
                    "detail": {
                        "archive_mode": mode,
                        "archiver": "library" if library else "command" if command else "none",
                        "segments_archived": int(archived or 0),
                    },
                    "ground": "WAL archiving is on: the segments written before the erasure, which hold the subject, "
                    "were copied to the archive (and base backups taken before it hold the data): delete "
                    "those segments and backups in the archive, or record the archive's retention as the "
                    "date the copies expire",
                }
            )
        standbys = int(one("SELECT count(*) FROM pg_stat_replication") or 0)
        if standbys:
            out.append(
                {
                    "what": "streaming_replicas",
                    "detail": {"standbys": standbys},
                    "ground": "standbys stream this cluster's WAL: they replay the erasure's deletes and VACUUM "
                    "FULL, but their own pg_wal and any archive of theirs keep the old records: on each "
                    "standby, once it has replayed past the erasure, run CHECKPOINT and scan its data "
                    "directory (a langgraph-postgres target with its own data_dir and url), or rebuild "
                    "it with pg_basebackup",
                }
            )
        slots = conn.execute("SELECT slot_type, count(*) FROM pg_replication_slots GROUP BY slot_type").fetchall()
        if slots:
            out.append(
                {
                    "what": "replication_slots",
                    "detail": {f"{t}_slots": int(n) for t, n in slots},
                    "ground": "replication slots retain WAL from their restart point on, so segments holding "
                    "the subject may not be recycled until every slot's consumer has advanced; a "
                    "logical slot's consumer has received the subject's changes: erase them there "
                    "too, or drop unused slots",
                }
            )
        for entry in (server_log.declaration(cfg, conn), statements.declaration(conn)):
            if entry is not None:
                out.append(entry)
        subs = int(one("SELECT count(*) FROM pg_subscription") or 0)
        pubs = int(one("SELECT count(*) FROM pg_publication") or 0)
        if subs or pubs:
            out.append(
                {
                    "what": "logical_replication",
                    "detail": {"subscriptions": subs, "publications": pubs},
                    "ground": "logical replication copies rows between clusters: a publication's subscribers "
                    "hold the subject's rows in their own tables, and a subscription's publisher is "
                    "where they came from: make each of those clusters a target of its own",
                }
            )
        return out
    finally:
        conn.close()
