"""What the flows share: the home, the per-request run lock, the cache key of a step."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from pydantic import Field

from erasure.config import Home
from erasure.errors import Conflict, InputError
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
    """The home named by the environment (the CLI and the worker export it)."""
    return Home.resolve().ensure()


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
