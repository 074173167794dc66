"""Tier 8 client side: the subprocessor inventory, pushing records to processors, and their deletion APIs.

The wire protocol is the one `memory.subprocessor_service` serves (see its docstring). A processor is a
peer we do not trust: every request has a total deadline (`timeout`: connect to last byte, a peer
dripping one byte at a time included), every call one more over its retries and backoff (`deadline`),
an answer is read up to `erasure.peer_http.MAX_RESPONSE_BYTES`, and the ids and times it returns are
bounded before they are kept (`MAX_TICKET`, `MAX_TIME_TEXT`). Transient failures (HTTP 429, 502, 503,
504, connection errors and timeouts) are retried with exponential backoff. No HTTP call runs inside a
store transaction that this module opens; error messages name the processor's URL and HTTP status,
never a subject.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import apsw

from erasure.clocks import parse_utc
from erasure.errors import ErasureError
from erasure.peer_http import Answer, PeerClient, PeerError, PeerUnreachable
from erasure.sqlite import transaction
from memory import suppression
from memory.subprocessor_service import DEMO_PROCESSORS, RunningService

TRANSIENT_STATUS = frozenset({429, 502, 503, 504})
DEFAULT_TIMEOUT = 5.0
"""Seconds one HTTP request may take, connect to last byte."""
DEFAULT_DEADLINE = 20.0
"""Seconds one call may take, every retry and backoff included."""
MAX_TICKET = 128
_REMOTE_ID = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_TICKET}}}")
"""A ticket or record id from a processor: it goes into a URL path (`/v1/jobs/<ticket>`), the engine
database and the proof pack, so it is short and holds no '/', '.', '?' or '%'."""
MAX_TIME_TEXT = 64


class SubprocessorError(ErasureError):
    """A processor refused a call, answered nonsense, or stayed unreachable after every retry."""

    exit_code = 9


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --- the inventory -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Processor:
    """One entry of the subprocessor inventory."""

    name: str
    base_url: str
    purpose: str
    holds: list[str]


def register(conn: apsw.Connection, name: str, base_url: str, purpose: str, holds: list[str]) -> None:
    """Add a processor to the inventory, or update its URL, purpose and data classes."""
    conn.execute(
        "INSERT INTO subprocessors(name, base_url, purpose, holds) VALUES (?, ?, ?, ?)"
        " ON CONFLICT(name) DO UPDATE SET base_url = excluded.base_url, purpose = excluded.purpose,"
        " holds = excluded.holds",
        (name, base_url.rstrip("/"), purpose, json.dumps(list(holds))),
    )


def register_demo(conn: apsw.Connection, services: Iterable[RunningService]) -> list[Processor]:
    """Register running demo processors (from `start_demo_processors`) with their purpose and holds."""
    specs = {p.name: p for p in DEMO_PROCESSORS}
    for s in services:
        spec = specs.get(s.name)
        purpose, holds = (spec.purpose, list(spec.holds)) if spec else ("local simulated processor", [])
        register(conn, s.name, s.url, purpose, holds)
    return inventory(conn)


def inventory(conn: apsw.Connection) -> list[Processor]:
    """Every registered processor, by name."""
    return [
        Processor(str(r[0]), str(r[1]), str(r[2]), list(json.loads(r[3])))
        for r in conn.execute("SELECT name, base_url, purpose, holds FROM subprocessors ORDER BY name")
    ]


# --- HTTP with retries ---------------------------------------------------------------------------


def _call(
    client: PeerClient,
    method: str,
    url: str,
    *,
    body: dict[str, Any] | None = None,
    params: dict[str, str] | None = None,
    attempts: int,
    backoff: float,
    timeout: float,
    deadline: float,
) -> tuple[Answer, int]:
    """Send with retries on transient failures; return (answer, attempts used). Each attempt ends within
    `timeout` seconds and the whole call by `deadline` (a `time.monotonic()` value).

    The answer may still be a non-transient error status: the caller decides what it means.
    Raises `SubprocessorError` when every attempt failed transiently, the deadline passed, or the
    answer was larger than the cap.
    """
    last, made = "no attempt made", 0
    for attempt in range(1, max(1, attempts) + 1):
        now = time.monotonic()
        if now >= deadline:
            last += "; the call's deadline passed"
            break
        made = attempt
        try:
            resp = client.request(method, url, body=body, params=params, deadline=min(deadline, now + timeout))
        except PeerUnreachable as exc:
            last = str(exc)
        except PeerError as exc:
            raise SubprocessorError(f"{method} {url} refused: {exc}") from None
        else:
            if resp.status_code not in TRANSIENT_STATUS:
                return resp, attempt
            last = f"HTTP {resp.status_code}"
        if attempt < attempts:
            time.sleep(max(0.0, min(backoff * (2 ** (attempt - 1)), deadline - time.monotonic())))
    raise SubprocessorError(f"{method} {url} still failing after {made} attempts: {last}")


def _json(resp: Answer, url: str) -> dict[str, Any]:
    try:
        body = resp.json()
    except ValueError as exc:
        raise SubprocessorError(f"{url} answered HTTP {resp.status_code} without JSON") from exc
    if not isinstance(body, dict):
        raise SubprocessorError(f"{url} answered HTTP {resp.status_code} with a non-object")
    return body


def _client() -> PeerClient:
    # Redirects are not followed and no proxy is read from the environment.
    return PeerClient(connect_timeout=2.0)


def _remote_id(v: Any) -> bool:
    return isinstance(v, str) and _REMOTE_ID.fullmatch(v) is not None


def _time_text(v: Any) -> str | None:
    """`v` when it is an ISO 8601 time with an offset of at most `MAX_TIME_TEXT` characters, else None."""
    if not isinstance(v, str) or len(v) > MAX_TIME_TEXT:
        return None
    try:
        parse_utc(v)
    except ValueError:
        return None
    return v


# --- deletion ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeletionReceipt:
    """What a processor said about a deletion: its ticket, and whether it is done."""

    ticket_id: str
    status: str  # "done" | "pending"
    requested_at: str  # ISO 8601 UTC: when we asked (or, from poll_job, when the processor logged it)
    completed_at: str | None
    attempts: int  # HTTP requests made, retries included
    http_status: int  # of the last answer
    deleted: int | None = None  # records the processor says it deleted, once done

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (ids, times and counts only)."""
        return asdict(self)


