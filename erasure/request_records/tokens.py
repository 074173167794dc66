"""Single-use confirmation tokens of the agent surface (`erasure mcp`): a used token's random id is
recorded with the request it filed, in the caller's transaction, so a replay is refused by the
primary key, also from another process."""

from __future__ import annotations

from datetime import datetime

import apsw

from erasure.clocks import iso_utc
from erasure.errors import Conflict
from erasure.request_records._common import utc_now, writing


class TokenAlreadyUsed(Conflict):
    """The confirmation token was used before (a replay)."""


def token_use(conn: apsw.Connection, token_id: str) -> str | None:
    """The request id a token filed, or None when it was never used."""
    row = conn.execute("SELECT request_id FROM agent_tokens WHERE token_id = ?", (token_id,)).fetchone()
    return None if row is None else str(row[0])


def use_token(conn: apsw.Connection, token_id: str, request_id: str, *, now: datetime | None = None) -> None:
    """Record `token_id` as used for `request_id` (in the caller's transaction, when there is one);
    `TokenAlreadyUsed` when it was."""
    with writing(conn):
        try:
            conn.execute(
                "INSERT INTO agent_tokens(token_id, used_at, request_id) VALUES (?, ?, ?)",
                (token_id, iso_utc(utc_now(now)), request_id),
            )
        except apsw.ConstraintError:
            raise TokenAlreadyUsed(
                f"this confirmation token was already used (request {token_use(conn, token_id)}): refused"
            ) from None


def agent_filed(conn: apsw.Connection, request_id: str) -> bool:
    """Whether `request_id` was filed through a confirmation token (the agent surface's own requests)."""
    return conn.execute("SELECT 1 FROM agent_tokens WHERE request_id = ?", (request_id,)).fetchone() is not None
