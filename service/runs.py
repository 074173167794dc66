"""Around one run of the erasure-request flow from a command (`erasure request run`, the demo, a
replay): what is refused before a flow run exists, and what the run left (the request's row and its
verification), read once for the command to print."""

from __future__ import annotations

from typing import Any

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.request_records import RequestRow
from proof.evidence_folder import EvidenceFolder
from service.home import targets_of
from service.scope import home_tenant


def refuse_before_the_flow(h: Home, request_id: str) -> None:
    """Refuse here, before a flow run exists: a restored store waiting for its replay or another
    tenant's request (exit 6), an unknown request (exit 4). The flow's
    preflight checks everything again. Reads request rows and store metadata only, never the vault."""
    from tasks.epochs import refuse_if_restored

    refuse_if_restored(h, request_id=request_id, targets=targets_of(h))  # hook (issue 26): a restored store waits
    tenant = home_tenant(h)
    with Engine.borrow(h.engine_db) as engine:
        request_records.check_tenant(engine, request_id, tenant)


def confirm_aliases(h: Home, request_id: str, count: int) -> None:
    """The operator reviewed that the request's email also belongs to `count` other subject ids in the
    store: erase them too, as the same person. `NotFound` for an unknown request."""
    with Engine.borrow(h.engine_db) as engine:
        request_records.get(engine, request_id)
        request_records.confirm_aliases(engine, request_id, count)


def request_row(h: Home, request_id: str) -> RequestRow:
    """The request's row in the engine (its state and state detail)."""
    with Engine.borrow(h.engine_db) as engine:
        return request_records.get(engine, request_id)


def verification_doc(h: Home, request_id: str) -> dict[str, Any]:
    """The current run's verification.json (probes, residue, bystanders; no identifiers), `{}` when none
    yet (or it is not a JSON object)."""
    return EvidenceFolder.of(h, request_id).verification or {}
