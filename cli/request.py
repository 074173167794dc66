"""`erasure request ...` commands: submit an envelope, show and list requests, and run their clocks.

Output never names the subject: request ids, states, dates and counts only.

What a command runs is imported in its body: `erasure request --help` builds every command of the group
(these, `request run`, `request reverify`) and must not import the models, the service layer or rich's
tables to list them (tests/test_cli_lazy.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli.shell import HomeOpt, JsonOpt, console, home_of, print_json
from erasure.errors import InputError

if TYPE_CHECKING:
    import apsw

app = typer.Typer(
    help="Submit erasure requests, show them, and pause, resume or extend their clocks.", no_args_is_help=True
)

ReasonOpt = Annotated[str, typer.Option("--reason", help="Why (kept as evidence: must not name the subject).")]
IdArg = Annotated[str, typer.Argument(help="The request id.", show_default=False)]


@contextmanager
def _engine(home: Path | None) -> Iterator[apsw.Connection]:
    from erasure.engine_db import Engine  # the request records: pydantic

    with Engine.borrow(home_of(home).engine_db) as conn:
        yield conn


@app.command()
def submit(
    file: Annotated[Path, typer.Argument(help="The request envelope (JSON).", show_default=False)],
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Validate an envelope, vault it and start its legal clock (idempotent for the same file)."""
    from erasure.clocks import iso_utc
    from service.intake import submit_file

    res = submit_file(home_of(home), file)
    out = {
        "request_id": res.request_id,
        "legal_basis": res.legal_basis.value,
        "created": res.created,
        "deadline": iso_utc(res.deadline),
        "target": iso_utc(res.target),
    }
    if json_out:
        print_json(out)
        return
    verb = "submitted" if res.created else "already present (identical envelope)"
    console.print(f"request {res.request_id} {verb}", markup=False, highlight=False, soft_wrap=True)
    console.print(
        f"  legal basis {out['legal_basis']}  deadline {out['deadline']}  target {out['target']}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@app.command()
def show(request_id: IdArg, home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """A request's state, clock, data classes and step summary (never the subject's identifiers)."""
    from rich.table import Table

    from erasure import request_records as requests
    from erasure.clocks import ClockPolicy, iso_utc
    from service.clocks import clock_view

    with _engine(home) as conn:
        row = requests.get(conn, request_id)
        clock = requests.deadline_of(conn, request_id, now=datetime.now(UTC), policy=ClockPolicy.from_env())
        step_list = [
            {"step": s.step, "status": s.status.value, "before_count": s.before_count, "after_count": s.after_count}
            for s in requests.steps(conn, request_id)
        ]
    out: dict[str, Any] = {
        **clock_view(request_id, clock),
        "tenant_id": row.tenant_id,
        "legal_basis": row.legal_basis.value,
        "state": row.state.value,
        "state_detail": row.state_detail,
        "received_at": iso_utc(row.received_at),
        "data_classes": [t.value for t in row.data_classes],
        "steps": step_list,
    }
    if json_out:
        print_json(out)
        return
    table = Table(show_header=False, box=None)
    for key in (
        "request_id",
        "tenant_id",
        "legal_basis",
        "state",
        "state_detail",
        "received_at",
        "deadline",
        "target",
        "days_left",
        "paused",
        "extended",
    ):
        table.add_row(key, "" if out[key] is None else str(out[key]))
    table.add_row("data_classes", ", ".join(out["data_classes"]))
    console.print(table)
    if step_list:
        steps_table = Table("step", "status", "before", "after")
        for s in step_list:
            steps_table.add_row(str(s["step"]), str(s["status"]), str(s["before_count"]), str(s["after_count"]))
        console.print(steps_table)


@app.command("list")
def list_(home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """Every request, soonest deadline first."""
    from rich.table import Table

    from erasure import request_records as requests
    from erasure.clocks import ClockPolicy
    from service.clocks import clock_view

    now = datetime.now(UTC)
    policy = ClockPolicy.from_env()
    rows: list[dict[str, Any]] = []
    with _engine(home) as conn:
        for r in requests.list_requests(conn):
            clock = requests.deadline_of(conn, r.request_id, now=now, policy=policy)
            rows.append({**clock_view(r.request_id, clock), "state": r.state.value, "legal_basis": r.legal_basis.value})
    if json_out:
        print_json(rows)
        return
    table = Table("request", "state", "basis", "deadline", "days left")
    for d in rows:
        table.add_row(d["request_id"], d["state"], d["legal_basis"], d["deadline"], str(d["days_left"]))
    console.print(table)


_DONE = {"pause": "paused", "resume": "resumed", "extend": "extended"}


def _clock_command(
    op: str, request_id: str, reason: str, home: Path | None, json_out: bool, until: date | None = None
) -> None:
    from service.clocks import clock_operation

    out = clock_operation(home_of(home), op, request_id, reason, until=until)
    if json_out:
        print_json(out)
        return
    console.print(
        f"request {request_id}: clock {_DONE[op]}; deadline {out['deadline']} "
        f"({out['days_left']} days left), target {out['target']}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@app.command()
def pause(request_id: IdArg, reason: ReasonOpt, home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """Pause the clock while the subject's identity is verified."""
    _clock_command("pause", request_id, reason, home, json_out)


@app.command()
def resume(request_id: IdArg, reason: ReasonOpt, home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """Resume a paused clock; the deadline moves by the paused time."""
    _clock_command("resume", request_id, reason, home, json_out)


@app.command()
def extend(
    request_id: IdArg,
    reason: ReasonOpt,
    until: Annotated[
        str | None,
        typer.Option("--until", help="New deadline day (YYYY-MM-DD); default: the legal maximum.", show_default=False),
    ] = None,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Extend the deadline once (GDPR: two further months; CCPA: 45 days), with notice before it passes."""
    day: date | None = None
    if until is not None:
        try:
            day = date.fromisoformat(until)
        except ValueError:
            raise InputError("--until: not an ISO date (YYYY-MM-DD)") from None
    _clock_command("extend", request_id, reason, home, json_out, until=day)