def _receipt(body: dict[str, Any], url: str, *, requested_at: str, attempts: int, http_status: int) -> DeletionReceipt:
    ticket, status = body.get("ticket_id"), body.get("status")
    if not isinstance(ticket, str) or not ticket or status not in ("done", "pending"):
        raise SubprocessorError(f"{url} answered HTTP {http_status} without a ticket id and status")
    if not _remote_id(ticket):
        raise SubprocessorError(
            f"{url} answered HTTP {http_status} with a ticket id that is not 1-{MAX_TICKET} letters, digits, '_' or '-'"
        )
    deleted = body.get("deleted")
    completed = body.get("completed_at")
    if completed and status == "done" and _time_text(completed) is None:
        raise SubprocessorError(
            f"{url} answered HTTP {http_status} with a completed_at that is not an ISO 8601"
            f" time of at most {MAX_TIME_TEXT} characters"
        )
    return DeletionReceipt(
        ticket_id=ticket,
        status=str(status),
        requested_at=requested_at,
        completed_at=str(completed) if completed and status == "done" else None,
        attempts=attempts,
        http_status=http_status,
        deleted=deleted
        if (isinstance(deleted, int) and not isinstance(deleted, bool) and 0 <= deleted < 2**53 and status == "done")
        else None,
    )


def request_deletion(
    base_url: str,
    subject_ref: str,
    *,
    attempts: int = 5,
    backoff: float = 0.2,
    timeout: float = DEFAULT_TIMEOUT,
    ids: Sequence[str] | None = None,
    deadline: float = DEFAULT_DEADLINE,
) -> DeletionReceipt:
    """Ask the processor at `base_url` to delete everything it holds for `subject_ref` (or, with
    `ids`, exactly those remote records). Returns a `done` or `pending` receipt; a pending one is
    finished by `poll_job`. Raises `SubprocessorError` on a refusal (4xx, 500, an answer too large or
    with an unbounded ticket id) or when transient errors outlast `attempts` or `deadline` seconds."""
    url = base_url.rstrip("/") + "/v1/deletions"
    body: dict[str, Any] = {"ids": list(ids)} if ids is not None else {"subject_ref": subject_ref}
    requested_at = _now()
    with _client() as client:
        resp, used = _call(
            client,
            "POST",
            url,
            body=body,
            attempts=attempts,
            backoff=backoff,
            timeout=timeout,
            deadline=time.monotonic() + deadline,
        )
    if resp.status_code not in (200, 202):
        raise SubprocessorError(f"{url} refused the deletion: HTTP {resp.status_code}")
    return _receipt(_json(resp, url), url, requested_at=requested_at, attempts=used, http_status=resp.status_code)


