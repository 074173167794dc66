"""Maintenance: compaction of derived frames. It goes through `memory.frames.purge_frames`, the same
complete delete the cascade uses, so no maintenance path can orphan vectors, FTS or cache rows."""

from __future__ import annotations

import apsw

from erasure.sqlite import transaction
from memory.frames import purge_frames


def compact_derived(conn: apsw.Connection, *, keep_latest: int = 1000) -> dict[str, int]:
    """Prune derived frames beyond the newest `keep_latest` (oldest first) with the complete delete."""
    with transaction(conn):
        old = [
            r[0]
            for r in conn.execute(
                "SELECT frame_id FROM frames WHERE kind='derived' ORDER BY frame_id DESC LIMIT -1 OFFSET ?",
                (keep_latest,),
            )
        ]
        return purge_frames(conn, old)
