"""`erasure backups ...`: the declared backups of each target (`[[targets.backups]]`), which requests'
subjects they still hold and until when, and the follow-up statements once none does."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.table import Table

from cli.common import HomeOpt, JsonOpt, console, home_of, print_json
from cli.targets import TargetsOpt, targets_for
from erasure.backups import iso, list_backups
from erasure.config import Home
from erasure.engine import open_engine
from proof.history import current_pack

app = typer.Typer(
    help="Declared backups: what they still hold and until when; follow-up statements once they are gone.",
    no_args_is_help=True,
)


def followups(h: Home, now: datetime | None = None) -> dict[str, Any]:
    """Open backup expiries per request; for each request none of whose backups holds the subject any
    longer, sign the follow-up statement beside its pack and close the exceptions. Returns both."""
    from proof.backups_followup import write_followup
    from tasks.backup_holds import by_request, close_ended, open_holds

    now = now or datetime.now(UTC)
    engine = open_engine(h.engine_db)
    try:
        holds = open_holds(engine, h, now)
        written: list[str] = []
        for rid, mine in by_request(holds).items():
            pack = current_pack(h.evidence_dir(rid))
            if all(x.ended for x in mine) and pack.exists() and (h.keys_dir / "engine.pem").exists():
                write_followup(
                    h.evidence_dir(rid),
                    h.keys_dir / "engine.pem",
                    rid,
                    [{"ref": x.ref, "expires_at": x.expires_at, "ended": x.ended} for x in mine],
                    iso(now),
                )
                close_ended(engine, mine)
                written.append(rid)
    finally:
        engine.close()
    return {"open": [x.as_dict() for x in holds if x.request_id not in written], "followups_written": written}


@app.command("list")
def list_(home: HomeOpt = None, targets: TargetsOpt = None, json_out: JsonOpt = False) -> None:
    """Each target's declared backups with their expiry, and each request's subject still held in one
    (until when). A request whose last backup has expired or is gone gets its signed follow-up statement
    (`backups-followup.intoto.json` beside its pack) now."""
    h = home_of(home)
    found = targets_for(h, targets)
    declared = [b.as_dict() for t in found.targets for b in list_backups(t)]
    doc = {"backups": declared, **followups(h)}
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
    done = rewrite_backups(h, found.by_name(target), str(found.tenant))
    if json_out:
        print_json({"target": target, "backups": done})
        return
    table = Table(title=f"backups of {target} rewritten")
    for col in ("backup", "taken", "epoch", "erasures applied"):
        table.add_column(col)
    for b in done:
        table.add_row(b["name"], b["taken_at"], f"{b['epoch_before']} -> {b['epoch']}", ", ".join(b["applied"]))
    console.print(table)


def rewrite_backups(h: Home, t: Any, tenant: str) -> list[dict[str, Any]]:
    """Rewrite every backup of `t`'s rewrite folders (see `rewrite`); one row per backup (ids and times)."""
    import os
    import shutil

    from cli.restore import replay_one
    from cli.run import run_flow
    from erasure import ledger
    from tasks import backup_rewrite as bw
    from tasks.epochs import target_epoch

    out: list[dict[str, Any]] = []
    before = os.environ.get("ERASURE_TARGETS")
    try:
        for src, path, backup in bw.backups_to_rewrite(t):
            copy = bw.restore_copy(t, src, path, backup, tenant)
            try:
                start = target_epoch(copy.target, h)
                book = ledger.open_ledger(h)
                try:
                    pending = ledger.entries(book, t.name, after_epoch=start)
                finally:
                    book.close()
                row = {
                    "name": backup.name,
                    "ref": backup.ref,
                    "taken_at": backup.as_dict()["taken_at"],
                    "epoch_before": start,
                    "epoch": start,
                    "applied": [],
                    "replays": [],
                }
                if pending:
                    os.environ["ERASURE_TARGETS"] = str(copy.targets_file)
                    tag = "rewrite-" + backup.ref.rsplit(":", 1)[-1][:8]
                    for entry in pending:
                        r = replay_one(h, copy.target, entry, tenant, run_flow, tag=tag)
                        row["replays"].append(r)
                    row["applied"] = [e.request_id for e in pending]
                    row["epoch"] = target_epoch(copy.target, h)
                    bw.replace(copy)
                    bw.record(copy, row["epoch"], row["applied"])
                out.append(row)
            finally:
                shutil.rmtree(copy.work, ignore_errors=True)
    finally:
        if before is None:
            os.environ.pop("ERASURE_TARGETS", None)
        else:
            os.environ["ERASURE_TARGETS"] = before
    return out