def rectify(
    base_url: str,
    remote_ref: str,
    content: str,
    *,
    attempts: int = 5,
    backoff: float = 0.2,
    timeout: float = DEFAULT_TIMEOUT,
    deadline: float = DEFAULT_DEADLINE,
) -> bool:
    """Replace the content of one record the processor holds (rectification): True when it confirmed,
    False when it does not know the record. Raises `SubprocessorError` on a refusal or outage."""
    if not _remote_id(remote_ref):
        raise SubprocessorError(f"{base_url}: a record id that is not 1-{MAX_TICKET} letters, digits, '_' or '-'")
    url = base_url.rstrip("/") + f"/v1/records/{remote_ref}"
    with _client() as client:
        resp, _used = _call(
            client,
            "PUT",
            url,
            body={"content": content},
            attempts=attempts,
            backoff=backoff,
            timeout=timeout,
            deadline=time.monotonic() + deadline,
        )
    if resp.status_code == 404:
        return False
    if resp.status_code != 200:
        raise SubprocessorError(f"{url} refused the rectification: HTTP {resp.status_code}")
    return True


def poll_job(
    base_url: str,
    ticket_id: str,
    *,
    timeout: float = 30.0,
    interval: float = 0.2,
    request_timeout: float = DEFAULT_TIMEOUT,
) -> DeletionReceipt:
    """Poll `GET /v1/jobs/<ticket_id>` until the job is done or `timeout` seconds pass.

    Returns the last receipt: `done`, or `pending` when time ran out (the caller keeps it open).
    Transient failures while polling are tolerated; an unknown ticket or another refusal raises
    `SubprocessorError`. No request starts after `timeout` seconds, and each ends within
    `request_timeout`: the call is over by their sum (plus one `interval`).
    """
    if not _remote_id(ticket_id):
        raise SubprocessorError(f"{base_url}: a ticket id that is not 1-{MAX_TICKET} letters, digits, '_' or '-'")
    url = f"{base_url.rstrip('/')}/v1/jobs/{ticket_id}"
    deadline = time.monotonic() + timeout
    requests, last_status = 0, 0
    last_receipt: DeletionReceipt | None = None
    with _client() as client:
        while True:
            requests += 1
            try:
                resp = client.request("GET", url, deadline=time.monotonic() + request_timeout)
            except PeerUnreachable:
                pass
            except PeerError as exc:
                raise SubprocessorError(f"GET {url} refused: {exc}") from None
            else:
                last_status = resp.status_code
                if resp.status_code == 200:
                    body = _json(resp, url)
                    last_receipt = _receipt(
                        body,
                        url,
                        requested_at=_time_text(body.get("requested_at")) or "",
                        attempts=requests,
                        http_status=200,
                    )
                    if last_receipt.status == "done":
                        return last_receipt
                elif resp.status_code not in TRANSIENT_STATUS:
                    raise SubprocessorError(f"{url} answered HTTP {resp.status_code} for the job")
            if time.monotonic() + interval > deadline:
                break
            time.sleep(interval)
    if last_receipt is None:
        raise SubprocessorError(f"{url} gave no job status within {timeout:g} s (last: HTTP {last_status})")
    return DeletionReceipt(last_receipt.ticket_id, "pending", last_receipt.requested_at, None, requests, last_status)


def lookup_count(
    base_url: str,
    subject_ref: str,
    *,
    attempts: int = 5,
    backoff: float = 0.2,
    timeout: float = DEFAULT_TIMEOUT,
    deadline: float = DEFAULT_DEADLINE,
) -> int:
    """How many records the processor says it holds for `subject_ref`."""
    url = base_url.rstrip("/") + "/v1/lookup"
    with _client() as client:
        resp, _used = _call(
            client,
            "GET",
            url,
            params={"subject_ref": subject_ref},
            attempts=attempts,
            backoff=backoff,
            timeout=timeout,
            deadline=time.monotonic() + deadline,
        )
    if resp.status_code != 200:
        raise SubprocessorError(f"{url} answered HTTP {resp.status_code}")
    count = _json(resp, url).get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise SubprocessorError(f"{url} answered without a count")
    return count


# --- pushing pending records ---------------------------------------------------------------------


