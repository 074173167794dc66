"""The `verification` flow: independent probes after the cascade (`service.verification`), in a flow
run of its own (and its own deployment, so a past request can be re-verified later).

It returns its outcome. As the `erasure-request` flow's subflow it writes no request state: the
cascade driver records the outcome, once. Run on its own (its deployment) it is its request's
driver, and records the outcome the same way (`service.cascade.record`)."""

from __future__ import annotations

from typing import Any

from prefect import State, flow, get_run_logger, task
from prefect.context import FlowRunContext

from erasure.engine_db import Engine
from erasure.request_ids import checked_request_id
from erasure.tiers import Tier
from flows.ended import ended
from flows.parameters import RequestId
from service import cascade
from service.home import home
from service.outcome import Outcome, Result
from service.verification import judge, verdict_of, verify_request


@task(name="probes", retries=0)
def probes_task(request_id: str, tiers: list[str] | None = None) -> dict[str, Any]:
    """Run the probes (every tier, or `tiers` and the byte scan); write verification.json; return it
    (ids and counts only)."""
    h = home()
    with Engine.session(h.engine_db) as engine:  # the flow's: this thread runs with a copy of its context
        return verify_request(engine, h, request_id, tiers)


@flow(name="verification", flow_run_name="verify-{request_id}", persist_result=False)
def verification(request_id: RequestId, tiers: list[Tier] | None = None) -> State:
    """Probe every tier for the request's subject; all clear or a Failed state naming the tiers (its
    data: the verification document, counts only)."""
    checked_request_id(request_id)
    with Engine.session(home().engine_db) as engine:  # its parent's, when it has one
        doc = probes_task(request_id, [*(t.value for t in tiers), "bytes"] if tiers else None)
        log = get_run_logger()
        for p in doc["probes"]:
            log.info(
                "probe %s/%s: residue %s, bystanders %s -> %s",
                p["tier"],
                p["method"],
                p["residue"],
                p["bystanders_before"],
                p["bystanders_after"],
            )
        outcome, why = judge(verdict_of(doc))
        if outcome is not Outcome.all_clear and not _a_subflow():
            cascade.record(engine, {request_id: Result(outcome, why)})
    return ended(outcome, why, doc)


def _a_subflow() -> bool:
    """Whether this run is another flow's subflow (its parent records the outcome)."""
    ctx = FlowRunContext.get()
    return ctx is not None and ctx.flow_run is not None and ctx.flow_run.parent_task_run_id is not None
