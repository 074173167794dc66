"""Intake and the request row: submit (vault the envelope, start the clock), read, list, and move a
request's state. Request rows hold everything about a request except whom it is for."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import apsw

from erasure.clocks import CLOCK_SKEW, ClockPolicy, LegalBasis, effective_deadline, iso_utc, parse_utc
from erasure.errors import Conflict, InputError, NotFound, RequestBlocked
from erasure.request_records._common import canonical_json, insert_event, utc_now, writing
from erasure.request_records.vault import envelope_digest, vault_subjects
from erasure.states import RequestState
from erasure.tiers import Tier

if TYPE_CHECKING:  # imported where an envelope is read (see `erasure.request_records.vault`)
    from erasure.models import ErasureRequestEnvelope

SALT_BYTES = 32


_REQUEST_COLUMNS = (
    "request_id, tenant_id, legal_basis, data_classes, received_at, envelope_sha256, state, "
    "state_detail, deadline, target, created_at, updated_at"
)


@dataclass(frozen=True)
class RequestRow:
    """One row of `requests`: everything about a request except whom it is for."""

    request_id: str
    tenant_id: str
    legal_basis: LegalBasis
    data_classes: tuple[Tier, ...]
    received_at: datetime
    envelope_sha256: str
    state: RequestState
    state_detail: str | None
    deadline: datetime
    target: datetime
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class SubmitResult:
    """What `submit` did: `created` is False when the identical envelope was already vaulted."""

    request_id: str
    created: bool
    legal_basis: LegalBasis
    deadline: datetime
    target: datetime


def _row(r: tuple[Any, ...]) -> RequestRow:
    return RequestRow(
        request_id=r[0],
        tenant_id=r[1],
        legal_basis=LegalBasis(r[2]),
        data_classes=tuple(Tier(t) for t in json.loads(r[3])),
        received_at=parse_utc(r[4]),
        envelope_sha256=r[5],
        state=RequestState(r[6]),
        state_detail=r[7],
        deadline=parse_utc(r[8]),
        target=parse_utc(r[9]),
        created_at=parse_utc(r[10]),
        updated_at=parse_utc(r[11]),
    )


def submit(
    conn: apsw.Connection, envelope: ErasureRequestEnvelope, *, now: datetime, policy: ClockPolicy | None = None
) -> SubmitResult:
    """Vault a validated envelope, start its clock and log 'request.submitted' (no identifier).

    Idempotent: the identical envelope again returns `created=False` and writes nothing; the same
    request id with another body raises `Conflict`. `policy` defaults to `ClockPolicy.from_env()`."""
    now = utc_now(now)
    policy = policy or ClockPolicy.from_env()
    if envelope.received_at > now + CLOCK_SKEW:
        raise InputError("received_at: is in the future")
    digest = envelope_digest(envelope)
    clock = effective_deadline(envelope.legal_basis, envelope.received_at, [], now=now, policy=policy)
    rid = envelope.request_id
    with writing(conn):
        existing = conn.execute(
            "SELECT envelope_sha256, deadline, target FROM requests WHERE request_id = ?", (rid,)
        ).fetchone()
        if existing is not None:
            if existing[0] != digest:
                raise Conflict(f"request {rid} already exists with a different body")
            return SubmitResult(
                request_id=rid,
                created=False,
                legal_basis=envelope.legal_basis,
                deadline=parse_utc(existing[1]),
                target=parse_utc(existing[2]),
            )
        # the envelope checked its id against its own subject; here against everyone in the vault
        from erasure.mentions import refuse_if_mentions_anyone

        refuse_if_mentions_anyone("request_id", rid, vault_subjects(conn), strict=True)
        ts = iso_utc(now)
        conn.execute(
            f"INSERT INTO requests({_REQUEST_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)",
            (
                rid,
                envelope.tenant_id,
                envelope.legal_basis.value,
                json.dumps([t.value for t in envelope.data_classes]),
                iso_utc(envelope.received_at),
                digest,
                RequestState.submitted.value,
                iso_utc(clock.deadline),
                iso_utc(clock.target),
                ts,
                ts,
            ),
        )
        conn.execute(
            "INSERT INTO vault(request_id, envelope_json, salt) VALUES (?, ?, ?)",
            (rid, canonical_json(envelope.canonical_dict()).decode("utf-8"), os.urandom(SALT_BYTES)),
        )
        insert_event(
            conn,
            rid,
            "request.submitted",
            {"legal_basis": envelope.legal_basis.value, "deadline": iso_utc(clock.deadline)},
            now,
        )
    return SubmitResult(
        request_id=rid, created=True, legal_basis=envelope.legal_basis, deadline=clock.deadline, target=clock.target
    )


def get(conn: apsw.Connection, request_id: str) -> RequestRow:
    """The request's row; `NotFound` if there is none."""
    r = conn.execute(f"SELECT {_REQUEST_COLUMNS} FROM requests WHERE request_id = ?", (request_id,)).fetchone()
    if r is None:
        raise NotFound(f"no request {request_id!r}")
    return _row(r)


def check_tenant(conn: apsw.Connection, request_id: str, tenant: str) -> RequestRow:
    """The request's row when it belongs to `tenant` (the tenant of the stores it would erase);
    `NotFound` when there is no such request, `RequestBlocked` when it is another tenant's. Reads the
    request row only (no identifier leaves the vault)."""
    row = get(conn, request_id)
    if row.tenant_id != tenant:
        raise RequestBlocked(
            f"request {request_id} is for tenant {row.tenant_id!r}; these stores belong to {tenant!r}: refused"
        )
    return row


def list_requests(conn: apsw.Connection, states: Iterable[RequestState | str] | None = None) -> list[RequestRow]:
    """Requests (optionally only those in `states`), soonest deadline first."""
    sql = f"SELECT {_REQUEST_COLUMNS} FROM requests"
    params: tuple[str, ...] = ()
    if states is not None:
        params = tuple(RequestState(s).value for s in states)
        if not params:
            return []
        sql += f" WHERE state IN ({', '.join('?' * len(params))})"
    return [_row(r) for r in conn.execute(sql + " ORDER BY deadline, request_id", params)]


def set_state(
    conn: apsw.Connection,
    request_id: str,
    state: RequestState | str,
    detail: str | None = None,
    *,
    now: datetime | None = None,
) -> None:
    """Move the request to `state` (with an optional detail such as 'held: 12 items', never an
    identifier) and log 'request.state'. `NotFound` if the request does not exist."""
    st = RequestState(state)
    ts = utc_now(now)
    with writing(conn):
        conn.execute(
            "UPDATE requests SET state = ?, state_detail = ?, updated_at = ? WHERE request_id = ?",
            (st.value, detail, iso_utc(ts), request_id),
        )
        if conn.changes() == 0:
            raise NotFound(f"no request {request_id!r}")
        insert_event(conn, request_id, "request.state", {"state": st.value, "detail": detail}, ts)
