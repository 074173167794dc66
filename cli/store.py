"""`erasure store ...` commands, and the top-level `erasure ingest`.

Output never names a data subject or shows memory content: paths, ids of rows, counts and timings.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cli.common import HomeOpt, JsonOpt, console, err_console, home_of, print_json
from erasure.errors import InputError
from erasure.sqlite import journal_mode
from memory import demo as demo_mod
from memory import ingest as ingest_mod
from memory import store_census
from memory.items import read_jsonl
from memory.schema import create, open_store

app = typer.Typer(
    help="The agent-memory store: create it (empty or with demo data) and inspect it.", no_args_is_help=True
)


class Journal(StrEnum):
    """SQLite journal mode of a new store."""

    wal = "wal"
    delete = "delete"


def _table(title: str, rows: dict[str, Any]) -> Table:
    t = Table(title=title, show_header=False)
    t.add_column("what")
    t.add_column("value", justify="right")
    for k, v in rows.items():
        t.add_row(k, f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v))
    return t


@app.command()
def init(
    home: HomeOpt = None,
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant id the store belongs to.")] = "default",
    demo: Annotated[bool, typer.Option("--demo", help="Fill the new store with deterministic demo data.")] = False,
    frames: Annotated[
        int | None,
        typer.Option(
            "--frames",
            help=f"Demo size in frames ({demo_mod.MIN_FRAMES:,}-{demo_mod.MAX_FRAMES:,}; default 10,000).",
            show_default=False,
        ),
    ] = None,
    subjects: Annotated[
        int | None,
        typer.Option(
            "--subjects", help="Demo subjects: people who may file erasure requests (default 5).", show_default=False
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Demo seed (default 7): same seed, same store.", show_default=False)
    ] = None,
    journal: Annotated[Journal, typer.Option("--journal", help="SQLite journal mode of a new store.")] = Journal.wal,
    json_out: JsonOpt = False,
) -> None:
    """Create the store (idempotent); with --demo, build a demo store and write demo-subjects.json."""
    if not demo and (frames, subjects, seed) != (None, None, None):
        raise InputError("--frames, --subjects and --seed only apply with --demo")
    h = home_of(home)
    conn = create(h.store_dir, tenant_id=tenant, journal_mode=journal.value)
    out: dict[str, Any] = {"store": str(h.store_dir), "tenant": tenant, "journal": journal_mode(conn)}
    if demo:
        n, k, s = frames or 10_000, subjects or 5, 7 if seed is None else seed
        with Progress(
            TextColumn("building demo store"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("frames"),
            TimeElapsedColumn(),
            console=err_console,
            disable=json_out,
            transient=True,
        ) as bar:
            task = bar.add_task("demo", total=n)
            result = demo_mod.build_demo(
                conn,
                h.store_dir,
                frames=n,
                subjects=k,
                seed=s,
                on_progress=lambda done, _total: bar.update(task, completed=done),
            )
        path = demo_mod.write_subjects_file(h.root / demo_mod.SUBJECTS_FILE, result.subjects, seed=s, tenant=tenant)
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
    conn.close()
    if json_out:
        print_json(out)
    else:
        console.print(_table("store", out))


def _dir_stats(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()] if path.exists() else []
    return len(files), sum(p.stat().st_size for p in files)


@app.command()
def stats(home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """Row counts of every store table and the size of its files (no content)."""
    h = home_of(home)
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
    if json_out:
        print_json({"store": str(h.store_dir), "journal": mode, "tables": counts, "files": files})
        return
    console.print(_table(f"tables ({h.store_dir})", counts))
    console.print(_table(f"files (journal {mode})", files))


def ingest(
    file: Annotated[Path, typer.Argument(help="JSONL file of memory items, one per line.", show_default=False)],
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Ingest memory items into the store: the whole file is validated before anything is written;
    erased (suppressed) and already-ingested items are skipped and counted; items of an erased
    identity (id, email or phone) are held, stored nowhere, and counted."""
    items = read_jsonl(file)
    h = home_of(home)
    from tasks.epochs import refuse_if_restored

    refuse_if_restored(h, only="reference")  # hook (issue 26): no ingest into a restored store before its replay
    conn = open_store(h.store_dir)
    try:
        report = ingest_mod.ingest(conn, h.store_dir, items)
    finally:
        conn.close()
    if json_out:
        print_json(report.as_dict())
    else:
        console.print(_table("ingest", report.as_dict()))
    if report.held_erased_identity:
        err_console.print(
            f"{report.held_erased_identity} item(s) held_erased_identity: their subject's id, "
            "email or phone was erased; they were stored nowhere. `erasure suppression check "
            "FILE.jsonl` lists their lines; after re-consent, release one with `erasure "
            "suppression allow --identity-of FILE.jsonl:LINE --reason ...` and ingest the file "
            "again.",
            markup=False,
            highlight=False,
        )
