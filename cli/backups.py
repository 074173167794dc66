"""`erasure backups ...`: the declared backups of each target (`[[targets.backups]]`), which requests'
subjects they still hold and until when, and the follow-up statements once none does."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from cli.shell import HomeOpt, JsonOpt, console, home_of, print_json
from cli.targets import TargetsOpt, targets_for
from erasure.engine_db import Engine
from service import restore

app = typer.Typer(
    help="Declared backups: what they still hold and until when; follow-up statements once they are gone.",
    no_args_is_help=True,
)


@app.command("list")
def list_(home: HomeOpt = None, targets: TargetsOpt = None, json_out: JsonOpt = False) -> None:
    """Each target's declared backups with their expiry, and each request's subject still held in one
    (until when). A request whose last backup has expired or is gone gets its signed follow-up statement
    (`backups-followup.intoto.json` beside its pack) now."""
    h = home_of(home)
    found = targets_for(h, targets)
    declared = restore.declared_backups(found)
    with Engine.session(h.engine_db) as engine:  # the command's engine
        doc = {"backups": declared, **restore.followups(engine, h)}
    if json_out:
        print_json(doc)
        return
    t1 = Table(title="declared backups")
    for col in ("target", "backup", "taken", "expires"):
        t1.add_column(col)
    for b in declared:
        t1.add_row(b["target"], b["name"], b["taken_at"], b["expires_at"])
    console.print(t1)
    t2 = Table(title="requests whose subject a backup still holds")
    for col in ("request", "target", "backup taken", "held until"):
        t2.add_column(col)
    for x in doc["open"]:
        t2.add_row(x["request_id"], x["target"], x["taken_at"], x["expires_at"])
    console.print(t2)
    for rid in doc["followups_written"]:
        console.print(f"{rid}: no backup holds the subject any longer: follow-up statement signed")


@app.command("rewrite")
def rewrite(
    target: Annotated[
        str,
        typer.Option(
            "--target",
            help='The target whose `mode = "rewrite"` backups to erase inside (its name in targets.toml).',
            show_default=False,
        ),
    ],
    home: HomeOpt = None,
    targets: TargetsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Erase inside each backup of the target's `mode = "rewrite"` folders: restore a copy beside it,
    re-apply every erasure the backup predates (same cascade, verification and signed pack, as
    `<original>.rewrite-<backup>-<n>`), and put the erased copy in place of the backup atomically with
    its original backup time. The requests' `held_in_backup_until` exceptions then end as `rewritten`
    (`erasure backups list` signs their follow-up statements). Exits 0 when every backup ended all clear."""
    h = home_of(home)
    found = targets_for(h, targets)
    from cli.run import run_flow

    with Engine.session(h.engine_db) as engine:  # the command's engine, shared by its runs
        done = restore.rewrite_backups(
            h, found.by_name(target), str(found.tenant), lambda rid: run_flow(engine, h, rid, live=False)
        )
    if json_out:
        print_json({"target": target, "backups": done})
        return
    table = Table(title=f"backups of {target} rewritten")
    for col in ("backup", "taken", "epoch", "erasures applied"):
        table.add_column(col)
    for b in done:
        table.add_row(b["name"], b["taken_at"], f"{b['epoch_before']} -> {b['epoch']}", ", ".join(b["applied"]))
    console.print(table)
