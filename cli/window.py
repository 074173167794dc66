"""`erasure request run ID ID ...` / `--all`: run several requests as one erasure window, with a live
table of every request's progress, then one line per request."""

from __future__ import annotations

import contextlib
from typing import Any

from rich.table import Table

from cli import prefect_api
from cli.live import run_with_table
from cli.shell import console, print_json
from cli.targets import targets_for
from erasure import request_records as requests
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import ErasureError
from erasure.tiers import CASCADE_ORDER
from service.home import engine_key_present
from service.outcome import Outcome, Result, window_error


def progress_table(engine: Engine, request_ids: list[str]) -> Table:
    """Every request's state and how many of its nine steps are finished (counts only)."""
    t = Table(title=f"erasure window: {len(request_ids)} request(s)")
    for col in ("request", "state", "steps done"):
        t.add_column(col, justify="right" if col == "steps done" else "left")
    with engine.lent() as conn:
        for rid in request_ids:
            try:
                row = requests.get(conn, rid)
            except ErasureError:
                t.add_row(rid, "[red]unknown[/red]", "")
                continue
            done = sum(1 for s in requests.steps(conn, rid) if s.status.value in ("erased", "exception", "skipped"))
            t.add_row(rid, row.state.value, f"{done}/{len(CASCADE_ORDER)}")
    return t


def _ids_to_show(engine: Engine, request_ids: list[str] | None) -> list[str]:
    from service import cascade  # the driver brings the probes (numpy, hyperscan): only for a run

    return request_ids or cascade.pending(engine)


def run_window(engine: Engine, h: Home, request_ids: list[str] | None, *, json_out: bool, targets: Any) -> None:
    """Run the erasure-window flow in this process (on the command's engine, `engine`: the flow's
    session is the command's); print per-request outcomes; raise on any failure."""
    engine_key_present(h)
    targets_for(h, targets)
    prefect_api.prepare(h)
    shown = _ids_to_show(engine, request_ids)
    from flows.ended import state_data
    from flows.window import erasure_window

    with contextlib.ExitStack() as watching:
        if not json_out and shown:  # the live table reads on its own connection, beside the run's
            watcher = watching.enter_context(Engine.open(h.engine_db))
        state = run_with_table(
            lambda: erasure_window(request_ids, return_state=True),
            (lambda: progress_table(watcher, shown)) if not json_out and shown else None,
            transient=True,
        )
    data = state_data(state)
    report: dict[str, dict[str, Any]] = (data or {}).get("requests", {}) if isinstance(data, dict) else {}
    results = {rid: Result.from_json(r) for rid, r in report.items()}
    if json_out:
        print_json({"flow_state": state.name, "message": state.message, "requests": report})
    else:
        t = Table(title="erasure window")
        for col in ("request", "outcome", "detail", "pack"):
            t.add_column(col)
        for rid, r in results.items():
            outcome = r.outcome if r is not None else Outcome.failed
            style = (
                "dim"
                if outcome is Outcome.noop
                else "yellow"
                if outcome is Outcome.held
                else "green"
                if outcome.settled
                else "red"
            )
            t.add_row(
                rid,
                f"[{style}]{outcome.value}[/{style}]",
                (r.detail if r else None) or "",
                (r.pack if r else None) or "",
            )
        console.print(t)
        console.print(f"flow state: {state.name}: {state.message or ''}")
    if not report and not state.is_completed():
        Outcome.failed.raise_error(state.message or "the window did not run")
    error = window_error(r.outcome if r is not None else Outcome.failed for r in results.values())
    if error is not None:
        raise error
