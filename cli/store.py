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

from cli.shell import HomeOpt, JsonOpt, console, err_console, home_of, print_json
from erasure.errors import InputError
from service import store

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
            help=f"Demo size in frames ({store.DEMO_MIN_FRAMES:,}-{store.DEMO_MAX_FRAMES:,}; default 10,000).",
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
    with Progress(
        TextColumn("building demo store"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("frames"),
        TimeElapsedColumn(),
        console=err_console,
        disable=json_out or not demo,
        transient=True,
    ) as bar:
        task = bar.add_task("demo", total=frames or store.DEMO_FRAMES, visible=demo)
        out = store.init_store(
            h,
            tenant=tenant,
            journal="wal" if journal is Journal.wal else "delete",
            demo=demo,
            frames=frames,
            subjects=subjects,
            seed=seed,
            on_progress=lambda done, _total: bar.update(task, completed=done),
        )
    if json_out:
        print_json(out)
    else:
        console.print(_table("store", out))


@app.command()
def stats(home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """Row counts of every store table and the size of its files (no content)."""
    doc = store.store_stats(home_of(home))
    if json_out:
        print_json(doc)
        return
    console.print(_table(f"tables ({doc['store']})", doc["tables"]))
    console.print(_table(f"files (journal {doc['journal']})", doc["files"]))


def ingest(
    file: Annotated[Path, typer.Argument(help="JSONL file of memory items, one per line.", show_default=False)],
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Ingest memory items into the store: the whole file is validated before anything is written;
    erased (suppressed) and already-ingested items are skipped and counted; items of an erased
    identity (id, email or phone) are held, stored nowhere, and counted."""
    items = store.read_items(file)
    report = store.ingest_items(home_of(home), items)
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
