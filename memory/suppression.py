"""Sticky erasure: the suppression list `erased_subjects`, one row per erased item (its source key as
keyed hashes, and its `memory.items.item_key`), and the erased identities `erased_identities`, keyed
hashes of the erased subjects' identifiers.

An erasure records the subject's items (`record`) and identity hashes (`record_identity`) in its own
transaction; ingest consults both first, fail-closed: an erased item is skipped (`check` /
`is_suppressed`), an item whose subject has an erased id, email or phone (any spelling) is held
(`IdentityGuard`); if either list cannot be read, the item is treated as suppressed. Re-consent is
explicit and audited (`allow`, `allow_identity`, `allow_identities_of`).

Identity hashes: `HMAC-SHA256(secret, "<kind>:<normal form>")` hex (`erasure.identity.salted_hash`)
under the store's `subject_key_secret` (the secret holds use). Kinds: `id` (NFKC + case folding),
`email` (lower-cased) and `phone` (E.164 digits and the national spelling with a trunk 0; a
`+44 (0)20 ...` spelling counts without its `(0)`). Never the name: a namesake is not the subject,
and must not be held.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import apsw

from erasure.identity import Identity, fold, national_digits, phone_digits, salted_hash
from erasure.sqlite import transaction
from erasure.subject import Subject
from memory import audit
from memory.keyed import hashed_key, identity_secret

IDENTITY_KINDS = ("id", "email", "phone")
"""What sticky erasure by identity matches on. A name alone is too weak: namesakes exist."""


class Guard(enum.Enum):
    """What the suppression guard says about one `(source, source_ref)`."""

    allowed = "allowed"
    suppressed = "suppressed"
    unreadable = "unreadable"  # the list could not be read: treated as suppressed (fail-closed)


@dataclass(frozen=True)
class SuppressedKey:
    """One row of the suppression list: the erased item's source key as keyed hashes (the list never
    names the subject, nor keeps a key that could)."""

    id: int
    source: str
    source_ref: str
    erased_at: str
    request_ref: str | None
    item_key: str | None = None
    """The erased item; None on a row from before items had keys (it stands for its conversation)."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# The key as given too: a row someone wrote in plaintext (by hand, or an old tool) still suppresses.
_KEY_ROW = "SELECT {} FROM erased_subjects WHERE source IN (?1, ?2) AND source_ref IN (?3, ?4)"
_ITEM_ROW = _KEY_ROW + " AND (item_key IS NULL OR item_key = ?5)"


def _row(conn: apsw.Connection, what: str, source: str, source_ref: str, item_key: str | None) -> Any:
    hs, hr = hashed_key(conn, source, source_ref)
    if item_key is None:
        return conn.execute(_KEY_ROW.format(what) + " LIMIT 1", (source, hs, source_ref, hr)).fetchone()
    return conn.execute(_ITEM_ROW.format(what) + " LIMIT 1", (source, hs, source_ref, hr, item_key)).fetchone()


def check(conn: apsw.Connection, source: str, source_ref: str, item_key: str | None = None) -> Guard:
    """The guard's verdict for the item `item_key` of `(source, source_ref)` (None: for any item of
    that key). An erased item suppresses itself only, never another item of its conversation (a row
    from before items had keys suppresses its whole conversation). Any error while reading the list
    gives `Guard.unreadable`."""
    try:
        row = _row(conn, "1", source, source_ref, item_key)
    except Exception:  # fail-closed on anything: a missing table or secret, corruption, I/O
        return Guard.unreadable
    return Guard.allowed if row is None else Guard.suppressed


def is_suppressed(conn: apsw.Connection, source: str, source_ref: str, item_key: str | None = None) -> bool:
    """True when the item (None: any item of `(source, source_ref)`) was erased, or when the list
    cannot be read (fail-closed)."""
    return check(conn, source, source_ref, item_key) is not Guard.allowed


def request_ref_of(conn: apsw.Connection, source: str, source_ref: str) -> str | None:
    """The id of the request whose erasure suppressed an item of `(source, source_ref)`, or None."""
    row = _row(conn, "request_ref", source, source_ref, None)
    return str(row[0]) if row is not None and row[0] is not None else None


