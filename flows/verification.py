"""The `verification` flow: independent probes after the cascade (`service.verification`), in a flow
run of its own (and its own deployment, so a past request can be re-verified later)."""

from __future__ import annotations

from typing import Any

from prefect import State, flow, get_run_logger, task
from prefect.states import Completed, Failed

from erasure import requests
from erasure.engine import open_engine
from erasure.states import RequestState
from erasure.tiers import Tier
from flows.common import RequestId
from service.common import checked_request_id, home
from service.verification import verify_request


@task(name="probes", retries=0)
def probes_task(request_id: str, tiers: list[str] | None = None) -> dict[str, Any]:
    """Run the probes (every tier, or `tiers` and the byte scan); write verification.json; return it
    (ids and counts only)."""
    return verify_request(home(), request_id, tiers)


@flow(name="verification", flow_run_name="verify-{request_id}", persist_result=False)
def verification(request_id: RequestId, tiers: list[Tier] | None = None) -> State:
    """Probe every tier for the request's subject; all clear or a Failed state naming the tiers."""
    checked_request_id(request_id)
    doc = probes_task(request_id, [*(t.value for t in tiers), "bytes"] if tiers else None)
    log = get_run_logger()
    for p in doc["probes"]:
        log.info("probe %s/%s: residue %s, bystanders %s -> %s", p["tier"], p["method"], p["residue"],
                 p["bystanders_before"], p["bystanders_after"])
    if doc["all_clear"]:
        return Completed(message="all clear", data=doc)
    residue = ", ".join(doc.get("residue_tiers", []))
    lost = ", ".join(doc.get("lost_bystander_tiers", []))
    if residue:
        why, name = f"residue found in: {residue}", "Residue"
    elif lost:
        why, name = f"other people's data lost in: {lost} (no residue of the subject)", "BystandersLost"
    else:
        why, name = "no probe ran", "Residue"
    engine = open_engine(home().engine_db)
    try:
        requests.set_state(engine, request_id, RequestState.exception, why)
    finally:
        engine.close()
    return Failed(name=name, message=why)
