"""The request vault API over the engine database (`erasure.engine.open_engine`).

Every function takes an apsw connection to the engine database. Only the `vault` table holds the
subject's identifiers; request rows, clock events, engine events, step records, exceptions and
receipts hold ids, counts and digests. Multi-statement writes run in one transaction (a savepoint
when the caller already holds one), so a failure leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import apsw

from erasure.clocks import (
    ClockEvent,
    ClockKind,
    ClockPolicy,
    Deadline,
    check_clock_event,
    effective_deadline,
    iso_utc,
    parse_utc,
)
from erasure.errors import Conflict, InputError, NotFound, RequestBlocked
from erasure.identity import fold
from erasure.models import (
    CLOCK_SKEW,
    ErasureRequestEnvelope,
    LegalBasis,
    StepRecord,
    refuse_if_mentions_anyone,
    refuse_if_mentions_subject,
)
from erasure.sqlite import transaction
from erasure.states import OPEN_STATES, RequestState
from erasure.subject import Subject
from erasure.tiers import CASCADE_ORDER, Tier, scope_name
from proof.verify.wire import RECEIPT_STATUSES, canonical_json, sha256_hex

SALT_BYTES = 32
MAX_REASON = 2000
_REQUEST_COLUMNS = ("request_id, tenant_id, legal_basis, data_classes, received_at, envelope_sha256, state, "
                    "state_detail, deadline, target, created_at, updated_at")


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


@dataclass(frozen=True)
class ExceptionRow:
    """One open (or closed) exception: something the cascade or verification could not erase."""

    exception_id: int
    request_id: str
    tier: str
    kind: str
    item_key: str
    detail: dict[str, Any]
    ground: str | None
    opened_at: datetime
    closed_at: datetime | None


@dataclass(frozen=True)
class ReceiptRow:
    """A subprocessor's answer to our deletion call (ticket id, status, attempts)."""

    request_id: str
    processor: str
    ticket_id: str | None
    status: str
    requested_at: datetime
    completed_at: datetime | None
    attempts: int
    detail: dict[str, Any]


# --- helpers ------------------------------------------------------------------------------------


@contextmanager
def _writing(conn: apsw.Connection) -> Iterator[None]:
    """A transaction, or a savepoint inside the caller's transaction."""
    if not conn.in_transaction:
        with transaction(conn):
            yield
        return
    conn.execute("SAVEPOINT erasure_requests")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK TO erasure_requests")
        conn.execute("RELEASE erasure_requests")
        raise
    conn.execute("RELEASE erasure_requests")


