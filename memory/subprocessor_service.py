"""A small local HTTP service that plays an external data processor (tier 8), for the demo and tests.

It keeps what it receives in its own SQLite file (`<data_dir>/<name>.db`) and answers JSON:

- `POST /v1/records {"subject_ref", "records": [{"ref", "content"}]}` -> 201 `{"ids": [...]}`;
  idempotent on `(subject_ref, ref)`: a resend gets the same ids.
- `POST /v1/deletions {"subject_ref"}` or `{"ids": [...]}` -> 200 `{"ticket_id", "status": "done",
  "deleted", "completed_at"}`, or with an async delay 202 `{"ticket_id", "status": "pending",
  "poll": "/v1/jobs/<ticket_id>"}`; the job completes `async_delay` seconds later (a reaper thread,
  and lazily on every request).
- `GET /v1/jobs/<ticket_id>` -> `{"ticket_id", "status", "deleted", "completed_at", "requested_at"}`.
- `GET /v1/lookup?subject_ref=...` -> `{"subject_ref", "count"}` (what a probe asks).
- `PUT /v1/records/<id> {"content"}` -> 200 `{"id", "rectified": true}` (rectification, GDPR
  Art.16: how a mention of an erased subject leaves the processor's copy of someone else's item);
  404 for an unknown id. Idempotent.
- `GET /healthz` -> `{"ok": true, "name"}` (never delayed, never failed, not counted).

Modes: `latency` seconds added to every request; `fail_every=N` answers 503 to every Nth counted
request (deterministic); `always_fail` answers 500 to every deletion. Binds 127.0.0.1 only, logs no
request lines (they would carry subject refs).

Run one in the foreground: `python -m memory.subprocessor_service --name NAME --port 0 --data DIR
[--async-delay S] [--latency S] [--fail-every N] [--always-fail]`; the first stdout line is its URL.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import apsw

from erasure.errors import InputError
from erasure.sqlite import checkpoint_truncate, connect, transaction

HOST = "127.0.0.1"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_JOB_PATH = re.compile(r"^/v1/jobs/([A-Za-z0-9_-]{1,64})$")
_RECORD_PATH = re.compile(r"^/v1/records/([A-Za-z0-9_-]{1,64})$")
MAX_BODY = 16 * 1024 * 1024

SCHEMA = """
CREATE TABLE IF NOT EXISTS records(
  id          TEXT PRIMARY KEY,
  subject_ref TEXT NOT NULL,
  ref         TEXT NOT NULL,
  content     TEXT NOT NULL,
  created_at  TEXT NOT NULL,
  UNIQUE (subject_ref, ref)
);
CREATE INDEX IF NOT EXISTS ix_records_subject ON records(subject_ref);
CREATE TABLE IF NOT EXISTS jobs(
  ticket_id    TEXT PRIMARY KEY,
  subject_ref  TEXT,                   -- cleared when the job completes
  ids          TEXT,                   -- JSON list; cleared when the job completes
  status       TEXT NOT NULL,          -- pending | done
  requested_at TEXT NOT NULL,
  due_at       REAL NOT NULL,          -- epoch seconds
  deleted      INTEGER,
  completed_at TEXT
);
CREATE INDEX IF NOT EXISTS ix_jobs_due ON jobs(status, due_at);
"""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Mode:
    """How a service misbehaves. All zero/False: a prompt, reliable, synchronous processor."""

    async_delay: float = 0.0
    latency: float = 0.0
    fail_every: int = 0
    always_fail: bool = False


class _BadRequest(Exception):
    pass


class ProcessorState:
    """The service's data and counters; every method is safe to call from handler threads."""

    def __init__(self, name: str, db_path: Path, mode: Mode) -> None:
        self.name = name
        self.mode = mode
        self.db_path = db_path
        self._lock = threading.Lock()
        self._requests = 0
        self._conn: apsw.Connection = connect(db_path)
        with transaction(self._conn):
            self._conn.execute(SCHEMA)

    def count_request(self) -> int:
        """Count one request; return its number (1-based)."""
        with self._lock:
            self._requests += 1
            return self._requests

    @property
    def requests_seen(self) -> int:
        """Requests counted so far."""
        with self._lock:
            return self._requests

    def add_records(self, subject_ref: str, records: list[tuple[str, str]]) -> list[str]:
        """Store records (idempotent on `(subject_ref, ref)`); return their ids in order."""
        ids: list[str] = []
        with self._lock, transaction(self._conn):
            for ref, content in records:
                row = self._conn.execute(
                    "SELECT id FROM records WHERE subject_ref = ? AND ref = ?", (subject_ref, ref)
                ).fetchone()
                if row is not None:
                    ids.append(str(row[0]))
                    continue
                rid = "rec_" + secrets.token_hex(8)
                self._conn.execute(
                    "INSERT INTO records(id, subject_ref, ref, content, created_at) VALUES (?, ?, ?, ?, ?)",
                    (rid, subject_ref, ref, content, _now()),
                )
                ids.append(rid)
        return ids

    def rectify(self, record_id: str, content: str) -> bool:
        """Replace one record's content; False when there is no such record."""
        with self._lock, transaction(self._conn):
            self._conn.execute("UPDATE records SET content = ? WHERE id = ?", (content, record_id))
            changed = self._conn.changes() > 0
        if changed:
            checkpoint_truncate(self._conn)
        return changed

    def request_deletion(self, subject_ref: str | None, ids: list[str] | None) -> dict[str, Any]:
        """Open a deletion job; complete it now unless the mode is asynchronous. Returns the job."""
        ticket = "del_" + secrets.token_hex(8)
        with self._lock:
            with transaction(self._conn):
                self._conn.execute(
                    "INSERT INTO jobs(ticket_id, subject_ref, ids, status, requested_at, due_at)"
                    " VALUES (?, ?, ?, 'pending', ?, ?)",
                    (
                        ticket,
                        subject_ref,
                        None if ids is None else json.dumps(ids),
                        _now(),
                        time.time() + self.mode.async_delay,
                    ),
                )
            if self.mode.async_delay <= 0:
                self._complete(ticket)
        job = self.job(ticket)
        assert job is not None
        return job

    def _complete(self, ticket: str) -> None:
        """Delete the job's records and mark it done. Caller holds the lock."""
        with transaction(self._conn):
            row = self._conn.execute(
                "SELECT subject_ref, ids FROM jobs WHERE ticket_id = ? AND status = 'pending'", (ticket,)
            ).fetchone()
            if row is None:
                return
            subject_ref, ids_json = row
            if ids_json is not None:
                ids = json.loads(ids_json)
                self._conn.execute(
                    "DELETE FROM records WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),)
                )
            else:
                self._conn.execute("DELETE FROM records WHERE subject_ref = ?", (subject_ref,))
            deleted = self._conn.changes()
            self._conn.execute(
                "UPDATE jobs SET status = 'done', deleted = ?, completed_at = ?, subject_ref = NULL, ids = NULL"
                " WHERE ticket_id = ?",
                (deleted, _now(), ticket),
            )
        checkpoint_truncate(self._conn)  # the erased content leaves the -wal file too

    def complete_due(self) -> int:
        """Complete every pending job whose time has come; return how many."""
        with self._lock:
            due = [
                str(r[0])
                for r in self._conn.execute(
                    "SELECT ticket_id FROM jobs WHERE status = 'pending' AND due_at <= ?", (time.time(),)
                )
            ]
            for ticket in due:
                self._complete(ticket)
        return len(due)

    def job(self, ticket: str) -> dict[str, Any] | None:
        """The job's public view, or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT status, deleted, completed_at, requested_at FROM jobs WHERE ticket_id = ?", (ticket,)
            ).fetchone()
        if row is None:
            return None
        return {
            "ticket_id": ticket,
            "status": row[0],
            "deleted": row[1],
            "completed_at": row[2],
            "requested_at": row[3],
        }

    def lookup(self, subject_ref: str) -> int:
        """How many records the processor holds for `subject_ref`."""
        with self._lock:
            row = self._conn.execute("SELECT count(*) FROM records WHERE subject_ref = ?", (subject_ref,)).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, state: ProcessorState) -> None:
        self.state = state
        super().__init__((HOST, port), _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "subprocessor-sim/1"

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: request lines would carry subject refs."""

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _json_body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_BODY:
            raise _BadRequest("a JSON body is required")
        try:
            body = json.loads(self.rfile.read(length))
        except ValueError as exc:
            raise _BadRequest("body is not JSON") from exc
        if not isinstance(body, dict):
            raise _BadRequest("body is not a JSON object")
        return body

    def _handle(self, method: str) -> None:
        state = self.server.state
        url = urlsplit(self.path)
        if method == "GET" and url.path == "/healthz":
            self._send(200, {"ok": True, "name": state.name})
            return
        n = state.count_request()
        if state.mode.latency > 0:
            time.sleep(state.mode.latency)
        if state.mode.fail_every and n % state.mode.fail_every == 0:
            self._send(503, {"error": "temporarily unavailable"})
            return
        state.complete_due()
        try:
            self._route(method, url.path, url.query, state)
        except _BadRequest as exc:
            self._send(400, {"error": str(exc)})
        except Exception:  # pragma: no cover - a bug in the simulator, reported as a 500
            self._send(500, {"error": "internal error"})

    def _route(self, method: str, path: str, query: str, state: ProcessorState) -> None:
        if method == "POST" and path == "/v1/records":
            body = self._json_body()
            subject_ref, records = body.get("subject_ref"), body.get("records")
            if not isinstance(subject_ref, str) or not subject_ref or not isinstance(records, list):
                raise _BadRequest("subject_ref (string) and records (list) are required")
            pairs: list[tuple[str, str]] = []
            for r in records:
                if not (
                    isinstance(r, dict)
                    and isinstance(r.get("ref"), str)
                    and r["ref"]
                    and isinstance(r.get("content"), str)
                ):
                    raise _BadRequest("each record needs a ref and a content string")
                pairs.append((r["ref"], r["content"]))
            self._send(201, {"ids": state.add_records(subject_ref, pairs)})
        elif method == "POST" and path == "/v1/deletions":
            body = self._json_body()
            if state.mode.always_fail:
                self._send(500, {"error": "deletion backend failure"})
                return
            subject_ref, ids = body.get("subject_ref"), body.get("ids")
            if (subject_ref is None) == (ids is None):
                raise _BadRequest("give exactly one of subject_ref or ids")
            if subject_ref is not None and (not isinstance(subject_ref, str) or not subject_ref):
                raise _BadRequest("subject_ref must be a non-empty string")
            if ids is not None and not (isinstance(ids, list) and all(isinstance(i, str) for i in ids)):
                raise _BadRequest("ids must be a list of strings")
            job = state.request_deletion(subject_ref, ids)
            if job["status"] == "done":
                self._send(200, {k: job[k] for k in ("ticket_id", "status", "deleted", "completed_at")})
            else:
                self._send(
                    202, {"ticket_id": job["ticket_id"], "status": "pending", "poll": f"/v1/jobs/{job['ticket_id']}"}
                )
        elif method == "GET" and (m := _JOB_PATH.match(path)):
            found = state.job(m.group(1))
            if found is None:
                self._send(404, {"error": "no such job"})
            else:
                self._send(200, found)
        elif method == "PUT" and (m := _RECORD_PATH.match(path)):
            content = self._json_body().get("content")
            if not isinstance(content, str):
                raise _BadRequest("content (string) is required")
            if state.rectify(m.group(1), content):
                self._send(200, {"id": m.group(1), "rectified": True})
            else:
                self._send(404, {"error": "no such record"})
        elif method == "GET" and path == "/v1/lookup":
            refs = parse_qs(query).get("subject_ref", [])
            if len(refs) != 1 or not refs[0]:
                raise _BadRequest("one subject_ref is required")
            self._send(200, {"subject_ref": refs[0], "count": state.lookup(refs[0])})
        else:
            self._send(404, {"error": "not found"})


