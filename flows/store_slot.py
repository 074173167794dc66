"""One writer per store: the store's slot, a Prefect global concurrency limit of 1 that every flow
which writes to a store holds, so requests on one store queue instead of meeting in SQLite's busy
timeout."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from erasure.config import Home

#: The store slot names this process (this flow run and the child flows it runs in-process) holds.
_held_slots: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("erasure_store_slots", default=frozenset())


def store_limit_name(h: Home) -> str:
    """The Prefect global concurrency limit of the store `h` names: one per store path. Every worker gets
    the same ERASURE_HOME from the deployment (prefect.yaml), so every worker computes the same name."""
    return "erasure-store-" + hashlib.sha256(str(h.store_dir.resolve()).encode()).hexdigest()[:16]


def ensure_store_limit(name: str) -> None:
    """Create the store's global concurrency limit (1 slot, active) unless it exists as such."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate, GlobalConcurrencyLimitUpdate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            limit = client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            with contextlib.suppress(ObjectAlreadyExists):  # another run created it first
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1, active=True))
            return
        if limit.limit != 1 or not limit.active:
            client.update_global_concurrency_limit(name, GlobalConcurrencyLimitUpdate(limit=1, active=True))


@contextmanager
def store_writer(h: Home) -> Iterator[None]:
    """One writer per store: hold the store's Prefect global concurrency slot (limit 1, strict) for the
    block, so requests on one store queue (each waits for the slot) instead of meeting in SQLite's busy
    timeout. Workers on any machine share the slot through the Prefect server; a run killed outright
    frees it when its lease runs out.

    Re-entrant within one flow run: a child flow run in-process (verification) that asks for the same
    slot while its parent holds it goes on, rather than waiting for its own parent for ever."""
    from prefect.concurrency.sync import concurrency

    name = store_limit_name(h)
    held = _held_slots.get()
    if name in held:
        yield
        return
    log = _run_logger()
    ensure_store_limit(name)
    t0 = time.monotonic()
    # strict: a missing limit is an error, never a silent pass. A failed lease renewal (a moment without
    # the API) only warns: stopping an erasure half-way over it would cost more than the small risk that
    # the lease lapses meanwhile (every step is idempotent, and the store's own lock still holds).
    with concurrency(name, occupy=1, strict=True, raise_on_lease_renewal_failure=False):
        log.info("store writer slot %s acquired after %.1f s", name, time.monotonic() - t0)
        token = _held_slots.set(held | {name})
        try:
            yield
        finally:
            _held_slots.reset(token)
            log.info("store writer slot %s released", name)


def _run_logger() -> Any:
    import logging

    from prefect import get_run_logger
    from prefect.exceptions import MissingContextError

    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("erasure.store_writer")
