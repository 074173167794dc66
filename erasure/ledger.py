"""The ledger of erasures: what every completed erasure did to every target, kept outside every store.

`<home>/ledger/erasures.db`, a database of its own: not the store (a restore of the store must not
take it back), not the engine database's vault (a request's retention purge must not take it away).
Per completed erasure and target, one entry: the request id, the time, the epoch the erasure brought
the store to (`erasure.epoch`), the keyed hashes of the subject's normalised identifiers
(`HMAC-SHA256(ledger key, "<kind>:<normal form>")`, kinds id, email, name, phone; the key is
`keys/ledger.key`, 0600, never in a pack), the keyed hashes of the subject's store ids and of the
source keys of their items, and the store's own sticky rows of that erasure (already keyed hashes
under the store's secret) so a replay can put them back as they were. Never an identifier's value.

A restored store is one whose epoch is behind the ledger's last entry for it; a replay re-applies the
entries newer than the store's epoch (`tasks/replay.py`) and is recorded here too (`replays`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw

from erasure.config import Home
from erasure.files import private_dirs, write_private
from erasure.identity import Identity, fold
from erasure.sqlite import connect, transaction

LEDGER_DIR = "ledger"
LEDGER_DB = "erasures.db"
KEY_FILE = "ledger.key"

LEDGER_SQL = """
CREATE TABLE IF NOT EXISTS entries(
  seq         INTEGER PRIMARY KEY,
  target      TEXT NOT NULL,
  request_id  TEXT NOT NULL,
  at          TEXT NOT NULL,           -- ISO 8601 UTC: when the erasure completed
  epoch       INTEGER NOT NULL,        -- the store's erasure epoch after it
  legal_basis TEXT NOT NULL,
  sticky      TEXT NOT NULL DEFAULT '{}',  -- the store's own suppression rows of it (keyed hashes)
  UNIQUE (target, request_id)
);
CREATE TABLE IF NOT EXISTS entry_hashes(
  seq    INTEGER NOT NULL REFERENCES entries(seq),
  kind   TEXT NOT NULL,                -- id | email | name | phone | store_id | source_key
  digest TEXT NOT NULL,
  PRIMARY KEY (seq, kind, digest)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_entry_hashes_digest ON entry_hashes(digest);
CREATE TABLE IF NOT EXISTS replays(
  replay_id   TEXT PRIMARY KEY,        -- the replay's own request id
  seq         INTEGER NOT NULL REFERENCES entries(seq),
  target      TEXT NOT NULL,
  started_at  TEXT NOT NULL,
  ended_at    TEXT,
  outcome     TEXT                     -- all_clear | nothing_found | failed
);
"""


@dataclass(frozen=True)
class Entry:
    """One ledger entry: a completed erasure of one request on one target (hashes only)."""

    seq: int
    target: str
    request_id: str
    at: str
    epoch: int
    legal_basis: str
    sticky: dict[str, Any] = field(default_factory=dict)
    hashes: dict[str, frozenset[str]] = field(default_factory=dict)

    def has(self, kind: str, digest: str) -> bool:
        return digest in self.hashes.get(kind, frozenset())


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def ledger_key(home: Home) -> bytes:
    """The ledger's HMAC key (`keys/ledger.key`, 0600), made on first use."""
    path = home.keys_dir / KEY_FILE
    if not path.exists():
        private_dirs(home.keys_dir)
        write_private(path, secrets.token_hex(32).encode() + b"\n")
    return bytes.fromhex(path.read_text().strip())


def keyed(key: bytes, kind: str, normal: str) -> str:
    """`HMAC-SHA256(key, "<kind>:<normal form>")` hex: how the ledger names an identifier."""
    return hmac.new(key, f"{kind}:{normal}".encode(), hashlib.sha256).hexdigest()


def identity_hashes(key: bytes, identity: Identity) -> list[tuple[str, str]]:
    """(kind, keyed hash) of every normalised identifier of `identity` (ids, emails, names, phones)."""
    return [(kind, keyed(key, kind, value)) for kind, value in identity.items()]


def store_id_hash(key: bytes, store_id: str) -> str:
    """The keyed hash of one store id, in its normal form (`fold`): what a replay looks for."""
    return keyed(key, "id", fold(store_id))


def source_key_hash(key: bytes, source: str, source_ref: str) -> str:
    """The keyed hash of an item's source key `(source, source_ref)`."""
    return keyed(key, "source_key", json.dumps([source, source_ref], ensure_ascii=False))


def open_ledger(home: Home) -> apsw.Connection:
    """Open (creating) the ledger database, 0600 in a 0700 folder."""
    path = home.root / LEDGER_DIR / LEDGER_DB
    private_dirs(path.parent)
    conn = connect(path)
    with transaction(conn):
        conn.execute(LEDGER_SQL)
    return conn


def ledger_path(home: Home) -> Path:
    return home.root / LEDGER_DIR / LEDGER_DB


def record(
    conn: apsw.Connection,
    *,
    target: str,
    request_id: str,
    epoch: int,
    legal_basis: str,
    hashes: Iterable[tuple[str, str]],
    sticky: dict[str, Any] | None = None,
    at: str | None = None,
) -> int:
    """Record a completed erasure on one target; idempotent per (target, request). Returns its seq."""
    with transaction(conn):
        row = conn.execute(
            "SELECT seq FROM entries WHERE target = ? AND request_id = ?", (target, request_id)
        ).fetchone()
        if row is not None:
            seq = int(row[0])
        else:
            conn.execute(
                "INSERT INTO entries(target, request_id, at, epoch, legal_basis, sticky) VALUES (?,?,?,?,?,?)",
                (target, request_id, at or _now(), epoch, legal_basis, json.dumps(sticky or {}, sort_keys=True)),
            )
            seq = int(conn.last_insert_rowid())
        conn.executemany(
            "INSERT OR IGNORE INTO entry_hashes(seq, kind, digest) VALUES (?, ?, ?)", [(seq, k, d) for k, d in hashes]
        )
    return seq


def _load(conn: apsw.Connection, rows: list[tuple[Any, ...]]) -> list[Entry]:
    out: list[Entry] = []
    for seq, target, rid, at, epoch, basis, sticky in rows:
        hashes: dict[str, set[str]] = {}
        for kind, digest in conn.execute("SELECT kind, digest FROM entry_hashes WHERE seq = ?", (seq,)):
            hashes.setdefault(str(kind), set()).add(str(digest))
        out.append(
            Entry(
                int(seq),
                str(target),
                str(rid),
                str(at),
                int(epoch),
                str(basis),
                json.loads(sticky),
                {k: frozenset(v) for k, v in hashes.items()},
            )
        )
    return out


_COLUMNS = "seq, target, request_id, at, epoch, legal_basis, sticky"


def entries(conn: apsw.Connection, target: str | None = None, *, after_epoch: int | None = None) -> list[Entry]:
    """The ledger's entries (of one target; newer than an epoch), in epoch order."""
    sql = f"SELECT {_COLUMNS} FROM entries WHERE 1=1"
    params: list[Any] = []
    if target is not None:
        sql += " AND target = ?"
        params.append(target)
    if after_epoch is not None:
        sql += " AND epoch > ?"
        params.append(after_epoch)
    return _load(conn, conn.execute(sql + " ORDER BY target, epoch, seq", params).fetchall())


def entries_of_request(conn: apsw.Connection, request_id: str) -> list[Entry]:
    """Every target's entry of one request."""
    return _load(
        conn,
        conn.execute(f"SELECT {_COLUMNS} FROM entries WHERE request_id = ? ORDER BY target", (request_id,)).fetchall(),
    )


def last_epoch(conn: apsw.Connection, target: str) -> int:
    """The epoch the ledger's newest entry for `target` brought it to (0: none)."""
    row = conn.execute("SELECT coalesce(max(epoch), 0) FROM entries WHERE target = ?", (target,)).fetchone()
    return int(row[0]) if row else 0


def start_replay(conn: apsw.Connection, replay_id: str, entry: Entry) -> None:
    """Register `replay_id` as the replay of `entry` (it may then run on a restored store)."""
    with transaction(conn):
        conn.execute(
            "INSERT OR IGNORE INTO replays(replay_id, seq, target, started_at) VALUES (?, ?, ?, ?)",
            (replay_id, entry.seq, entry.target, _now()),
        )


def end_replay(conn: apsw.Connection, replay_id: str, outcome: str) -> None:
    with transaction(conn):
        conn.execute("UPDATE replays SET ended_at = ?, outcome = ? WHERE replay_id = ?", (_now(), outcome, replay_id))


def is_replay(conn: apsw.Connection, request_id: str) -> bool:
    """Whether `request_id` is a replay the ledger registered (it is not refused on a restored store)."""
    return conn.execute("SELECT 1 FROM replays WHERE replay_id = ?", (request_id,)).fetchone() is not None


def replays(conn: apsw.Connection, target: str | None = None) -> list[dict[str, Any]]:
    """Every replay (of one target): its id, the original request, times, outcome."""
    sql = (
        "SELECT r.replay_id, e.request_id, r.target, r.started_at, r.ended_at, r.outcome FROM replays r "
        "JOIN entries e ON e.seq = r.seq"
    )
    params: tuple[str, ...] = ()
    if target is not None:
        sql += " WHERE r.target = ?"
        params = (target,)
    keys = ("replay_id", "replays", "target", "started_at", "ended_at", "outcome")
    return [dict(zip(keys, row, strict=True)) for row in conn.execute(sql + " ORDER BY r.started_at", params)]
