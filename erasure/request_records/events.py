"""The engine's own event log (intake, state changes, attestations): ids and counts only."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import apsw

from erasure.request_records._common import insert_event, utc_now, writing


def log_event(
    conn: apsw.Connection,
    request_id: str | None,
    event: str,
    detail: Mapping[str, Any] | None = None,
    *,
    now: datetime | None = None,
) -> int:
    """Append to the engine's event log (ids and counts only); returns the event's sequence number."""
    with writing(conn):
        return insert_event(conn, request_id, event, detail, utc_now(now))
