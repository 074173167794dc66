"""The ledger's seal: a chain of HMACs over its entries, and its head kept beside the ledger key.

Every entry of the ledger (`erasure.ledger`) is sealed when it is recorded: `mac_n = HMAC-SHA256(ledger
key, mac_{n-1} || canonical entry n)`, the entry with its keyed hashes and sticky rows. The head (the
number of entries and an HMAC over it and the last mac) is written to `keys/ledger.head` (0600), beside
the key and apart from the ledger's database. `check` recomputes the chain: an entry edited, added
without the key, or removed (from the middle, or from the end against the head) is `LedgerTampered`,
and everything that trusts the ledger (a restored store's check, `restore replay`) refuses to go on.

What it cannot stop: whoever holds `keys/ledger.key` can seal what they like. A ledger made before the
seal existed (no head file yet) is adopted as it stands, once.
"""

from __future__ import annotations

import hashlib
import hmac
import json

import apsw

from erasure.config import Home
from erasure.errors import RequestBlocked
from erasure.files import private_dirs, write_private
from erasure.sqlite import transaction

HEAD_FILE = "ledger.head"
SEALS_SQL = "CREATE TABLE IF NOT EXISTS seals(seq INTEGER PRIMARY KEY, mac TEXT NOT NULL)"
_GENESIS = "0" * 64


class LedgerTampered(RequestBlocked):
    """The ledger of erasures does not match its seal: an entry was edited, forged or removed."""


def _entry_bytes(conn: apsw.Connection, seq: int) -> bytes:
    row = conn.execute(
        "SELECT seq, target, request_id, at, epoch, legal_basis, sticky FROM entries WHERE seq = ?", (seq,)
    ).fetchone()
    if row is None:
        raise LedgerTampered(f"the ledger of erasures lost entry {seq} while it was read")
    hashes = sorted(
        [str(k), str(d)] for k, d in conn.execute("SELECT kind, digest FROM entry_hashes WHERE seq = ?", (seq,))
    )
    return json.dumps([list(row), hashes], sort_keys=True, separators=(",", ":")).encode("utf-8")


def _mac(key: bytes, previous: str, data: bytes) -> str:
    return hmac.new(key, previous.encode("ascii") + data, hashlib.sha256).hexdigest()


def _head(key: bytes, count: int, last: str) -> str:
    return hmac.new(key, f"head:{count}:{last}".encode("ascii"), hashlib.sha256).hexdigest()


def _chain(conn: apsw.Connection, key: bytes) -> list[tuple[int, str]]:
    """(seq, mac) of every entry as its content gives it, in seq order."""
    out: list[tuple[int, str]] = []
    last = _GENESIS
    for row in conn.execute("SELECT seq FROM entries ORDER BY seq").fetchall():
        seq = int(str(row[0]))
        last = _mac(key, last, _entry_bytes(conn, seq))
        out.append((seq, last))
    return out


def _write_head(home: Home, key: bytes, chain: list[tuple[int, str]]) -> None:
    last = chain[-1][1] if chain else _GENESIS
    private_dirs(home.keys_dir)
    doc = {"entries": len(chain), "mac": _head(key, len(chain), last)}
    write_private(home.keys_dir / HEAD_FILE, (json.dumps(doc, sort_keys=True) + "\n").encode("ascii"))


def seal(conn: apsw.Connection, key: bytes, home: Home) -> None:
    """Seal the entries recorded since the last seal (after `check`: the chain so far is intact) and
    write the new head."""
    conn.execute(SEALS_SQL)
    chain = _chain(conn, key)
    with transaction(conn):
        conn.executemany("INSERT OR REPLACE INTO seals(seq, mac) VALUES (?, ?)", chain)
    _write_head(home, key, chain)


def check(conn: apsw.Connection, key: bytes, home: Home) -> None:
    """`LedgerTampered` unless every entry matches its seal and the head; a ledger without a head yet
    (made before the seal) is adopted here, once."""
    conn.execute(SEALS_SQL)
    head_path = home.keys_dir / HEAD_FILE
    if not head_path.exists():
        if conn.execute("SELECT 1 FROM seals LIMIT 1").fetchone() is not None:
            raise LedgerTampered(
                f"the ledger of erasures is sealed but its head ({head_path}) is gone: entries may have been"
                " removed from its end; nothing that trusts it runs until that is resolved"
            )
        seal(conn, key, home)  # a ledger from before the seal: adopted as it stands
        return
    chain = _chain(conn, key)
    sealed = [(int(str(s)), str(m)) for s, m in conn.execute("SELECT seq, mac FROM seals ORDER BY seq")]
    try:
        head = json.loads(head_path.read_text())
        count = int(head["entries"])
        # the head may trail the seals by what a concurrent `seal` is writing: it names a prefix of them
        head_ok = 0 <= count <= len(sealed) and head["mac"] == _head(
            key, count, sealed[count - 1][1] if count else _GENESIS
        )
    except (OSError, ValueError, KeyError, TypeError):
        head_ok = False
    if not head_ok:
        raise LedgerTampered(
            f"the ledger of erasures does not match its head ({head_path}): entries were removed from its"
            " end, or the head was replaced; nothing that trusts it runs until that is resolved"
        )
    if chain[: len(sealed)] != sealed:
        bad = next((s for (s, m), sm in zip(chain, sealed, strict=False) if (s, m) != sm), None)
        where = f"entry {bad}" if bad is not None else "its number of entries"
        raise LedgerTampered(
            f"the ledger of erasures was changed outside the product ({where} does not match its seal):"
            " nothing that trusts it runs (restore checks, replays) until it is restored from a copy that verifies"
        )
    if len(chain) > len(sealed):
        # entries recorded after the last seal (a process that died between the two): they only add
        # erasures to replay, never hide one; sealed now
        seal(conn, key, home)
