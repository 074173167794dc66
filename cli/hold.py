"""`erasure hold ...`: litigation holds on a subject. Output shows hold ids and a prefix of the keyed
hash that names the subject in the store, never the subject id."""

from __future__ import annotations

import getpass
from typing import Annotated

import typer
from rich.table import Table

from cli.shell import HomeOpt, JsonOpt, console, home_of, print_json
from erasure.engine_db import Engine
from service.holds import list_holds as all_holds
from service.holds import place_subject_hold, release_subject_holds

app = typer.Typer(
    help="Litigation holds: while one is active on a subject, nothing of them is erased.", no_args_is_help=True
)

SubjectOpt = Annotated[
    str, typer.Option("--subject-id", help="The subject's platform id (never printed).", show_default=False)
]
ReasonOpt = Annotated[
    str,
    typer.Option(
        "--reason", help="Why (audited; must not name the subject nor anyone in the request vault).", show_default=False
    ),
]
ActorOpt = Annotated[str | None, typer.Option("--actor", help="Who does it (default: login name).", show_default=False)]


def _actor(actor: str | None) -> str:
    if actor:
        return actor
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "cli"


@app.command()
def place(
    subject_id: SubjectOpt, reason: ReasonOpt, actor: ActorOpt = None, home: HomeOpt = None, json_out: JsonOpt = False
) -> None:
    """Place a hold on a subject."""
    h = home_of(home)
    with Engine.session(h.engine_db) as engine:  # the command's engine
        placed = place_subject_hold(engine, h, subject_id, reason, _actor(actor))
    if json_out:
        print_json(placed)
    else:
        console.print(f"hold {placed['hold_id']} placed; {placed['active_holds']} active hold(s) on that subject")


@app.command()
def release(
    subject_id: SubjectOpt, reason: ReasonOpt, actor: ActorOpt = None, home: HomeOpt = None, json_out: JsonOpt = False
) -> None:
    """Release every active hold on a subject."""
    h = home_of(home)
    with Engine.session(h.engine_db) as engine:  # the command's engine
        released = release_subject_holds(engine, h, subject_id, reason, _actor(actor))["released"]
    if json_out:
        print_json({"released": released})
    else:
        console.print(f"released hold(s): {', '.join(map(str, released))}")


@app.command("list")
def list_holds(home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """Every hold: id, subject key prefix, dates, status."""
    rows = all_holds(home_of(home))
    if json_out:
        print_json(rows)
        return
    t = Table(title=f"holds ({sum(bool(x['active']) for x in rows)} active)")
    for col in ("id", "subject key", "status", "placed", "released", "reason"):
        t.add_column(col)
    for x in rows:
        t.add_row(
            str(x["hold_id"]),
            f"{x['subject_key_prefix']}…",
            "active" if x["active"] else "released",
            str(x["placed_at"]),
            str(x["released_at"] or ""),
            str(x["reason"]),
        )
    console.print(t)
