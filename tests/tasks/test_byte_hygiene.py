"""Byte hygiene after the cascade: stale copies of moved cells in a page's unallocated gap.

SQLite's `secure_delete` zeroes a cell when it is deleted, but when balancing rebuilds a b-tree page it
does not zero the gap it leaves, so an old copy of a cell that moved to another page survives there,
and deleting the moved cell later never reaches it. Seen on the demo store: the subject's id and an
audit commitment in the gap of an `ix_audit_vault_subject` leaf. The test plants such a copy
deterministically (a real gap of a live page), then checks the scrub removes it and keeps the store
intact."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from erasure.sqlite import connect
from tasks.runner import run_cascade
from tasks.scrub import scrub_store
from tests.cascade_fixtures import BYSTANDER, SUBJECT, build_store, owned_counts, store_bytes, submit


def _plant_in_a_gap(db: Path, needle: bytes) -> int:
    """Write `needle` into the unallocated gap of a live b-tree leaf page; return the page number."""
    conn = connect(db, readonly=True)
    page_size = int(cast(tuple[Any, ...], conn.execute("PRAGMA page_size").fetchone())[0])
    leaves = [int(r[0]) for r in conn.execute("SELECT pageno FROM dbstat WHERE name = 'frames' AND pagetype = 'leaf'")]
    conn.close()
    data = bytearray(db.read_bytes())
    for pg in leaves:
        base = (pg - 1) * page_size
        hdr = base + (100 if pg == 1 else 0)
        ncell = int.from_bytes(data[hdr + 3 : hdr + 5], "big")
        content = int.from_bytes(data[hdr + 5 : hdr + 7], "big") or 65536
        gap_start, gap_end = hdr + 8 + 2 * ncell, base + content
        if gap_end - gap_start > len(needle) + 16:
            data[gap_start + 8 : gap_start + 8 + len(needle)] = needle
            db.write_bytes(bytes(data))
            return pg
    raise AssertionError("no leaf page with a gap")


def test_a_stale_copy_in_a_page_gap_is_scrubbed_and_the_store_stays_intact(home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    build_store(home, tmp_path)
    submit(home)
    run_cascade("req-ann-1", home)
    db = home.store_dir / "memory.db"
    needle = f"stale copy naming {SUBJECT.email}".encode()
    _plant_in_a_gap(db, needle)
    conn = connect(db, readonly=True)
    assert (
        cast(tuple[Any, ...], conn.execute("PRAGMA integrity_check").fetchone())[0] == "ok"
    )  # a gap is not part of any cell
    conn.close()
    assert needle in store_bytes(home)
    report = scrub_store(home.store_dir)
    assert needle not in store_bytes(home)
    assert report["bytes_after"] > 0
    conn = connect(db, readonly=True)
    assert cast(tuple[Any, ...], conn.execute("PRAGMA integrity_check").fetchone())[0] == "ok"
    conn.close()
    assert owned_counts(home, BYSTANDER)["frames"] > 0


def test_the_cascade_ends_with_the_scrub(home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    build_store(home, tmp_path)
    submit(home)
    db = home.store_dir / "memory.db"
    needle = f"stale copy naming {SUBJECT.email}".encode()
    _plant_in_a_gap(db, needle)
    run_cascade("req-ann-1", home)
    assert needle not in store_bytes(home)
    assert all(v == 0 for v in owned_counts(home, SUBJECT).values())
