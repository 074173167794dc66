"""Preflight: the request exists and is open, belongs to this store's tenant, its reason names nobody,
and nothing of the subject is under litigation hold (hold wins: then nothing is erased)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import RequestBlocked
from erasure.identity import Identity
from erasure.mentions import refuse_if_mentions_subject
from erasure.states import RequestState
from erasure.subject import Subject
from erasure.targets import Target
from memory import holds
from memory.schema import meta, open_store
from tasks.epochs import refuse_if_restored
from tasks.identity import IdentityConflict, resolve_store_ids
from tasks.targets.eraser import eraser_for

DONE_STATES = frozenset({RequestState.awaiting_attestation, RequestState.sealed, RequestState.notified})


class Action(StrEnum):
    """What the run should do with a request."""

    run = "run"  # erase it
    noop = "noop"  # already completed
    blocked = "blocked"  # held: nothing is erased
    conflict = "conflict"  # the request's email also belongs to other store ids the team has not confirmed


@dataclass(frozen=True)
class Preflight:
    """What the run should do (`Action`), the request's state, the active holds, and why (`conflict`)."""

    action: Action
    state: str
    holds: int = 0
    detail: str | None = None


def target_holds(targets: Sequence[Target], subject: Subject) -> int:
    """Rows of the subject under litigation hold in the other targets: a kind whose store marks holds on
    its own rows (an edge carrying a hold attribute) exposes `held(target, subject) -> int` on its
    eraser; hold wins over every target, so the request is blocked before any of them is touched."""
    held = 0
    for target in targets:
        count = getattr(eraser_for(target), "held", None)
        if count is not None:
            held += int(count(target, subject))
    return held


def preflight(
    request_id: str,
    home: Home,
    *,
    reference: bool = True,
    tenant: str | None = None,
    targets: Sequence[Target] = (),
) -> Preflight:
    """Check the request before anything is erased; raises `RequestBlocked`/`NotFound` on refusal.

    `reference` False: the home has no reference store (its targets.toml lists only other stores),
    whose `tenant` the request must then belong to. `targets`: the other targets, whose own holds
    (`target_holds`) block the request too."""
    with Engine.borrow(home.engine_db) as engine:
        row = request_records.get(engine, request_id)
        if row.state in DONE_STATES:
            return Preflight(Action.noop, row.state.value)
        refuse_if_restored(home, request_id=request_id)  # hook (issue 26): a restored store waits for replay
        envelope = request_records.load_envelope(engine, request_id)
        refuse_if_mentions_subject("reason", envelope.reason, envelope.subject)
        if not reference:
            if tenant != row.tenant_id:
                raise RequestBlocked(
                    f"request {request_id} is for tenant {row.tenant_id!r}; these targets belong to {tenant!r}: refused"
                )
            held = target_holds(targets, envelope.subject)
            return Preflight(Action.blocked if held else Action.run, row.state.value, held)
        store = open_store(home.store_dir)
        try:
            tenant = meta(store, "tenant_id")
            if tenant != row.tenant_id:
                raise RequestBlocked(
                    f"request {request_id} is for tenant {row.tenant_id!r}; this store belongs to {tenant!r}: refused"
                )
            try:
                ids = resolve_store_ids(
                    store,
                    Identity.of(envelope.subject),
                    confirmed_aliases=request_records.confirmed_aliases(engine, request_id),
                )
            except IdentityConflict as exc:
                return Preflight(Action.conflict, row.state.value, 0, str(exc))
            held = sum(holds.active_holds(store, sid) for sid in {envelope.subject.id, *ids.all()})
        finally:
            store.close()
        held += target_holds(targets, envelope.subject)
        return Preflight(Action.blocked if held else Action.run, row.state.value, held)
