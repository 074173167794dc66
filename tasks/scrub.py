"""Byte hygiene after the nine steps: rebuild every page of the store database.

`secure_delete` zeroes a cell when it is deleted and a page when it is freed, but when balancing
rebuilds a b-tree page (SQLite's `rebuildPage`) the gap between the cell-pointer array and the new
content area keeps the page's old bytes, including copies of cells that moved to a sibling page.
Deleting the moved cell later never reaches that copy. We found the subject's id in such a gap on the
demo store, after every row of theirs was gone. VACUUM rebuilds the file from live cells only (the old
pages are never copied), and the TRUNCATE checkpoint that follows moves the rebuilt pages out of the
WAL. Its cost grows with the store (about 8 s/GiB here), unlike the indexed steps; `bench/erase.py`
reports it apart. Blob, corpus and session files need nothing of the sort: they are removed whole.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from erasure.sqlite import checkpoint_truncate
from memory.schema import db_path, open_store


def scrub_store(store_dir: Path) -> dict[str, Any]:
    """VACUUM the store database and truncate its WAL; returns sizes and seconds (no content)."""
    db = db_path(store_dir)
    before = db.stat().st_size
    conn = open_store(store_dir)
    try:
        started = time.perf_counter()
        conn.execute("VACUUM")
        busy, _log, _done = checkpoint_truncate(conn)
        seconds = time.perf_counter() - started
    finally:
        conn.close()
    return {
        "bytes_before": before,
        "bytes_after": db.stat().st_size,
        "seconds": round(seconds, 3),
        "checkpoint_busy": bool(busy),
    }
