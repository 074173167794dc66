"""`erasure backups ...`: the declared backups of each target (`[[targets.backups]]`), which requests'
subjects they still hold and until when, and the follow-up statements once none does."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import typer
from rich.table import Table

from cli.common import HomeOpt, JsonOpt, console, home_of, print_json
from cli.targets import TargetsOpt, targets_for
from erasure.backups import iso, list_backups
from erasure.config import Home
from erasure.engine import open_engine

app = typer.Typer(help="Declared backups: what they still hold and until when; follow-up statements once they "
                  "are gone.", no_args_is_help=True)


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
            pack = h.evidence_dir(rid) / "proof.tar.gz"
            if all(x.ended for x in mine) and pack.exists() and (h.keys_dir / "engine.pem").exists():
                write_followup(h.evidence_dir(rid), h.keys_dir / "engine.pem", rid,
                               [{"ref": x.ref, "expires_at": x.expires_at, "ended": x.ended} for x in mine], iso(now))
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
