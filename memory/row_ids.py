"""Row ids for new data: from high-water marks in `store_meta` (`hwm.<table>`), so an id freed by an
erasure is never handed out again, and entity ids by (kind, name), created on a miss."""

from __future__ import annotations

import apsw

_ID_COLUMNS = {
    "raw_archive": "archive_id",
    "frames": "frame_id",
    "frame_chunks": "chunk_id",
    "kg_entities": "entity_id",
    "kg_relations": "relation_id",
}


class IdAllocator:
    """Hands out row ids above both the table's max and its high-water mark `store_meta.hwm.<table>`.
    Create and `save()` inside the writing transaction."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._next: dict[str, int] = {}
        for table, col in _ID_COLUMNS.items():
            top = conn.execute(f"SELECT coalesce(max({col}), 0) FROM {table}").fetchone()
            hwm = conn.execute("SELECT value FROM store_meta WHERE key=?", (f"hwm.{table}",)).fetchone()
            self._next[table] = max(int(top[0]) if top else 0, int(hwm[0]) if hwm else 0) + 1

    def take(self, table: str, n: int = 1) -> int:
        """Reserve `n` consecutive ids of `table`; returns the first."""
        first = self._next[table]
        self._next[table] = first + n
        return first

    def save(self, conn: apsw.Connection) -> None:
        """Persist the high-water marks."""
        conn.executemany(
            "INSERT OR REPLACE INTO store_meta(key, value) VALUES (?, ?)",
            [(f"hwm.{t}", str(n - 1)) for t, n in self._next.items()],
        )


class EntityCache:
    """(kind, name) -> entity_id, creating entities on a miss. Valid within one transaction."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, str], int] = {}
        self.created = 0

    def get(self, conn: apsw.Connection, ids: IdAllocator, kind: str, name: str, now: str) -> int:
        """The id of entity (kind, name), created if it does not exist."""
        key = (kind, name)
        hit = self._ids.get(key)
        if hit is not None:
            return hit
        row = conn.execute("SELECT entity_id FROM kg_entities WHERE kind=? AND name=?", key).fetchone()
        if row is not None:
            eid = int(row[0])
        else:
            eid = ids.take("kg_entities")
            conn.execute(
                "INSERT INTO kg_entities(entity_id, kind, name, created_at) VALUES (?,?,?,?)", (eid, kind, name, now)
            )
            self.created += 1
        self._ids[key] = eid
        return eid
