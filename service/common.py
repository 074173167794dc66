"""What every operation shares: the home from the environment, request ids checked as tokens, a failure's
user-facing reason, and the locks that keep two runs of one request (or two erasures of one store)
apart. No Prefect here: the flows' one-writer slot is Prefect's own (`flows.store_slot.store_writer`)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from erasure.config import Home
from erasure.errors import ConfigError, Conflict, ErasureError, InputError
from erasure.models import is_safe_token
from erasure.targets import Targets, home_targets


def home() -> Home:
    """The home named by the environment (the CLI and the worker export it, prefect.yaml passes it to every
    run). `ConfigError` when a deployment carries a `{{ $ERASURE_... }}` placeholder that `prefect deploy`
    could not fill in (it ran without that variable)."""
    for name in ("ERASURE_HOME", "ERASURE_EVIDENCE"):
        if "{{" in os.environ.get(name, ""):
            raise ConfigError(
                f"{name} is an unfilled placeholder ({os.environ[name]}): deploy with "
                "`erasure server start` or export it before `prefect deploy`"
            )
    return Home.resolve().ensure()


def user_reason(exc: BaseException) -> str:
    """Why a run failed, for the request's state: our errors carry a user-facing message without
    identifiers; any other error is named by its type only (its text could hold anything)."""
    return str(exc)[:300] if isinstance(exc, ErasureError) else f"unexpected {type(exc).__name__}: see the run's logs"


def checked_request_id(request_id: str) -> str:
    """`request_id` when it is a safe token, else `InputError`."""
    if not is_safe_token(request_id):
        raise InputError("request_id: not a safe token (letters, digits, '.', '_', '-'; at most 128)")
    return request_id


def engine_key_present(h: Home) -> None:
    """`ConfigError` (before anything is erased) when the home has no engine signing key."""
    key = h.keys_dir / "engine.pem"
    if not key.exists():
        raise ConfigError(f"no engine signing key at {key}: run `erasure keys generate --role engine` first")


def targets_of(h: Home) -> Targets:
    """The home's targets (`erasure.targets.home_targets`)."""
    return home_targets(h.root, h.store_dir)


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