@dataclass
class RunningService:
    """A service running in a background thread of this process. Use as a context manager."""

    name: str
    url: str
    db_path: Path
    mode: Mode
    _server: _Server = field(repr=False)
    _threads: list[threading.Thread] = field(repr=False)
    _stop: threading.Event = field(repr=False, default_factory=threading.Event)

    @property
    def requests_seen(self) -> int:
        """Requests counted so far (every request but `/healthz`)."""
        return self._server.state.requests_seen

    def stop(self) -> None:
        """Stop serving, stop the job reaper, close the database. Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        for t in self._threads:
            t.join(timeout=5)
        self._server.state.close()

    def __enter__(self) -> RunningService:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def start_service(
    name: str,
    data_dir: Path,
    *,
    port: int = 0,
    async_delay: float = 0,
    latency: float = 0,
    fail_every: int = 0,
    always_fail: bool = False,
) -> RunningService:
    """Start one processor on 127.0.0.1 (port 0: any free port) with its data in `data_dir/<name>.db`."""
    if not _NAME.match(name):
        raise InputError(f"processor name {name!r} must be lowercase letters, digits, '-' or '_'")
    if async_delay < 0 or latency < 0 or fail_every < 0:
        raise InputError("async delay, latency and fail-every must not be negative")
    mode = Mode(float(async_delay), float(latency), int(fail_every), bool(always_fail))
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    state = ProcessorState(name, data_dir / f"{name}.db", mode)
    try:
        server = _Server(port, state)
    except OSError as exc:
        state.close()
        raise InputError(f"cannot bind {HOST}:{port} for processor {name}: {exc.strerror}") from exc
    stop = threading.Event()
    serve = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"subprocessor-{name}", daemon=True
    )
    threads = [serve]
    if mode.async_delay > 0:
        interval = min(0.1, mode.async_delay / 4)

        def reap() -> None:
            while not stop.wait(interval):
                state.complete_due()

        threads.append(threading.Thread(target=reap, name=f"subprocessor-{name}-jobs", daemon=True))
    for t in threads:
        t.start()
    bound = server.server_address[1]
    return RunningService(
        name=name,
        url=f"http://{HOST}:{bound}",
        db_path=state.db_path,
        mode=mode,
        _server=server,
        _threads=threads,
        _stop=stop,
    )


@dataclass(frozen=True)
class DemoProcessor:
    """One of the demo's processors: how it behaves and what the inventory says about it."""

    name: str
    purpose: str
    holds: tuple[str, ...]
    mode: Mode


