"""The erasure epoch of a `langgraph-postgres` target: a table `erasure_epoch` in the agent's own
database (the configured schema), so a `pg_dump`/`pg_basebackup` of that database carries the epoch it
had when the copy was taken, and a restore brings the old epoch back with the old rows (issue 26).

Same rows as the SQLite kinds (`erasure.epoch`): one per erasing request (idempotent), plus
`replay:<target>:<n>` rows a replay writes. Request ids and numbers only. The eraser advances it in the
SAME transaction as its deletes (`_delete` in `__init__.py`): a restore that undoes the deletes undoes
the epoch too, and a crash cannot leave the deletes committed without it. The table is locked (SHARE ROW
EXCLUSIVE: never taken by the agent) while an epoch is advanced, so two erasures never share a number.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from erasure.target_kinds.langgraph_postgres import PostgresTarget

TABLE = "erasure_epoch"


def _t(cfg: PostgresTarget) -> sql.Identifier:
    return sql.Identifier(cfg.schema, TABLE)


def _exists(conn: psycopg.Connection[Any], cfg: PostgresTarget) -> bool:
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (sql.Identifier(cfg.schema, TABLE).as_string(conn),)
    ).fetchone()
    return bool(row and row[0])


def ensure(conn: psycopg.Connection[Any], cfg: PostgresTarget) -> None:
    """Create the table when missing and lock it for the caller's transaction."""
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (request_id text PRIMARY KEY, epoch bigint NOT NULL, "
            "at timestamptz NOT NULL DEFAULT now())"
        ).format(_t(cfg))
    )
    conn.execute(sql.SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(_t(cfg)))


def current(conn: psycopg.Connection[Any], cfg: PostgresTarget) -> int:
    """The database's epoch: 0 when no erasure touched it (no table)."""
    if not _exists(conn, cfg):
        return 0
    row = conn.execute(sql.SQL("SELECT coalesce(max(epoch), 0) FROM {}").format(_t(cfg))).fetchone()
    return int(row[0]) if row else 0


def advance(conn: psycopg.Connection[Any], cfg: PostgresTarget, request_id: str) -> int:
    """Advance the epoch for `request_id`'s erasure, once (inside the caller's transaction)."""
    ensure(conn, cfg)
    row = conn.execute(sql.SQL("SELECT epoch FROM {} WHERE request_id = %s").format(_t(cfg)), (request_id,)).fetchone()
    if row is not None:
        return int(row[0])
    epoch = current(conn, cfg) + 1
    conn.execute(sql.SQL("INSERT INTO {} (request_id, epoch) VALUES (%s, %s)").format(_t(cfg)), (request_id, epoch))
    return epoch


def raise_to(conn: psycopg.Connection[Any], cfg: PostgresTarget, epoch: int, marker: str) -> int:
    """Bring the epoch up to at least `epoch` (a replay re-applied the ledger up to it)."""
    ensure(conn, cfg)
    if current(conn, cfg) < epoch:
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (request_id, epoch) VALUES (%s, %s) ON CONFLICT (request_id) DO UPDATE "
                "SET epoch = excluded.epoch, at = now()"
            ).format(_t(cfg)),
            (marker, epoch),
        )
    return current(conn, cfg)
