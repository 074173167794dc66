"""The locks that keep two runs of one request, or two erasures of one store, apart: OS file locks under
the engine's folder, released with their process if it dies. (The flows' one-writer slot is Prefect's own:
`flows.store_slot.store_writer`.)"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager

from erasure.config import Home
from erasure.errors import Conflict


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
