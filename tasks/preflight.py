"""Preflight: the request exists and is open, belongs to this store's tenant, its reason names nobody,
and nothing of the subject is under litigation hold (hold wins: then nothing is erased)."""

from __future__ import annotations

from dataclasses import dataclass

from erasure import requests
from erasure.config import Home
from erasure.engine import open_engine
from erasure.errors import RequestBlocked
from erasure.models import refuse_if_mentions_subject
from erasure.states import RequestState
from memory import holds
from memory.schema import meta, open_store

DONE_STATES = frozenset({RequestState.awaiting_attestation, RequestState.sealed, RequestState.notified})


@dataclass(frozen=True)
class Preflight:
    """What the flow should do: `run`, `noop` (already completed) or `blocked` (held)."""

    action: str
    state: str
    holds: int = 0


def preflight(request_id: str, home: Home) -> Preflight:
    """Check the request before anything is erased; raises `RequestBlocked`/`NotFound` on refusal."""
    engine = open_engine(home.engine_db)
    try:
        row = requests.get(engine, request_id)
        if row.state in DONE_STATES:
            return Preflight("noop", row.state.value)
        envelope = requests.load_envelope(engine, request_id)
        refuse_if_mentions_subject("reason", envelope.reason, envelope.subject)
        store = open_store(home.store_dir)
        try:
            tenant = meta(store, "tenant_id")
            if tenant != row.tenant_id:
                raise RequestBlocked(f"request {request_id} is for tenant {row.tenant_id!r}; this store belongs "
                                     f"to {tenant!r}: refused")
            held = holds.active_holds(store, envelope.subject.id)
        finally:
            store.close()
        return Preflight("blocked" if held else "run", row.state.value, held)
    finally:
        engine.close()
