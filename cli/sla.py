"""`erasure sla [--json]`: every open request against its legal deadline, as the sla-monitor flow sees
it (`erasure.sla`). Register as a top-level command: `("cli.sla", "sla")` in `cli.main._COMMANDS`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from cli.shell import HomeOpt, JsonOpt, console, home_of, print_json
from erasure.clocks import ClockPolicy
from erasure.engine_db import Engine
from erasure.sla import DEFAULT_AT_RISK_DAYS, sla_rows, to_markdown


def _status(d: dict[str, object]) -> str:
    if d["breached"]:
        return "[bold red]BREACHED[/]"
    if d["at_risk"]:
        return "[yellow]at risk[/]"
    return "[green]ok[/]"


def sla(
    home: HomeOpt = None,
    json_out: JsonOpt = False,
    at_risk_days: Annotated[
        int, typer.Option("--at-risk-days", min=0, help="Flag requests with at most this many days left.")
    ] = DEFAULT_AT_RISK_DAYS,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print the Markdown report instead.")] = False,
) -> None:
    """Open requests against their legal deadlines (days left, state, extended, paused, at risk, breached)."""
    h = home_of(home)
    now = datetime.now(UTC)
    with Engine.session(h.engine_db) as engine:  # the command's engine
        rows = sla_rows(engine.conn, now=now, policy=ClockPolicy.from_env(), at_risk_days=at_risk_days)
    if json_out:
        print_json([r.as_dict() for r in rows])
        return
    if markdown:
        console.print(to_markdown(rows, now=now, at_risk_days=at_risk_days), markup=False, highlight=False)
        return
    from rich.table import Table  # only for the table: `--json` does not pay for it

    table = Table(
        "request",
        "basis",
        "state",
        "deadline (UTC)",
        "days left",
        "extended",
        "paused",
        "status",
        title=f"Open erasure requests ({len(rows)})",
    )
    for r in rows:
        d = r.as_dict()
        table.add_row(
            r.request_id,
            d["legal_basis"],
            d["state"],
            str(d["deadline"])[:16].replace("T", " "),
            str(r.days_left),
            "yes" if r.extended else "",
            "yes" if r.paused else "",
            _status(d),
        )
    console.print(table)


if __name__ == "__main__":  # pragma: no cover
    typer.run(sla)
