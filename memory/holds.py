"""Litigation holds. A hold names the subject only by `subject_key = HMAC-SHA256(secret, subject_id)`
(hex; secret = `bytes.fromhex(store_meta.subject_key_secret)`), so after an erasure and a released
hold the store's bytes do not keep the subject's id. Placing and releasing are audited
('hold.place' / 'hold.release'); a reason or actor that contains the subject id is refused.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import UTC, datetime

import apsw

from erasure.errors import InputError, NotFound
from erasure.mentions import refuse_if_mentions_subject
from erasure.sqlite import transaction
from erasure.subject import Subject
from memory import audit
from memory.schema import meta


@dataclass(frozen=True)
class Hold:
    """One hold as listed (no subject id: only its keyed hash)."""

    hold_id: int
    subject_key: str
    reason: str
    placed_at: str
    placed_by: str
    released_at: str | None
    release_reason: str | None
    released_by: str | None

    @property
    def active(self) -> bool:
        """Not released yet."""
        return self.released_at is None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def subject_key(conn: apsw.Connection, subject_id: str) -> str:
    """HMAC-SHA256 of the subject id under the store's `subject_key_secret`, hex."""
    secret = bytes.fromhex(meta(conn, "subject_key_secret"))
    return hmac.new(secret, subject_id.encode("utf-8"), hashlib.sha256).hexdigest()


def _check_text(what: str, text: str, subject_id: str, actor: str) -> None:
    """Empty texts, and texts naming the subject id in any spelling, are refused here; callers that
    know the subject's other identifiers and the vault (the CLI, the flows) check those first."""
    if not text.strip():
        raise InputError(f"the {what} must not be empty")
    if not actor.strip():
        raise InputError("the actor must not be empty")
    subject = Subject(id=subject_id)
    refuse_if_mentions_subject(what.replace(" ", "_"), text, subject)
    refuse_if_mentions_subject("actor", actor, subject)


def place(conn: apsw.Connection, subject_id: str, reason: str, actor: str) -> int:
    """Place a hold on the subject; returns the new hold id. Opens its own transaction."""
    _check_text("reason", reason, subject_id, actor)
    with transaction(conn):
        key = subject_key(conn, subject_id)
        now = _now()
        conn.execute(
            "INSERT INTO holds(subject_key, reason, placed_at, placed_by) VALUES (?,?,?,?)", (key, reason, now, actor)
        )
        hold_id = int(conn.last_insert_rowid())
        audit.append(
            conn,
            "hold.place",
            "holds",
            {"hold_id": hold_id, "subject_key": key, "reason": reason},
            {"subject_id": (subject_id, subject_id), "placed_by": (None, actor)},
        )
    return hold_id


def release(conn: apsw.Connection, subject_id: str, reason: str, actor: str) -> list[int]:
    """Release every active hold on the subject; returns the released hold ids (one audit entry
    each). `NotFound` when the subject has no active hold. Opens its own transaction."""
    _check_text("release reason", reason, subject_id, actor)
    with transaction(conn):
        key = subject_key(conn, subject_id)
        ids = [
            int(r[0])
            for r in conn.execute(
                "SELECT hold_id FROM holds WHERE subject_key=? AND released_at IS NULL ORDER BY hold_id", (key,)
            )
        ]
        if not ids:
            raise NotFound("no active hold for that subject")
        now = _now()
        for hold_id in ids:
            conn.execute(
                "UPDATE holds SET released_at=?, release_reason=?, released_by=? WHERE hold_id=?",
                (now, reason, actor, hold_id),
            )
            audit.append(
                conn,
                "hold.release",
                "holds",
                {"hold_id": hold_id, "subject_key": key, "reason": reason},
                {"subject_id": (subject_id, subject_id), "released_by": (None, actor)},
            )
    return ids


def active_holds(conn: apsw.Connection, subject_id: str) -> int:
    """How many holds are active on the subject."""
    row = conn.execute(
        "SELECT count(*) FROM holds WHERE subject_key=? AND released_at IS NULL", (subject_key(conn, subject_id),)
    ).fetchone()
    return int(row[0]) if row else 0


def list_holds(conn: apsw.Connection) -> list[Hold]:
    """Every hold, active or released, oldest first."""
    rows = conn.execute(
        "SELECT hold_id, subject_key, reason, placed_at, placed_by, released_at,"
        " release_reason, released_by FROM holds ORDER BY hold_id"
    )
    return [Hold(int(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), r[5], r[6], r[7]) for r in rows]
