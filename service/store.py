"""The reference agent-memory store (`erasure store ...`, `erasure ingest`): create it (empty or with
demo data), count what it holds, ingest memory items through the suppression guard. Counts, paths and
timings only; never a subject or memory content."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from erasure.config import Home
from erasure.sqlite import JournalMode, journal_mode
from erasure.targets import REFERENCE
from memory import demo as demo_mod
from memory import ingest as ingest_mod
from memory import store_census
from memory.items import MemoryItem, read_jsonl
from memory.schema import create, open_store

DEMO_MIN_FRAMES, DEMO_MAX_FRAMES = demo_mod.MIN_FRAMES, demo_mod.MAX_FRAMES
DEMO_FRAMES, DEMO_SUBJECTS, DEMO_SEED = 10_000, 5, 7


def init_store(
    h: Home,
    *,
    tenant: str,
    journal: JournalMode,
    demo: bool = False,
    frames: int | None = None,
    subjects: int | None = None,
    seed: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Create the store (idempotent); with `demo`, fill it with deterministic demo data (default
    `DEMO_FRAMES` frames, `DEMO_SUBJECTS` subjects, seed `DEMO_SEED`) and write demo-subjects.json.
    `on_progress(frames_done, frames_total)` follows the demo build."""
    conn = create(h.store_dir, tenant_id=tenant, journal_mode=journal)
    try:
        out: dict[str, Any] = {"store": str(h.store_dir), "tenant": tenant, "journal": journal_mode(conn)}
        if not demo:
            return out
        n, k, s = frames or DEMO_FRAMES, subjects or DEMO_SUBJECTS, DEMO_SEED if seed is None else seed
        result = demo_mod.build_demo(conn, h.store_dir, frames=n, subjects=k, seed=s, on_progress=on_progress)
        path = demo_mod.write_subjects_file(h.root / demo_mod.SUBJECTS_FILE, result.subjects, seed=s, tenant=tenant)
    finally:
        conn.close()
    out.update(
        {
            "seed": s,
            "people": result.people,
            "subjects": len(result.subjects),
            "items": result.items,
            "frames": result.frames,
            "derived_frames": result.derived,
            "second_order_frames": result.second_order,
            "recall_cache": result.recall_cache,
            "model_trained": result.model_id,
            "seconds": result.elapsed,
            "subjects_file": str(path),
        }
    )
    return out


def _dir_stats(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()] if path.exists() else []
    return len(files), sum(p.stat().st_size for p in files)


def store_stats(h: Home) -> dict[str, Any]:
    """Row counts of every store table, its journal mode and the size of its files (no content)."""
    conn = open_store(h.store_dir)
    try:
        counts = store_census.table_counts(conn)
        mode = journal_mode(conn)
    finally:
        conn.close()
    files: dict[str, Any] = {}
    for name in ("memory.db", "memory.db-wal", "memory.db-journal"):
        p = h.store_dir / name
        files[name] = p.stat().st_size if p.exists() else 0
    for sub in ("sessions", "blobs", "corpora"):
        n, size = _dir_stats(h.store_dir / sub)
        files[f"{sub}/ files"] = n
        files[f"{sub}/ bytes"] = size
    return {"store": str(h.store_dir), "journal": mode, "tables": counts, "files": files}


def read_items(file: Path) -> list[MemoryItem]:
    """An ingest file's memory items, the whole file validated before anything is written."""
    return read_jsonl(file)


def ingest_items(h: Home, items: list[MemoryItem]) -> ingest_mod.IngestReport:
    """Ingest `items` into the reference store through the suppression guard (a restored store refuses
    them until its replay). The report counts what was written, skipped and held."""
    from tasks.epochs import refuse_if_restored

    refuse_if_restored(h, only=REFERENCE)  # hook (issue 26): no ingest into a restored store before its replay
    conn = open_store(h.store_dir)
    try:
        return ingest_mod.ingest(conn, h.store_dir, items)
    finally:
        conn.close()
