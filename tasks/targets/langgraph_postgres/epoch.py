"""The erasure epoch of a `langgraph-postgres` target: a table `erasure_epoch` in the agent's own
database (the configured schema), so a `pg_dump`/`pg_basebackup` of that database carries the epoch it
had when the copy was taken, and a restore brings the old epoch back with the old rows (issue 26).

Same rows as the SQLite kinds (`erasure.epoch`): one per erasing request (idempotent), plus
`replay:<target>:<n>` rows a replay writes. Request ids and numbers only. The eraser advances it in the
SAME transaction as its deletes (`_delete` in `__init__.py`): a restore that undoes the deletes undoes
the epoch too, and a crash cannot leave the deletes committed without it. The table is locked (SHARE ROW
EXCLUSIVE: never taken by the agent) while an epoch is advanced, so two erasures never share a number.

Each row also records the OIDs of the agent's tables it was written with (`VOUCHED`). `pg_restore
--clean` into the live database drops and recreates only what the dump holds: a dump older than this
table leaves the table, and its epoch, in place while the rows come back. Recreated tables have new
OIDs, so the latest row no longer vouches for them, and the database's epoch reads as 0 (restored)
until a replay writes a row for the tables as they are.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from erasure.target_kinds.langgraph_postgres import PostgresTarget

TABLE = "erasure_epoch"
VOUCHED = ("store", "checkpoints")
"""The agent's tables an epoch row vouches for (by OID): LangGraph's item and thread tables."""


def _t(cfg: PostgresTarget) -> sql.Identifier:
    return sql.Identifier(cfg.schema, TABLE)


def _exists(conn: psycopg.Connection[Any], cfg: PostgresTarget) -> bool:
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (sql.Identifier(cfg.schema, TABLE).as_string(conn),)
    ).fetchone()
    return bool(row and row[0])


def ensure(conn: psycopg.Connection[Any], cfg: PostgresTarget) -> None:
    """Create the table when missing (add the `tables` column to an older one) and lock it for the
    caller's transaction."""
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (request_id text PRIMARY KEY, epoch bigint NOT NULL, "
            "at timestamptz NOT NULL DEFAULT now(), tables jsonb)"
        ).format(_t(cfg))
    )
    conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS tables jsonb").format(_t(cfg)))
    conn.execute(sql.SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(_t(cfg)))


def _oids(conn: psycopg.Connection[Any], cfg: PostgresTarget) -> dict[str, int]:
    """The OIDs of the agent's `VOUCHED` tables that exist now."""
    rows = conn.execute(
        "SELECT c.relname, c.oid::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = ANY(%s) AND c.relkind IN ('r', 'p')",
        (cfg.schema, list(VOUCHED)),
    ).fetchall()
    return {str(name): int(oid) for name, oid in rows}


def _highest(conn: psycopg.Connection[Any], cfg: PostgresTarget) -> int:
    row = conn.execute(sql.SQL("SELECT coalesce(max(epoch), 0) FROM {}").format(_t(cfg))).fetchone()
    return int(row[0]) if row else 0


def current(conn: psycopg.Connection[Any], cfg: PostgresTarget) -> int:
    """The database's epoch: 0 when no erasure touched it (no table), or when the tables the latest row
    vouches for are not the tables there now (recreated by a restore)."""
    if not _exists(conn, cfg):
        return 0
    has_tables = conn.execute(
        "SELECT 1 FROM information_schema.columns"
        " WHERE table_schema = %s AND table_name = %s AND column_name = 'tables'",
        (cfg.schema, TABLE),
    ).fetchone()
    if has_tables:
        row = conn.execute(
            sql.SQL("SELECT tables FROM {} ORDER BY at DESC, epoch DESC LIMIT 1").format(_t(cfg))
        ).fetchone()
        vouched = row[0] if row and isinstance(row[0], dict) else {}
        now = _oids(conn, cfg)
        if any(now.get(name) != oid for name, oid in vouched.items()):
            return 0
    return _highest(conn, cfg)


def advance(conn: psycopg.Connection[Any], cfg: PostgresTarget, request_id: str) -> int:
    """Advance the epoch for `request_id`'s erasure, once (inside the caller's transaction)."""
    ensure(conn, cfg)
    row = conn.execute(sql.SQL("SELECT epoch FROM {} WHERE request_id = %s").format(_t(cfg)), (request_id,)).fetchone()
    if row is not None:
        return int(row[0])
    epoch = _highest(conn, cfg) + 1
    conn.execute(
        sql.SQL("INSERT INTO {} (request_id, epoch, tables) VALUES (%s, %s, %s)").format(_t(cfg)),
        (request_id, epoch, Jsonb(_oids(conn, cfg))),
    )
    return epoch


def raise_to(conn: psycopg.Connection[Any], cfg: PostgresTarget, epoch: int, marker: str) -> int:
    """Bring the epoch up to at least `epoch` (a replay re-applied the ledger up to it), vouching for
    the tables as they are now."""
    ensure(conn, cfg)
    if current(conn, cfg) < epoch:
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (request_id, epoch, tables) VALUES (%s, %s, %s) ON CONFLICT (request_id) DO UPDATE "
                "SET epoch = excluded.epoch, at = now(), tables = excluded.tables"
            ).format(_t(cfg)),
            (marker, max(epoch, _highest(conn, cfg)), Jsonb(_oids(conn, cfg))),
        )
    return current(conn, cfg)
