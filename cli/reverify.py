"""`erasure request reverify ID`: re-verify a sealed request now (the `reverification` flow, in this
process, on the same Prefect API as `request run`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cli.request import IdArg
from cli.request import app as request_app
from cli.shell import HomeOpt, JsonOpt, console, home_of, print_json

if TYPE_CHECKING:
    from rich.table import Table


def _table(doc: dict[str, Any]) -> Table:
    from rich.table import Table

    t = Table(
        title=f"re-verification {doc['sequence']} of {doc['request_id']}: all clear: {str(doc['all_clear']).lower()}"
    )
    t.add_column("tier")
    t.add_column("residue", justify="right")
    for tier, n in doc["residue"].items():
        t.add_row(tier, f"[red]{n}[/red]" if n else "0")
    return t


def _changed_line(changed: dict[str, Any]) -> str:
    if not changed.get("compared"):
        return f"files changed since the pack's scan: not compared ({changed.get('reason')})"
    return (
        f"files changed since the pack's scan ({changed.get('since')}): {changed['added_count']} added,"
        f" {changed['removed_count']} removed, {changed['modified_count']} modified, {changed['unchanged']} unchanged"
    )


@request_app.command("reverify")
def reverify(request_id: IdArg, home: HomeOpt = None, json_out: JsonOpt = False) -> None:
    """Re-verify a sealed request now: run the probes against the current stores and sign a
    re-verification statement beside its pack (the pack is never rewritten).

    Exits 0 when all clear; 7 when the subject is back (the request is reopened with an exception per
    tier: `erasure request run ID` erases again); 6 when the request is not sealed; 4 when there is no
    such request, no pack, or the request vault no longer holds its subject (nothing to probe with).
    """
    # here, not at the top: `request list` and `request --help` must not import the probes
    from cli import prefect_api
    from cli.live import run_with_table
    from erasure.engine_db import Engine
    from service.outcome import Outcome
    from service.reverification import check_reverifiable

    h = home_of(home)
    with Engine.session(h.engine_db) as engine:  # refused here, before a flow run exists, with its reason
        check_reverifiable(engine, h, request_id)
    prefect_api.prepare(h)
    from flows.ended import outcome_of, state_data
    from flows.reverification import reverification

    state = run_with_table(lambda: reverification(request_id, return_state=True), None)
    doc, outcome = state_data(state), outcome_of(state)
    if outcome is None or not isinstance(doc, dict):
        Outcome.failed.raise_error(f"the re-verification did not complete: {state.message or state.name}")
        return
    if json_out:
        print_json({"flow_state": state.name, **doc})
    else:
        console.print(_table(doc))
        console.print(_changed_line(doc["changed_files"]))
        console.print(f"statement: {h.evidence_dir(request_id) / doc['statement']}")
        if outcome is Outcome.reopened:
            console.print(f"request reopened: {state.message}")
    outcome.raise_error(state.message or "the subject is back: request reopened")
