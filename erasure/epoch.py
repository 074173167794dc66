"""A store's erasure epoch: a counter inside the store that every completed erasure advances.

The table `erasure_epoch` lives in the store's own database (the reference store's `memory.db`; a
framework store's main SQLite file, see `tasks/epochs.py`), so a backup of the store carries the epoch
the store had when it was taken, and a restore brings that old epoch back. The engine's ledger
(`erasure.ledger`) records, per target, the epoch each erasure brought the store to: a store whose
epoch is behind the ledger's has been restored from a copy older than its last erasure.

One row per erasing request (idempotent: a rerun advances nothing), plus `replay:` rows a replay
writes when it has re-applied the ledger's entries up to an epoch. Request ids and numbers only.
"""

from __future__ import annotations

from datetime import UTC, datetime

import apsw

EPOCH_SQL = """
CREATE TABLE IF NOT EXISTS erasure_epoch(
  request_id TEXT PRIMARY KEY,          -- the erasing request, or 'replay:<target>:<n>'
  epoch      INTEGER NOT NULL,
  at         TEXT NOT NULL
) WITHOUT ROWID;
"""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def ensure(conn: apsw.Connection) -> None:
    """Create the table when missing (inside the caller's transaction, if any)."""
    conn.execute(EPOCH_SQL)


def current(conn: apsw.Connection) -> int:
    """The store's epoch: 0 for a store no erasure has touched (or one made before epochs)."""
    has = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'erasure_epoch'").fetchone()
    if has is None:
        return 0
    row = conn.execute("SELECT coalesce(max(epoch), 0) FROM erasure_epoch").fetchone()
    return int(row[0]) if row else 0


def of_request(conn: apsw.Connection, request_id: str) -> int | None:
    """The epoch `request_id`'s erasure brought the store to, or None when it has not touched it."""
    has = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'erasure_epoch'").fetchone()
    if has is None:
        return None
    row = conn.execute("SELECT epoch FROM erasure_epoch WHERE request_id = ?", (request_id,)).fetchone()
    return None if row is None else int(row[0])


def advance(conn: apsw.Connection, request_id: str) -> int:
    """Advance the epoch for `request_id`'s erasure, once (call inside the transaction of its deletions).
    Returns the epoch of that erasure."""
    ensure(conn)
    known = of_request(conn, request_id)
    if known is not None:
        return known
    epoch = current(conn) + 1
    conn.execute("INSERT INTO erasure_epoch(request_id, epoch, at) VALUES (?, ?, ?)", (request_id, epoch, _now()))
    return epoch


def raise_to(conn: apsw.Connection, epoch: int, marker: str) -> int:
    """Bring the epoch up to at least `epoch` (a replay that re-applied the ledger up to it). The marker
    row is written even when the store is already past `epoch` (the replay's own erasure advanced it):
    it is what accounts for the ledger's entry in the store (`tasks.epochs`)."""
    ensure(conn)
    conn.execute(
        "INSERT OR REPLACE INTO erasure_epoch(request_id, epoch, at) VALUES (?, ?, ?)", (marker, epoch, _now())
    )
    return current(conn)


def rows(conn: apsw.Connection) -> dict[str, int]:
    """Every row of the store's epoch table: request id (or replay marker) -> epoch."""
    has = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'erasure_epoch'").fetchone()
    if has is None:
        return {}
    return {str(r): int(str(e)) for r, e in conn.execute("SELECT request_id, epoch FROM erasure_epoch")}
