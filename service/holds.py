"""Litigation holds, placed and released once for every surface: the CLI names the subject by id, the
`hold-place` / `hold-release` deployments by a request id (a UI form never holds an identifier).

Hold wins (invariant 3): while a hold is active, a run ends `blocked`. When the last hold on a subject
is released, every request of that subject left `blocked` goes back to `submitted`, so the next run,
`erasure request run --all` or the hourly window, erases it."""

from __future__ import annotations

from typing import TypedDict

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.request_ids import checked_request_id
from erasure.states import RequestState
from erasure.subject import Subject
from memory import holds
from memory.schema import open_store

UNBLOCKED = "hold released: run again to erase"


class HoldPlaced(TypedDict):
    """A placed hold (ids and counts only)."""

    hold_id: int
    active_holds: int


class RequestHoldPlaced(HoldPlaced):
    """A hold placed on the subject of a request."""

    request_id: str


class HoldsReleased(TypedDict):
    """The released holds' ids (ids and counts only)."""

    released: list[int]
    active_holds: int


class RequestHoldsReleased(HoldsReleased):
    """The holds released on the subject of a request."""

    request_id: str


def _checked(
    engine: Engine, reason: str, actor: str, *, request_id: str | None = None, subject_id: str = ""
) -> Subject:
    """Refuse a reason or actor that names the subject (every identifier the vault knows: read by request
    id, or by subject id) or anyone in the vault, before the store's append-only audit log sees it."""
    with engine.lent() as conn:
        subject = (
            request_records.load_envelope(conn, checked_request_id(request_id)).subject
            if request_id is not None
            else request_records.subject_by_id(conn, subject_id)
        )
        request_records.refuse_if_names_a_subject(conn, {"reason": reason, "actor": actor}, subject)
        return subject


def _place(h: Home, subject_id: str, reason: str, actor: str) -> HoldPlaced:
    store = open_store(h.store_dir)
    try:
        hold_id = holds.place(store, subject_id, reason, actor)
        return {"hold_id": hold_id, "active_holds": holds.active_holds(store, subject_id)}
    finally:
        store.close()


def _release(
    engine: Engine, h: Home, subject_id: str, reason: str, actor: str, request_id: str | None
) -> HoldsReleased:
    """Release every active hold on `subject_id`; with none left, the subject's blocked requests go back
    to `submitted`. `NotFound` if there is no active hold."""
    store = open_store(h.store_dir)
    try:
        released = holds.release(store, subject_id, reason, actor)
        active = holds.active_holds(store, subject_id)
    finally:
        store.close()
    with engine.lent() as conn:
        if request_id is not None:
            request_records.log_event(conn, request_id, "hold.released", {"hold_ids": released, "active_holds": active})
        if active == 0:
            for rid in request_records.requests_of_subject(conn, subject_id):
                if request_records.get(conn, rid).state is RequestState.blocked:
                    request_records.set_state(conn, rid, RequestState.submitted, UNBLOCKED)
    return {"released": released, "active_holds": active}


def place_subject_hold(engine: Engine, h: Home, subject_id: str, reason: str, actor: str) -> HoldPlaced:
    """Place a litigation hold on the subject whose platform id is `subject_id` (`erasure hold place`)."""
    _checked(engine, reason, actor, subject_id=subject_id)
    return _place(h, subject_id, reason, actor)


def release_subject_holds(engine: Engine, h: Home, subject_id: str, reason: str, actor: str) -> HoldsReleased:
    """Release every active hold on the subject whose platform id is `subject_id` (`erasure hold
    release`); the subject's blocked requests go back to `submitted`."""
    _checked(engine, reason, actor, subject_id=subject_id)
    return _release(engine, h, subject_id, reason, actor, None)


def place_hold(engine: Engine, h: Home, request_id: str, reason: str, actor: str) -> RequestHoldPlaced:
    """Place a litigation hold on the subject of `request_id` (the `hold-place` deployment)."""
    subject = _checked(engine, reason, actor, request_id=request_id)
    placed = _place(h, subject.id, reason, actor)
    with engine.lent() as conn:
        request_records.log_event(conn, request_id, "hold.placed", dict(placed))
    return {"request_id": request_id, **placed}


def release_hold(engine: Engine, h: Home, request_id: str, reason: str, actor: str) -> RequestHoldsReleased:
    """Release every active hold on the subject of `request_id` (the `hold-release` deployment); the
    subject's blocked requests go back to `submitted`. `NotFound` if the subject has no active hold."""
    subject = _checked(engine, reason, actor, request_id=request_id)
    return {"request_id": request_id, **_release(engine, h, subject.id, reason, actor, request_id)}


KEY_PREFIX = 12
"""How much of a subject's keyed hash a hold listing shows (never the subject id)."""


def list_holds(h: Home) -> list[dict[str, object]]:
    """Every hold: id, a prefix of the keyed hash naming its subject, status, dates, reasons, actors."""
    conn = open_store(h.store_dir)
    try:
        rows = holds.list_holds(conn)
    finally:
        conn.close()
    return [
        {
            "hold_id": x.hold_id,
            "subject_key_prefix": x.subject_key[:KEY_PREFIX],
            "active": x.active,
            "reason": x.reason,
            "placed_at": x.placed_at,
            "placed_by": x.placed_by,
            "released_at": x.released_at,
            "release_reason": x.release_reason,
            "released_by": x.released_by,
        }
        for x in rows
    ]