DEMO_PROCESSORS: tuple[DemoProcessor, ...] = (
    DemoProcessor("crm-sync", "CRM synchronisation of support conversations", ("episodic",), Mode()),
    DemoProcessor(
        "llm-kb", "hosted LLM knowledge base (asynchronous deletion)", ("episodic", "semantic"), Mode(async_delay=1.0)
    ),
    DemoProcessor(
        "vector-saas", "hosted vector search (flaky: every 2nd request fails)", ("vectors",), Mode(fail_every=2)
    ),
)


def start_demo_processors(data_dir: Path) -> list[RunningService]:
    """Start the demo's three processors: crm-sync (normal), llm-kb (async, ~1 s), vector-saas (flaky)."""
    started: list[RunningService] = []
    try:
        for p in DEMO_PROCESSORS:
            started.append(
                start_service(
                    p.name,
                    data_dir,
                    async_delay=p.mode.async_delay,
                    latency=p.mode.latency,
                    fail_every=p.mode.fail_every,
                    always_fail=p.mode.always_fail,
                )
            )
    except BaseException:
        for s in started:
            s.stop()
        raise
    return started


def main(argv: Sequence[str] | None = None) -> int:
    """Run one processor in the foreground until SIGINT/SIGTERM; print its URL first."""
    parser = argparse.ArgumentParser(
        prog="python -m memory.subprocessor_service", description="A local simulated data processor (HTTP, JSON)."
    )
    parser.add_argument("--name", required=True, help="processor name (also its database file name)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1; 0 picks a free one")
    parser.add_argument("--data", type=Path, required=True, help="directory for the processor's database")
    parser.add_argument("--async-delay", type=float, default=0.0, help="deletions complete after S seconds")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    parser.add_argument("--fail-every", type=int, default=0, help="every Nth request answers 503")
    parser.add_argument("--always-fail", action="store_true", help="deletions answer 500")
    args = parser.parse_args(argv)
    try:
        service = start_service(
            args.name,
            args.data,
            port=args.port,
            async_delay=args.async_delay,
            latency=args.latency,
            fail_every=args.fail_every,
            always_fail=args.always_fail,
        )
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return InputError.exit_code
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print(service.url, flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        service.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