def _now(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return now.astimezone(UTC)


def _json_text(obj: Mapping[str, Any] | None) -> str:
    return canonical_json(dict(obj or {})).decode("utf-8")


def _opt_utc(text: str | None) -> datetime | None:
    return None if text is None else parse_utc(text)


def _row(r: tuple[Any, ...]) -> RequestRow:
    return RequestRow(
        request_id=r[0], tenant_id=r[1], legal_basis=LegalBasis(r[2]),
        data_classes=tuple(Tier(t) for t in json.loads(r[3])), received_at=parse_utc(r[4]),
        envelope_sha256=r[5], state=RequestState(r[6]), state_detail=r[7], deadline=parse_utc(r[8]),
        target=parse_utc(r[9]), created_at=parse_utc(r[10]), updated_at=parse_utc(r[11]),
    )


def _insert_event(conn: apsw.Connection, request_id: str | None, event: str,
                  detail: Mapping[str, Any] | None, now: datetime) -> int:
    conn.execute("INSERT INTO engine_events(at, request_id, event, detail) VALUES (?, ?, ?, ?)",
                 (iso_utc(now), request_id, event, _json_text(detail)))
    return int(conn.last_insert_rowid())


def envelope_digest(envelope: ErasureRequestEnvelope) -> str:
    """SHA-256 hex of the envelope's canonical JSON: the same id with another digest is a conflict."""
    return sha256_hex(canonical_json(envelope.canonical_dict()))


# --- intake -------------------------------------------------------------------------------------


def submit(conn: apsw.Connection, envelope: ErasureRequestEnvelope, *, now: datetime,
           policy: ClockPolicy | None = None) -> SubmitResult:
    """Vault a validated envelope, start its clock and log 'request.submitted' (no identifier).

    Idempotent: the identical envelope again returns `created=False` and writes nothing; the same
    request id with another body raises `Conflict`. `policy` defaults to `ClockPolicy.from_env()`."""
    now = _now(now)
    policy = policy or ClockPolicy.from_env()
    if envelope.received_at > now + CLOCK_SKEW:
        raise InputError("received_at: is in the future")
    digest = envelope_digest(envelope)
    clock = effective_deadline(envelope.legal_basis, envelope.received_at, [], now=now, policy=policy)
    rid = envelope.request_id
    with _writing(conn):
        existing = conn.execute("SELECT envelope_sha256, deadline, target FROM requests WHERE request_id = ?",
                                (rid,)).fetchone()
        if existing is not None:
            if existing[0] != digest:
                raise Conflict(f"request {rid} already exists with a different body")
            return SubmitResult(request_id=rid, created=False, legal_basis=envelope.legal_basis,
                                deadline=parse_utc(existing[1]), target=parse_utc(existing[2]))
        # the envelope checked its id against its own subject; here against everyone in the vault
        refuse_if_mentions_anyone("request_id", rid, vault_subjects(conn), strict=True)
        ts = iso_utc(now)
        conn.execute(
            f"INSERT INTO requests({_REQUEST_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)",
            (rid, envelope.tenant_id, envelope.legal_basis.value,
             json.dumps([t.value for t in envelope.data_classes]), iso_utc(envelope.received_at), digest,
             RequestState.submitted.value, iso_utc(clock.deadline), iso_utc(clock.target), ts, ts),
        )
        conn.execute("INSERT INTO vault(request_id, envelope_json, salt) VALUES (?, ?, ?)",
                     (rid, canonical_json(envelope.canonical_dict()).decode("utf-8"),
                      os.urandom(SALT_BYTES)))
        _insert_event(conn, rid, "request.submitted",
                      {"legal_basis": envelope.legal_basis.value, "deadline": iso_utc(clock.deadline)}, now)
    return SubmitResult(request_id=rid, created=True, legal_basis=envelope.legal_basis,
                        deadline=clock.deadline, target=clock.target)


def get(conn: apsw.Connection, request_id: str) -> RequestRow:
    """The request's row; `NotFound` if there is none."""
    r = conn.execute(f"SELECT {_REQUEST_COLUMNS} FROM requests WHERE request_id = ?",
                     (request_id,)).fetchone()
    if r is None:
        raise NotFound(f"no request {request_id!r}")
    return _row(r)


def check_tenant(conn: apsw.Connection, request_id: str, tenant: str) -> RequestRow:
    """The request's row when it belongs to `tenant` (the tenant of the stores it would erase);
    `NotFound` when there is no such request, `RequestBlocked` when it is another tenant's. Reads the
    request row only (no identifier leaves the vault)."""
    row = get(conn, request_id)
    if row.tenant_id != tenant:
        raise RequestBlocked(f"request {request_id} is for tenant {row.tenant_id!r}; these stores belong to "
                             f"{tenant!r}: refused")
    return row


def list_requests(conn: apsw.Connection,
                  states: Iterable[RequestState | str] | None = None) -> list[RequestRow]:
    """Requests (optionally only those in `states`), soonest deadline first."""
    sql = f"SELECT {_REQUEST_COLUMNS} FROM requests"
    params: tuple[str, ...] = ()
    if states is not None:
        params = tuple(RequestState(s).value for s in states)
        if not params:
            return []
        sql += f" WHERE state IN ({', '.join('?' * len(params))})"
    return [_row(r) for r in conn.execute(sql + " ORDER BY deadline, request_id", params)]


def load_envelope(conn: apsw.Connection, request_id: str) -> ErasureRequestEnvelope:
    """The vaulted envelope, identifiers included: keep it inside the process that erases."""
    r = conn.execute("SELECT envelope_json FROM vault WHERE request_id = ?", (request_id,)).fetchone()
    if r is None:
        raise NotFound(f"no request {request_id!r} in the vault")
    # Validated at intake; far-future `now` so a stored received_at is never "in the future".
    return ErasureRequestEnvelope.model_validate_json(r[0], context={"now": datetime(9000, 1, 1, tzinfo=UTC)})


def vault_subjects(conn: apsw.Connection) -> list[Subject]:
    """Every distinct subject named in the vault, identifiers included: keep them inside the process
    (they check free text at the door)."""
    seen: dict[Subject, None] = {}
    for (text,) in conn.execute("SELECT envelope_json FROM vault ORDER BY request_id"):
        seen.setdefault(Subject.model_validate(json.loads(text)["subject"]), None)
    return list(seen)


def subject_by_id(conn: apsw.Connection, subject_id: str) -> Subject:
    """The vaulted subject whose id is `subject_id` (NFKC + case folding), with every identifier their
    request gave; a subject the vault does not know is returned with its id only."""
    want = fold(subject_id)
    for subject in vault_subjects(conn):
        if fold(subject.id) == want:
            return subject
    return Subject(id=subject_id)


def requests_of_subject(conn: apsw.Connection, subject_id: str) -> list[str]:
    """The ids of every vaulted request whose subject id is `subject_id` (NFKC + case folding)."""
    want = fold(subject_id)
    return [rid for rid, text in conn.execute("SELECT request_id, envelope_json FROM vault ORDER BY request_id")
            if fold(str(json.loads(text)["subject"]["id"])) == want]


def subject_of(conn: apsw.Connection, request_id: str | None) -> Subject | None:
    """The subject of `request_id` from the vault, or None when there is no such request."""
    if request_id is None:
        return None
    r = conn.execute("SELECT envelope_json FROM vault WHERE request_id = ?", (request_id,)).fetchone()
    return None if r is None else Subject.model_validate(json.loads(r[0])["subject"])


def refuse_if_names_a_subject(conn: apsw.Connection, texts: Mapping[str, str],
                              subject: Subject | None = None) -> None:
    """Refuse (`InputError`, naming the field and the kind of identifier, never the value) free text that
    reaches the audit log, the engine or Prefect when it holds an identifier of `subject` (also the
    email's local part and name tokens) or a whole identifier of any subject in the vault."""
    everyone = vault_subjects(conn)
    for field, text in texts.items():
        if subject is not None:
            refuse_if_mentions_subject(field, text, subject)
        refuse_if_mentions_anyone(field, text, everyone)


def subject_salt(conn: apsw.Connection, request_id: str) -> bytes:
    """The request's random 32-byte salt for the pack's identifier commitments."""
    r = conn.execute("SELECT salt FROM vault WHERE request_id = ?", (request_id,)).fetchone()
    if r is None:
        raise NotFound(f"no request {request_id!r} in the vault")
    return bytes(r[0])


def store_ids(conn: apsw.Connection, request_id: str) -> set[str]:
    """The subject's ids as the store spells them, recorded before the first deletion (vault data)."""
    return {str(r[0]) for r in conn.execute("SELECT subject_id FROM vault_store_ids WHERE request_id = ?",
                                            (request_id,))}


def add_store_ids(conn: apsw.Connection, request_id: str, ids: Iterable[str]) -> None:
    """Record more of the subject's store ids (it only grows, like the footprint)."""
    with _writing(conn):
        conn.executemany("INSERT OR IGNORE INTO vault_store_ids(request_id, subject_id) VALUES (?, ?)",
                         [(request_id, i) for i in ids])


def confirm_aliases(conn: apsw.Connection, request_id: str, count: int) -> None:
    """The team reviewed `count` other store ids sharing the subject's email and confirmed them."""
    log_event(conn, request_id, "identity.aliases_confirmed", {"count": count})


def confirmed_aliases(conn: apsw.Connection, request_id: str) -> int | None:
    """The latest alias count the team confirmed for this request, or None."""
    r = conn.execute("SELECT detail FROM engine_events WHERE request_id = ? AND event = ?"
                     " ORDER BY seq DESC LIMIT 1", (request_id, "identity.aliases_confirmed")).fetchone()
    return int(json.loads(r[0])["count"]) if r else None


def commit_identifier(salt: bytes, value: str) -> str:
    """Salted commitment to one identifier: sha256(salt + value as UTF-8), hex."""
    return hashlib.sha256(salt + value.encode("utf-8")).hexdigest()


def set_state(conn: apsw.Connection, request_id: str, state: RequestState | str, detail: str | None = None,
              *, now: datetime | None = None) -> None:
    """Move the request to `state` (with an optional detail such as 'held: 12 items', never an
    identifier) and log 'request.state'. `NotFound` if the request does not exist."""
    st = RequestState(state)
    ts = _now(now)
    with _writing(conn):
        conn.execute("UPDATE requests SET state = ?, state_detail = ?, updated_at = ? WHERE request_id = ?",
                     (st.value, detail, iso_utc(ts), request_id))
        if conn.changes() == 0:
            raise NotFound(f"no request {request_id!r}")
        _insert_event(conn, request_id, "request.state", {"state": st.value, "detail": detail}, ts)


def log_event(conn: apsw.Connection, request_id: str | None, event: str,
              detail: Mapping[str, Any] | None = None, *, now: datetime | None = None) -> int:
    """Append to the engine's event log (ids and counts only); returns the event's sequence number."""
    with _writing(conn):
        return _insert_event(conn, request_id, event, detail, _now(now))


# --- clocks -------------------------------------------------------------------------------------


def clock_events(conn: apsw.Connection, request_id: str) -> list[ClockEvent]:
    """The request's pauses, resumes and extensions, oldest first."""
    out: list[ClockEvent] = []
    for kind, at, detail in conn.execute(
            "SELECT kind, at, detail FROM clock_events WHERE request_id = ? ORDER BY at, event_id",
            (request_id,)):
        until = json.loads(detail).get("until")
        out.append(ClockEvent(kind, parse_utc(at), date.fromisoformat(until) if until else None))
    return out


def deadline_of(conn: apsw.Connection, request_id: str, *, now: datetime,
                policy: ClockPolicy | None = None) -> Deadline:
    """The request's clock at `now` (an open pause counts up to `now`)."""
    row = get(conn, request_id)
    return effective_deadline(row.legal_basis, row.received_at, clock_events(conn, request_id),
                              now=_now(now), policy=policy or ClockPolicy.from_env())


def _clock_op(conn: apsw.Connection, request_id: str, kind: ClockKind, reason: str, *, now: datetime,
              until: date | None, policy: ClockPolicy | None) -> Deadline:
    now = _now(now)
    policy = policy or ClockPolicy.from_env()
    reason = reason.strip()
    if not reason or len(reason) > MAX_REASON:
        raise InputError(f"reason: must be 1-{MAX_REASON} characters")
    with _writing(conn):
        row = get(conn, request_id)
        refuse_if_names_a_subject(conn, {"reason": reason}, load_envelope(conn, request_id).subject)
        if row.state not in OPEN_STATES:
            raise Conflict(f"{kind}: request {request_id} is {row.state.value}")
        if kind == "pause" and row.state not in (RequestState.submitted, RequestState.paused):
            raise Conflict(f"pause: request {request_id} is {row.state.value}; only a submitted request "
                           "waits for identity verification")
        events = clock_events(conn, request_id)
        new = ClockEvent(kind, now, until)
        check_clock_event(row.legal_basis, row.received_at, events, new, policy=policy)
        conn.execute("INSERT INTO clock_events(request_id, kind, at, reason, detail) VALUES (?, ?, ?, ?, ?)",
                     (request_id, kind, iso_utc(now), reason,
                      _json_text({"until": until.isoformat()} if until else None)))
        clock = effective_deadline(row.legal_basis, row.received_at, [*events, new], now=now, policy=policy)
        state = row.state
        if kind == "pause":
            state = RequestState.paused
        elif kind == "resume" and row.state is RequestState.paused:
            state = RequestState.submitted
        conn.execute("UPDATE requests SET deadline = ?, target = ?, state = ?, updated_at = ? "
                     "WHERE request_id = ?",
                     (iso_utc(clock.deadline), iso_utc(clock.target), state.value, iso_utc(now), request_id))
        past = {"pause": "paused", "resume": "resumed", "extend": "extended"}[kind]
        _insert_event(conn, request_id, f"request.{past}", {"deadline": iso_utc(clock.deadline)}, now)
    return clock


def pause(conn: apsw.Connection, request_id: str, reason: str, *, now: datetime,
          policy: ClockPolicy | None = None) -> Deadline:
    """Pause the clock while the subject's identity is verified (state 'paused')."""
    return _clock_op(conn, request_id, "pause", reason, now=now, until=None, policy=policy)


def resume(conn: apsw.Connection, request_id: str, reason: str, *, now: datetime,
           policy: ClockPolicy | None = None) -> Deadline:
    """Resume a paused clock; the deadline moves by the whole paused time (state 'submitted')."""
    return _clock_op(conn, request_id, "resume", reason, now=now, until=None, policy=policy)


def extend(conn: apsw.Connection, request_id: str, reason: str, *, now: datetime, until: date | None = None,
           policy: ClockPolicy | None = None) -> Deadline:
    """Extend the deadline once, to the legal maximum or to `until` (a day not past it). Refused for
    POPIA/KE_DPA, past the maximum (`InputError`), a second time or after the original deadline
    (`Conflict`)."""
    return _clock_op(conn, request_id, "extend", reason, now=now, until=until, policy=policy)


# --- step records -------------------------------------------------------------------------------


def upsert_step(conn: apsw.Connection, record: StepRecord) -> None:
    """Write the step's record: exactly one row per (request, [target,] step), the latest write wins."""
    if record.target is not None:
        _upsert_target_step(conn, record)
        return
    with _writing(conn):
        conn.execute(
            "INSERT INTO step_records(request_id, step, status, before_count, after_count, started_at, "
            "ended_at, removed_digest, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(request_id, step) DO UPDATE SET status = excluded.status, "
            "before_count = excluded.before_count, after_count = excluded.after_count, "
            "started_at = excluded.started_at, ended_at = excluded.ended_at, "
            "removed_digest = excluded.removed_digest, detail = excluded.detail",
            (record.request_id, record.step, record.status.value, record.before_count, record.after_count,
             iso_utc(record.started_at), None if record.ended_at is None else iso_utc(record.ended_at),
             record.removed_digest, _json_text(record.detail)),
        )


def _upsert_target_step(conn: apsw.Connection, record: StepRecord) -> None:
    with _writing(conn):
        conn.execute(
            "INSERT INTO target_step_records(request_id, target, step, status, before_count, after_count, "
            "started_at, ended_at, removed_digest, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(request_id, target, step) DO UPDATE SET status = excluded.status, "
            "before_count = excluded.before_count, after_count = excluded.after_count, "
            "started_at = excluded.started_at, ended_at = excluded.ended_at, "
            "removed_digest = excluded.removed_digest, detail = excluded.detail",
            (record.request_id, record.target, record.step, record.status.value, record.before_count,
             record.after_count, iso_utc(record.started_at),
             None if record.ended_at is None else iso_utc(record.ended_at), record.removed_digest,
             _json_text(record.detail)),
        )


def target_steps(conn: apsw.Connection, request_id: str) -> list[StepRecord]:
    """The step records of the request's other targets: by target name, tiers in cascade order."""
    cols = ("request_id", "target", "step", "status", "before_count", "after_count", "started_at", "ended_at",
            "removed_digest", "detail")
    cur = conn.execute(f"SELECT {', '.join(cols)} FROM target_step_records WHERE request_id = ?", (request_id,))
    records = [StepRecord.model_validate({**dict(zip(cols, r, strict=True)), "detail": json.loads(r[9])})
               for r in cur]
    return sorted(records, key=lambda s: (s.target or "", _step_order(s.step)))


def _step_order(step: str) -> int:
    names = [t.value for t in CASCADE_ORDER]
    return names.index(step) if step in names else len(names)


def steps(conn: apsw.Connection, request_id: str) -> list[StepRecord]:
    """The request's step records: tiers in cascade order, then any other step by start time."""
    cols = ("request_id", "step", "status", "before_count", "after_count", "started_at", "ended_at",
            "removed_digest", "detail")
    cur = conn.execute(f"SELECT {', '.join(cols)} FROM step_records WHERE request_id = ? "
                       "ORDER BY started_at, step", (request_id,))
    records = [StepRecord.model_validate({**dict(zip(cols, r, strict=True)), "detail": json.loads(r[8])})
               for r in cur]
    return sorted(records, key=lambda s: _step_order(s.step))


# --- footprint ----------------------------------------------------------------------------------


def add_footprint(conn: apsw.Connection, request_id: str, tier: Tier | str, kind: str,
                  keys: Iterable[str | int]) -> int:
    """Record store keys of the subject's items (ids only; the footprint only grows). Returns how
    many were new."""
    t = Tier(tier).value
    with _writing(conn):
        before = conn.total_changes()
        conn.executemany(
            "INSERT OR IGNORE INTO footprint(request_id, tier, kind, item_key) VALUES (?, ?, ?, ?)",
            ((request_id, t, kind, str(k)) for k in keys))
        return int(conn.total_changes() - before)


def footprint(conn: apsw.Connection, request_id: str, tier: Tier | str, kind: str) -> set[str]:
    """The recorded keys of one kind in one tier."""
    return {r[0] for r in conn.execute(
        "SELECT item_key FROM footprint WHERE request_id = ? AND tier = ? AND kind = ?",
        (request_id, Tier(tier).value, kind))}


# --- exceptions and receipts --------------------------------------------------------------------


def open_exception(conn: apsw.Connection, request_id: str, tier: Tier | str, kind: str, item_key: str,
                   detail: Mapping[str, Any] | None = None, ground: str | None = None, *,
                   now: datetime | None = None) -> int:
    """Open an exception (idempotent on (request, tier, kind, item_key): an existing one keeps its id,
    detail and opening time, and is open again if it had been closed). Returns its id."""
    t = scope_name(tier)
    with _writing(conn):
        conn.execute(
            "INSERT INTO exceptions(request_id, tier, kind, item_key, detail, ground, opened_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(request_id, tier, kind, item_key) DO UPDATE SET closed_at = NULL",
            (request_id, t, kind, item_key, _json_text(detail), ground, iso_utc(_now(now))))
        r = conn.execute("SELECT exception_id FROM exceptions WHERE request_id = ? AND tier = ? AND kind = ? "
                         "AND item_key = ?", (request_id, t, kind, item_key)).fetchone()
    assert r is not None
    return int(r[0])


def close_exception(conn: apsw.Connection, exception_id: int, *, now: datetime | None = None) -> None:
    """Mark an exception closed (kept as evidence). `NotFound` if there is no such exception."""
    with _writing(conn):
        conn.execute("UPDATE exceptions SET closed_at = COALESCE(closed_at, ?) WHERE exception_id = ?",
                     (iso_utc(_now(now)), exception_id))
        if conn.changes() == 0:
            raise NotFound(f"no exception {exception_id}")


def exceptions(conn: apsw.Connection, request_id: str, *, open_only: bool = False) -> list[ExceptionRow]:
    """The request's exceptions, oldest first."""
    sql = ("SELECT exception_id, request_id, tier, kind, item_key, detail, ground, opened_at, closed_at "
           "FROM exceptions WHERE request_id = ?" + (" AND closed_at IS NULL" if open_only else "")
           + " ORDER BY exception_id")
    return [ExceptionRow(exception_id=r[0], request_id=r[1], tier=r[2], kind=r[3], item_key=r[4],
                         detail=json.loads(r[5]), ground=r[6], opened_at=parse_utc(r[7]),
                         closed_at=_opt_utc(r[8])) for r in conn.execute(sql, (request_id,))]


def upsert_receipt(conn: apsw.Connection, request_id: str, processor: str, status: str, *,
                   ticket_id: str | None = None, attempts: int | None = None,
                   completed_at: datetime | None = None, detail: Mapping[str, Any] | None = None,
                   now: datetime | None = None) -> None:
    """Record a subprocessor's receipt: one row per (request, processor). `requested_at` is the first
    write's time and is kept; a None `ticket_id`/`completed_at`/`attempts` keeps the stored value."""
    if status not in RECEIPT_STATUSES:
        raise ValueError(f"receipt status must be one of {sorted(RECEIPT_STATUSES)}")
    params = {"rid": request_id, "proc": processor, "ticket": ticket_id, "status": status,
              "req": iso_utc(_now(now)), "done": None if completed_at is None else iso_utc(completed_at),
              "att": attempts, "detail": _json_text(detail)}
    with _writing(conn):
        conn.execute(
            "INSERT INTO receipts(request_id, processor, ticket_id, status, requested_at, completed_at, "
            "attempts, detail) "
            "VALUES (:rid, :proc, :ticket, :status, :req, :done, COALESCE(:att, 0), :detail) "
            "ON CONFLICT(request_id, processor) DO UPDATE SET status = excluded.status, "
            "ticket_id = COALESCE(:ticket, receipts.ticket_id), "
            "completed_at = COALESCE(:done, receipts.completed_at), "
            "attempts = COALESCE(:att, receipts.attempts), detail = excluded.detail", params)


def receipts(conn: apsw.Connection, request_id: str) -> list[ReceiptRow]:
    """The request's subprocessor receipts, by processor."""
    return [ReceiptRow(request_id=r[0], processor=r[1], ticket_id=r[2], status=r[3],
                       requested_at=parse_utc(r[4]), completed_at=_opt_utc(r[5]), attempts=r[6],
                       detail=json.loads(r[7])) for r in conn.execute(
        "SELECT request_id, processor, ticket_id, status, requested_at, completed_at, attempts, detail "
        "FROM receipts WHERE request_id = ? ORDER BY processor", (request_id,))]
