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


def refuse_before_the_flow(engine: Engine, h: Home, request_id: str) -> None:
    """Refuse here, before a flow run exists: a restored store waiting for its replay or another
    tenant's request (exit 6), an unknown request (exit 4). The flow's
    preflight checks everything again. Reads request rows and store metadata only, never the vault."""
    from tasks.epochs import refuse_if_restored

    refuse_if_restored(h, request_id=request_id, targets=targets_of(h))  # hook (issue 26): a restored store waits
    tenant = home_tenant(h)
    with engine.lent() as conn:
        request_records.check_tenant(conn, request_id, tenant)


def confirm_aliases(engine: Engine, request_id: str, count: int) -> None:
    """The operator reviewed that the request's email also belongs to `count` other subject ids in the
    store: erase them too, as the same person. `NotFound` for an unknown request."""
    with engine.lent() as conn:
        request_records.get(conn, request_id)
        request_records.confirm_aliases(conn, request_id, count)


def request_row(engine: Engine, request_id: str) -> RequestRow:
    """The request's row in the engine (its state and state detail)."""
    with engine.lent() as conn:
        return request_records.get(conn, request_id)


def verification_doc(h: Home, request_id: str) -> dict[str, Any]:
    """The current run's verification.json (probes, residue, bystanders; no identifiers), `{}` when none
    yet (or it is not a JSON object)."""
    return EvidenceFolder.of(h, request_id).verification or {}