def record(
    conn: apsw.Connection, source: str, source_ref: str, request_ref: str | None, item_key: str | None = None
) -> bool:
    """Add the erased item `item_key` of `(source, source_ref)` to the list (None: every item of that
    key), the key as keyed hashes. Runs inside the caller's erase transaction; returns True if a row
    was added (a row already there is kept)."""
    hs, hr = hashed_key(conn, source, source_ref)
    if (
        item_key is None
        and conn.execute(  # NULLs are distinct in a UNIQUE index: look first
            "SELECT 1 FROM erased_subjects WHERE source=? AND source_ref=? AND item_key IS NULL", (hs, hr)
        ).fetchone()
        is not None
    ):
        return False
    conn.execute(
        "INSERT OR IGNORE INTO erased_subjects(source, source_ref, item_key, erased_at, request_ref)"
        " VALUES (?,?,?,?,?)",
        (hs, hr, item_key, _now(), request_ref),
    )
    return conn.changes() > 0


def allow(
    conn: apsw.Connection, source: str, source_ref: str, reason: str, actor: str, *, request_ref: str | None = None
) -> bool:
    """Re-consent: remove the erased items of `(source, source_ref)` (given in plaintext or as the list
    shows it; only those `request_ref` erased, when given) from the list so they may be ingested again,
    and audit it ('suppression.allow'). Opens its own transaction. Returns False when none was listed."""
    with transaction(conn):
        hs, hr = hashed_key(conn, source, source_ref)
        conn.execute(
            "DELETE FROM erased_subjects WHERE source IN (?1, ?2) AND source_ref IN (?3, ?4)"
            " AND (?5 IS NULL OR request_ref = ?5)",
            (source, hs, source_ref, hr, request_ref),
        )
        if conn.changes() == 0:
            return False
        audit.append(
            conn,
            "suppression.allow",
            "suppression",
            {"reason": reason},
            {"source": (None, source), "source_ref": (None, source_ref), "allowed_by": (None, actor)},
        )
    return True


def list_suppressed(conn: apsw.Connection) -> list[SuppressedKey]:
    """Every suppressed item, oldest first."""
    rows = conn.execute(
        "SELECT id, source, source_ref, erased_at, request_ref, item_key FROM erased_subjects ORDER BY id"
    )
    return [SuppressedKey(int(r[0]), str(r[1]), str(r[2]), str(r[3]), r[4], r[5]) for r in rows]


# --- sticky erasure by identity --------------------------------------------------------------------


def _phone_spellings(subject: Subject) -> list[str]:
    if not subject.phone:
        return []
    out: dict[str, None] = {}
    for raw in {subject.phone, subject.phone.replace("(0)", "")}:
        digits = phone_digits(raw)
        if len(digits) < 6:
            continue
        out.setdefault(digits, None)
        nat = national_digits(digits)
        if nat:
            out.setdefault(nat, None)
    return list(out)


def identity_digests(secret: bytes, subject: Subject) -> list[tuple[str, str]]:
    """(kind, digest) of the subject's id, email and phone spellings: what an erasure records and what
    ingest looks up (the same function on both sides, so the spellings agree)."""
    ident = Identity.of(subject)
    out = [(k, salted_hash(secret, k, v)) for k, v in ident.items() if k in ("id", "email")]
    out += [("phone", salted_hash(secret, "phone", p)) for p in _phone_spellings(subject)]
    return out


def record_identity(conn: apsw.Connection, subject: Subject, erasure_ref: str, *, also_ids: Iterable[str] = ()) -> int:
    """Record the erased subject's identity hashes (id, email, phone spellings; INSERT OR IGNORE), and
    the id hash of each of `also_ids` (the other ids the store knew the subject by: case variants,
    confirmed aliases). Runs inside the caller's erase transaction, beside `record`; returns how many
    rows were added."""
    secret = identity_secret(conn)
    pairs = identity_digests(secret, subject)
    pairs += [("id", salted_hash(secret, "id", fold(i))) for i in also_ids if fold(i)]
    now = _now()
    before = conn.total_changes()
    conn.executemany(
        "INSERT OR IGNORE INTO erased_identities(kind, digest, erasure_ref, created_at) VALUES (?,?,?,?)",
        [(kind, digest, erasure_ref, now) for kind, digest in dict.fromkeys(pairs)],
    )
    return int(conn.total_changes() - before)


