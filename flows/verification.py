"""The `verification` flow: independent probes after the cascade (`service.verification`), in a flow
run of its own (and its own deployment, so a past request can be re-verified later)."""

from __future__ import annotations

from typing import Any

from prefect import State, flow, get_run_logger, task
from prefect.states import Completed

from erasure.tiers import Tier
from flows.ended import failed
from flows.parameters import RequestId
from service import cascade
from service.common import checked_request_id, home
from service.outcome import Outcome, Result
from service.verification import judge, verdict_of, verify_request


@task(name="probes", retries=0)
def probes_task(request_id: str, tiers: list[str] | None = None) -> dict[str, Any]:
    """Run the probes (every tier, or `tiers` and the byte scan); write verification.json; return it
    (ids and counts only)."""
    return verify_request(home(), request_id, tiers)


@flow(name="verification", flow_run_name="verify-{request_id}", persist_result=False)
def verification(request_id: RequestId, tiers: list[Tier] | None = None) -> State:
    """Probe every tier for the request's subject; all clear or a Failed state naming the tiers (its
    data: the verification document, counts only)."""
    checked_request_id(request_id)
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
    if outcome is Outcome.all_clear:
        return Completed(message=why, data=doc)
    cascade.record(home(), {request_id: Result(outcome, why)})
    return failed(why, doc, name="BystandersLost" if outcome is Outcome.bystanders_lost else "Residue")
