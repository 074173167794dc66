"""`erasure request run ID`: run the erasure-request flow with live per-step progress.

On `PREFECT_API_URL` when it is set (a long-lived server, e.g. `make serve`), else on a local
ephemeral Prefect server started for this process.

What the command runs is imported in its body: `erasure request --help` imports this module to list
the command (cli/request.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli.request import app as request_app
from cli.shell import HomeOpt, JsonOpt, console, home_of, print_json
from cli.targets import TargetsOpt, targets_for
from erasure.errors import InputError

if TYPE_CHECKING:
    from rich.table import Table

    from erasure.config import Home
    from erasure.engine_db import Engine

__all__ = ["run", "run_flow", "steps_table"]


def steps_table(engine: Engine, h: Home, request_id: str, title: str = "cascade") -> Table:
    """Per-tier before/after table from the engine's step records (counts only)."""
    from rich.table import Table

    from erasure.tiers import CASCADE_ORDER
    from service.scope import step_records

    by_target = step_records(engine, h, request_id)
    t = Table(title=f"{title}: {request_id}")
    for col in ("#", "target", "tier", "status", "before", "after", "removed digest"):
        t.add_column(col, justify="right" if col in ("#", "before", "after") else "left")
    for name, recs in by_target.items():
        for i, tier in enumerate(CASCADE_ORDER, 1):
            r = recs.get(tier.value)
            if r is None:
                t.add_row(str(i), name, tier.value, "[dim]pending[/dim]", "", "", "")
                continue
            status = r.status.value
            if status == "skipped" and str((r.detail or {}).get("reason", "")).startswith("not applicable"):
                status = "n/a"
            style = {"erased": "green", "exception": "yellow", "failed": "red", "running": "cyan", "n/a": "dim"}.get(
                status, ""
            )
            t.add_row(
                str(i),
                name,
                tier.value,
                f"[{style}]{status}[/{style}]" if style else status,
                "" if r.before_count is None else str(r.before_count),
                "" if r.after_count is None else str(r.after_count),
                (r.removed_digest or "")[:16],
            )
    return t


def verification_table(doc: dict[str, Any]) -> Table:
    """The verification's probes, one row each (counts only)."""
    from rich.table import Table

    t = Table(title=f"verification: all_clear: {str(doc.get('all_clear')).lower()}")
    for col in ("tier", "method", "residue", "bystanders before", "bystanders after"):
        t.add_column(col, justify="right" if col not in ("tier", "method") else "left")
    for p in doc.get("probes", []):
        t.add_row(p["tier"], p["method"], str(p["residue"]), str(p["bystanders_before"]), str(p["bystanders_after"]))
    return t


def run_flow(request_id: str, h: Home, *, live: bool = True) -> Any:
    """Run the flow in this process, refreshing the step table while it runs. Returns its final state."""
    from cli import prefect_api
    from cli.live import run_with_table
    from erasure.engine_db import Engine
    from service import runs
    from service.home import engine_key_present

    engine_key_present(h)
    prefect_api.prepare(h)
    runs.refuse_before_the_flow(h, request_id)
    from flows.erasure_request import erasure_request

    if not live:
        return run_with_table(lambda: erasure_request(request_id, return_state=True), None)
    with Engine.open(h.engine_db) as watcher:  # the live table reads on its own connection, beside the run's
        return run_with_table(
            lambda: erasure_request(request_id, return_state=True), lambda: steps_table(watcher, h, request_id)
        )


@request_app.command("run")
def run(
    ctx: typer.Context,
    request_ids: Annotated[
        list[str] | None,
        typer.Argument(
            help="The request(s) to erase. Several ids (or --all) run as one erasure window.", show_default=False
        ),
    ] = None,
    all_submitted: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Run every submitted request (and every one a dead run left running) as one window; "
            "held ones are skipped and reported.",
        ),
    ] = False,
    home: HomeOpt = None,
    json_out: JsonOpt = False,
    targets: TargetsOpt = None,
    confirm_aliases: Annotated[
        int | None,
        typer.Option(
            "--confirm-aliases",
            min=1,
            show_default=False,
            help="The request's email also belongs to this many other subject ids in the store, which you "
            "reviewed: erase them too, as the same person (one request only).",
        ),
    ] = None,
) -> None:
    """Run the erasure: cascade, independent verification, engine-signed proof pack.

    Exits 0 only when the cascade completed and verification is all clear (the request then awaits the
    DPO's attestation); 6 when a litigation hold blocks it or the request is another tenant's; 4 when
    there is no such request; 7 when probes found residue; 1 otherwise. Several ids, or --all, run as
    one window (one scrub, one byte scan, one bystander baseline for all): held requests are skipped
    and reported; the exit code is 0 when every other request ended all clear, else 7 if any had
    residue, 10 if any lost other people's data, 1 otherwise.
    """
    from cli.window import run_window
    from erasure.engine_db import Engine
    from service import runs
    from service.outcome import Outcome, Result
    from service.pack_files import pack_verdict

    ids = list(dict.fromkeys(request_ids or []))
    if all_submitted and ids:
        raise InputError("give request ids or --all, not both")
    if not all_submitted and not ids:
        raise InputError("give a request id (or several, or --all)")
    ctx.with_resource(Engine.session(home_of(home).engine_db))  # the run's engine: one connection
    if all_submitted or len(ids) > 1:
        if confirm_aliases is not None:
            raise InputError("--confirm-aliases applies to one request: run that request on its own")
        run_window(home_of(home), ids or None, json_out=json_out, targets=targets)
        return
    request_id = ids[0]
    h = home_of(home)
    targets_for(h, targets)  # validates the file (exit 3 naming the key) and exports it to the flow
    if confirm_aliases is not None:
        runs.confirm_aliases(h, request_id, confirm_aliases)
    state = run_flow(request_id, h, live=not json_out)
    from flows.ended import state_data

    result = Result.from_json(state_data(state))
    outcome = result.outcome if result is not None else Outcome.failed
    doc = runs.verification_doc(h, request_id)
    row = runs.request_row(h, request_id)
    pack = pack_verdict(h, request_id)
    if json_out:
        print_json(
            {
                "request_id": request_id,
                "flow_state": state.name,
                "message": state.message,
                "outcome": outcome.value,
                "state": row.state.value,
                "state_detail": row.state_detail,
                "all_clear": pack["all_clear"] if pack else False,
                "pack_status": pack["status"] if pack else None,
                "probes_all_clear": doc.get("all_clear"),
                "exceptions": pack["exceptions"] if pack else [],
                "verification": doc.get("probes", []),
            }
        )
    else:
        if doc:
            console.print(verification_table(doc))
        console.print(f"flow state: {state.name}: {state.message or ''}")
        console.print(f"request state: {row.state.value}" + (f" ({row.state_detail})" if row.state_detail else ""))
        if pack:
            console.print(f"pack status: {pack['status']}", markup=False)
            for e in pack["exceptions"]:
                console.print(f"  exception {e['tier']}: {e['kind']}: {e['meaning']}", markup=False)
    outcome.raise_error(state.message or "the cascade did not complete")
