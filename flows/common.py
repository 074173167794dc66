"""What the flows share: the home, the per-request run lock, the one-writer-per-store slot, the cache key
of a step."""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from pydantic import Field

from erasure.config import Home
from erasure.errors import ConfigError, Conflict, InputError
from erasure.models import is_safe_token
from erasure.targets import Targets, home_targets


def described(description: str, **constraints: Any) -> Any:
    """A pydantic `Field` for a flow parameter whose description reaches the UI form.

    Prefect 3.9.1 builds the parameter schema with an outer `Field(description=<docstring or None>)`
    that overrides the description of a `Field` inside `Annotated` (constraints survive); a
    `json_schema_extra` description is merged instead, so we set both."""
    return Field(description=description, json_schema_extra={"description": description}, **constraints)


RequestId = Annotated[str, described(
    min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$",
    description="The request id (as given by `erasure request submit` or the inbox). Never an email or a name.")]


def home() -> Home:
    """The home named by the environment (the CLI and the worker export it, prefect.yaml passes it to every
    run). `ConfigError` when a deployment carries a `{{ $ERASURE_... }}` placeholder that `prefect deploy`
    could not fill in (it ran without that variable)."""
    import os

    for name in ("ERASURE_HOME", "ERASURE_EVIDENCE"):
        if "{{" in os.environ.get(name, ""):
            raise ConfigError(f"{name} is an unfilled placeholder ({os.environ[name]}): deploy with "
                              "`erasure server start` or export it before `prefect deploy`")
    return Home.resolve().ensure()


def user_reason(exc: BaseException) -> str:
    """Why a run failed, for the request's state: our errors carry a user-facing message without
    identifiers; any other error is named by its type only (its text could hold anything)."""
    from erasure.errors import ErasureError

    return str(exc)[:300] if isinstance(exc, ErasureError) else f"unexpected {type(exc).__name__}: see the run's logs"


def checked_request_id(request_id: str) -> str:
    if not is_safe_token(request_id):
        raise InputError("request_id: not a safe token (letters, digits, '.', '_', '-'; at most 128)")
    return request_id


@contextmanager
def request_lock(h: Home, request_id: str) -> Iterator[None]:
    """One run per request at a time. An OS file lock: a run killed with -9 releases it with its
    process, so a dead run never blocks the next one."""
    lock_dir = h.engine_dir / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"{request_id}.lock", "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise Conflict(f"request {request_id} is already being run by another process") from exc
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


#: The store slot names this process (this flow run and the child flows it runs in-process) holds.
_held_slots: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("erasure_store_slots",
                                                                          default=frozenset())


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


@contextmanager
def store_lock(h: Home) -> Iterator[None]:
    """One erasure of a store at a time, from its fingerprint to its verification, so that no other
    subject's erasure changes the bystander populations in between. Waits (an OS file lock, released
    with its process if that dies)."""
    lock_dir = h.engine_dir / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / "store.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def targets_of(h: Home) -> Targets:
    """The home's targets (`erasure.targets.home_targets`)."""
    return home_targets(h.root, h.store_dir)
