"""Re-verification flows (`service.reverification`): `reverification` probes one sealed request again and
signs a statement beside its pack; `reverify-due` (a deployment, daily) re-verifies every sealed
request last verified `days` (default 30) or more days ago.

A request whose subject is back is reopened (`service.reverification`) and an event is emitted,
`erasure.request.reopened`, naming the request id and the tiers only, for automations to catch.
"""

from __future__ import annotations

from typing import Annotated, Any

from prefect import State, flow, get_run_logger, task
from prefect.events import emit_event

from erasure.engine_db import Engine
from erasure.request_ids import checked_request_id
from flows.ended import ended, outcome_of
from flows.parameters import RequestId, described
from service.home import home
from service.outcome import Outcome
from service.reverification import DEFAULT_DAYS, due_requests, reverify_request

EVENT_REOPENED = "erasure.request.reopened"
EVENT_REVERIFIED = "erasure.request.reverified"


@task(name="reverify", retries=0)
def reverify_task(request_id: str) -> dict[str, Any]:
    """Probe the request's subject again and sign the statement (ids, counts and keyed hashes only)."""
    h = home()
    with Engine.session(h.engine_db) as engine:  # the flow's: this thread runs with a copy of its context
        return reverify_request(engine, h, request_id)


@flow(name="reverification", flow_run_name="reverify-{request_id}", persist_result=False)
def reverification(request_id: RequestId) -> State:
    """Re-verify one sealed request: Completed when all clear; Failed, named `Reopened`, when the
    subject is back (the request is reopened with an exception per tier, and an event is emitted)."""
    checked_request_id(request_id)
    doc = reverify_task(request_id)
    changed = doc["changed_files"]
    counts = {k: changed[f"{k}_count"] for k in ("added", "removed", "modified")} if changed.get("compared") else {}
    get_run_logger().info(
        "re-verification %s of %s: all clear %s; files changed since the pack's scan: %s",
        doc["sequence"],
        request_id,
        doc["all_clear"],
        counts or "not compared (no scan manifest in the pack)",
    )
    payload = {"request_id": request_id, "sequence": doc["sequence"], "residue_tiers": doc["residue_tiers"]}
    resource = {"prefect.resource.id": f"erasure.request.{request_id}"}
    if doc["reopened"]:
        emit_event(event=EVENT_REOPENED, resource=resource, payload=payload)
        why = f"the subject is back: residue in {', '.join(doc['residue_tiers'])}; request reopened"
        return ended(Outcome.reopened, why, doc)
    emit_event(event=EVENT_REVERIFIED, resource=resource, payload=payload)
    return ended(Outcome.all_clear, f"re-verification {doc['sequence']}: all clear", doc)


@flow(name="reverify-due", persist_result=False)
def reverify_due(
    days: Annotated[
        int,
        described(
            ge=1,
            le=3650,
            description="Re-verify every sealed request last verified (or re-verified) this many days ago or more.",
        ),
    ] = DEFAULT_DAYS,
) -> dict[str, Any]:
    """Re-verify every sealed request last verified `days` or more days ago, each in a flow run of its
    own; returns how many were all clear, reopened, or could not be re-verified (by request id)."""
    out: dict[str, list[str]] = {"all_clear": [], "reopened": [], "not_reverified": []}
    h = home()
    with Engine.session(h.engine_db) as engine:  # the run's engine: its subflows' tasks borrow it
        for rid in due_requests(engine, h, days):
            outcome = outcome_of(reverification(rid, return_state=True))
            key = str(outcome) if outcome in (Outcome.all_clear, Outcome.reopened) else "not_reverified"
            out[key].append(rid)
    get_run_logger().info(
        "re-verified %d request(s): %d all clear, %d reopened, %d not re-verified",
        sum(len(v) for v in out.values()),
        len(out["all_clear"]),
        len(out["reopened"]),
        len(out["not_reverified"]),
    )
    return out