@dataclass
class SyncReport:
    """What `sync_pending` did: counts and processor names only."""

    sent: int = 0  # records now holding a remote_ref
    pending: int = 0  # records left without one (processor down or refusing)
    skipped_suppressed: int = 0  # records of erased (source, source_ref): never sent, left pending
    groups: int = 0  # (processor, subject) batches attempted
    failed_processors: list[str] = field(default_factory=list)


_PENDING_SQL = """
SELECT r.record_id, r.processor, s.base_url, r.subject_id, r.source, r.source_ref,
       (SELECT a.content FROM raw_archive a
         WHERE a.source = r.source AND a.source_ref = r.source_ref AND a.subject_id = r.subject_id
           AND a.content IS NOT NULL
         ORDER BY a.archive_id LIMIT 1)
  FROM subprocessor_records r JOIN subprocessors s ON s.name = r.processor
 WHERE r.remote_ref IS NULL
 ORDER BY r.processor, r.subject_id, r.record_id
"""


def sync_pending(
    conn: apsw.Connection,
    *,
    attempts: int = 3,
    backoff: float = 0.1,
    timeout: float = DEFAULT_TIMEOUT,
    deadline: float = DEFAULT_DEADLINE,
) -> SyncReport:
    """Send every record without a `remote_ref` to its processor and store the ids it returns.

    One `POST /v1/records` per (processor, subject), content = the record's archive content (empty
    when there is none). A processor that fails (after retries) keeps its rows pending, and its
    remaining batches are not tried this round. A record whose subject has no live item in its
    `(source, source_ref)` while that key is in `erased_subjects` is never sent (fail-closed). Call it
    outside a transaction: it makes HTTP calls, and then commits each batch's ids in a short
    transaction of its own (inside a caller's transaction it writes there instead).
    """
    groups: dict[tuple[str, str], list[tuple[int, str, str]]] = {}
    urls: dict[str, str] = {}
    report = SyncReport()
    for row in conn.execute(_PENDING_SQL).fetchall():
        record_id, processor, base_url, subject_id, source, source_ref, content = row
        # Erased: a list row for the whole conversation (the item key "" is no item's), or erased items
        # there and none of the record's subject left alive (a conversation is not a person).
        if suppression.is_suppressed(conn, str(source), str(source_ref), "") or (
            content is None and suppression.is_suppressed(conn, str(source), str(source_ref))
        ):
            report.skipped_suppressed += 1
            continue
        assert isinstance(record_id, int)
        urls[str(processor)] = str(base_url)
        groups.setdefault((str(processor), str(subject_id)), []).append(
            (record_id, f"{source}/{source_ref}", str(content or ""))
        )
    failed: set[str] = set()
    with _client() as client:
        for (processor, subject_id), rows in groups.items():
            if processor in failed:
                report.pending += len(rows)
                continue
            report.groups += 1
            url = urls[processor].rstrip("/") + "/v1/records"
            body = {"subject_ref": subject_id, "records": [{"ref": ref, "content": c} for _, ref, c in rows]}
            try:
                resp, _used = _call(
                    client,
                    "POST",
                    url,
                    body=body,
                    attempts=attempts,
                    backoff=backoff,
                    timeout=timeout,
                    deadline=time.monotonic() + deadline,
                )
                if resp.status_code != 201:
                    raise SubprocessorError(f"{url} refused the records: HTTP {resp.status_code}")
                ids = _json(resp, url).get("ids")
                if not (isinstance(ids, list) and len(ids) == len(rows) and all(_remote_id(i) for i in ids)):
                    raise SubprocessorError(f"{url} returned ids that do not match the records sent")
            except SubprocessorError:
                failed.add(processor)
                report.pending += len(rows)
                continue
            _store_remote_refs(conn, [(rid, rows[i][0]) for i, rid in enumerate(ids)])
            report.sent += len(rows)
    report.pending += report.skipped_suppressed
    report.failed_processors = sorted(failed)
    return report


def _store_remote_refs(conn: apsw.Connection, pairs: list[tuple[str, int]]) -> None:
    sql = "UPDATE subprocessor_records SET remote_ref = ? WHERE record_id = ? AND remote_ref IS NULL"
    if conn.in_transaction:
        conn.executemany(sql, pairs)
    else:
        with transaction(conn):
            conn.executemany(sql, pairs)


def pending_count(conn: apsw.Connection) -> int:
    """Records not yet acknowledged by their processor."""
    row = conn.execute("SELECT count(*) FROM subprocessor_records WHERE remote_ref IS NULL").fetchone()
    return int(row[0]) if row else 0
