"""`erasure restore ...`: a store restored from a backup, and the replay that erases again what it brought back.

A restored store (its erasure epoch is behind the ledger's) refuses ingest and requests (exit 6) until
`erasure restore replay --target NAME` has re-applied every erasure the backup predates: each as a
replay request named after the original one, through the same cascade, verification and signed pack.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from cli.shell import HomeOpt, JsonOpt, console, home_of, print_json
from cli.targets import TargetsOpt, targets_for
from erasure.engine_db import Engine

__all__ = ["app"]

app = typer.Typer(
    help="Restored stores: show their erasure epochs against the ledger, replay their erasures.", no_args_is_help=True
)


@app.command("status")
def status(home: HomeOpt = None, targets: TargetsOpt = None, json_out: JsonOpt = False) -> None:
    """Each target's erasure epoch against the ledger: restored (behind) or not, and what to replay."""
    from service.restore import epoch_rows

    h = home_of(home)
    rows = epoch_rows(h, targets_for(h, targets))
    if json_out:
        print_json({"targets": rows})
        return
    table = Table(title="erasure epochs")
    for col in ("target", "kind", "store epoch", "ledger epoch", "restored", "to replay"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["target"],
            r["kind"],
            str(r["store_epoch"]),
            str(r["ledger_epoch"]),
            "[red]yes[/red]" if r["restored"] else "no",
            ", ".join(r["pending"]),
        )
    console.print(table)


@app.command("replay")
def replay(
    target: Annotated[
        str, typer.Option("--target", help="The restored target (its name in targets.toml).", show_default=False)
    ],
    home: HomeOpt = None,
    targets: TargetsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Re-apply every erasure newer than the target's epoch: find each subject by the ledger's keyed
    hashes, run the same cascade and verification as a replay request named after the original, write
    its signed pack, and bring the store's sticky lists and epoch up to date.

    Exits 0 when every replay ended all clear (or the target was not restored); 7 when one found
    residue; 1 otherwise."""
    from cli.run import run_flow
    from service.restore import replay as replay_target

    h = home_of(home)
    with Engine.session(h.engine_db) as engine:  # the command's engine, shared by its runs
        doc = replay_target(h, targets_for(h, targets), target, lambda rid: run_flow(engine, h, rid, live=False))
    results = doc["replayed"]
    if json_out:
        print_json(doc)
    else:
        table = Table(title=f"replay on {doc['target']}: epoch {doc['store_epoch']} of {doc['ledger_epoch']}")
        for col in ("original request", "replay request", "found by", "outcome", "pack"):
            table.add_column(col)
        for r in results:
            table.add_row(r["original"], r["replay"] or "", r["found_by"] or "", r["outcome"], r["pack"] or "")
        console.print(table)
        if not results:
            console.print(f"target {doc['target']} is not restored: nothing to replay")