class IdentityGuard:
    """The identity half of the suppression guard, for one ingest batch (inside its transaction).

    `check(subject)` is `Guard.suppressed` when the subject's id, email or a phone spelling is an erased
    identity, `Guard.unreadable` when the list or the secret cannot be read (fail-closed: held too)."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._conn = conn
        self._secret: bytes | None = None
        self._empty = False
        try:
            self._secret = identity_secret(conn)
            self._empty = conn.execute("SELECT 1 FROM erased_identities LIMIT 1").fetchone() is None
        except Exception:  # fail-closed on anything: a missing table or secret, corruption, I/O
            self._secret = None

    def check(self, subject: Subject) -> Guard:
        """The verdict for one item's subject."""
        if self._secret is None:
            return Guard.unreadable
        if self._empty:
            return Guard.allowed
        try:
            digests = [d for _, d in identity_digests(self._secret, subject)]
            row = self._conn.execute(
                f"SELECT 1 FROM erased_identities WHERE digest IN ({','.join('?' * len(digests))}) LIMIT 1", digests
            ).fetchone()
        except Exception:
            return Guard.unreadable
        return Guard.allowed if row is None else Guard.suppressed


def check_identity(conn: apsw.Connection, subject: Subject) -> Guard:
    """The identity guard's verdict for one subject (see `IdentityGuard`)."""
    return IdentityGuard(conn).check(subject)


def allow_identity(conn: apsw.Connection, subject: Subject, reason: str, actor: str) -> list[str]:
    """Re-consent by identity: remove every erased-identity row that `subject` matches (its id, email,
    phone spellings), so items of that identity may be ingested again, and audit it
    ('suppression.allow_identity': kinds and a count, never a value or digest). Opens its own
    transaction. Returns the kinds released (empty: nothing matched, nothing audited)."""
    with transaction(conn):
        pairs = identity_digests(identity_secret(conn), subject)
        kinds: set[str] = set()
        rows = 0
        for kind, digest in pairs:
            conn.execute("DELETE FROM erased_identities WHERE digest=?", (digest,))
            if conn.changes():
                kinds.add(kind)
                rows += conn.changes()
        if rows:
            audit.append(
                conn,
                "suppression.allow_identity",
                "suppression",
                {"kinds": sorted(kinds), "rows": rows, "reason": reason},
                {"allowed_by": (None, actor)},
            )
    return sorted(kinds)


def identity_refs(conn: apsw.Connection, subject: Subject) -> dict[str, int]:
    """The erasures whose erased-identity rows `subject` matches (what `allow_identity` would remove),
    with how many rows each: request ids and counts, never a digest."""
    digests = sorted({d for _kind, d in identity_digests(identity_secret(conn), subject)})
    if not digests:
        return {}
    marks = ",".join("?" * len(digests))
    rows = conn.execute(
        f"SELECT erasure_ref, count(*) FROM erased_identities WHERE digest IN ({marks}) GROUP BY erasure_ref",
        digests,
    ).fetchall()
    return {str(ref): n for ref, n in rows if isinstance(n, int)}


def allow_identities_of(conn: apsw.Connection, erasure_ref: str, reason: str, actor: str) -> int:
    """Re-consent for a whole erasure: remove the identity rows that request `erasure_ref` recorded, and
    audit it. Opens its own transaction. Returns how many rows were removed."""
    with transaction(conn):
        conn.execute("DELETE FROM erased_identities WHERE erasure_ref=?", (erasure_ref,))
        rows = int(conn.changes())
        if rows:
            audit.append(
                conn,
                "suppression.allow_identity",
                "suppression",
                {"request_ref": erasure_ref, "rows": rows, "reason": reason},
                {"allowed_by": (None, actor)},
            )
    return rows


def erased_identity_count(conn: apsw.Connection) -> int:
    """How many identity hashes are recorded (for listings; digests are never shown)."""
    row = conn.execute("SELECT count(*) FROM erased_identities").fetchone()
    return int(row[0]) if row else 0
