"""The engine database (`<home>/engine/engine.db`): ours, kept apart from the store on purpose.

It holds the request vault (the only place a subject's identifiers are kept, for as long as the
request is evidence), request state and clock, the subject footprint (ids only), step records,
exceptions, subprocessor receipts and the engine's own event log. Nothing here is erased by a
cascade; after an erasure the vault still names whom the request was for.

One run, one connection: inside `engine_session(path)` every `open_engine(path)` (in this context, and
in threads that copy it) lends the session's connection, and its `close()` gives it back instead of
closing it. A lent connection is used by one thread at a time (a thread that waits too long for it
opens a connection of its own, so no two waits can ever block each other).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from types import MappingProxyType
from typing import Any

import apsw

from erasure.files import tighten
from erasure.models import ErasureRequestEnvelope
from erasure.sqlite import connect, transaction

LEND_WAIT_SECONDS = 0.5
"""How long `open_engine` waits for a session's connection another thread is using before it opens a
connection of its own (a live progress table reading while a step writes, say)."""

ENGINE_SCHEMA = """
CREATE TABLE IF NOT EXISTS engine_meta(
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS requests(
  request_id      TEXT PRIMARY KEY,
  tenant_id       TEXT NOT NULL,
  legal_basis     TEXT NOT NULL,
  data_classes    TEXT NOT NULL,         -- JSON list of tier names
  received_at     TEXT NOT NULL,         -- ISO 8601 UTC
  envelope_sha256 TEXT NOT NULL,         -- canonical envelope digest: same id + other body = conflict
  state           TEXT NOT NULL,
  state_detail    TEXT,                  -- e.g. 'held: 12 items'; never an identifier
  deadline        TEXT NOT NULL,         -- legal deadline, ISO 8601 UTC (pauses and extensions applied)
  target          TEXT NOT NULL,         -- internal target before the deadline
  created_at      TEXT NOT NULL,
  updated_at      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_requests_state ON requests(state);

-- The vault: the validated envelope, identifiers included. Only this table names the subject.
CREATE TABLE IF NOT EXISTS vault(
  request_id    TEXT PRIMARY KEY REFERENCES requests(request_id),
  envelope_json TEXT NOT NULL,
  salt          BLOB NOT NULL              -- per-request salt for the pack's commitments
);

-- The subject's ids as the store spells them (case variants, confirmed aliases), resolved before the
-- first deletion: identifiers, so they live beside the vault and go with it.
CREATE TABLE IF NOT EXISTS vault_store_ids(
  request_id TEXT NOT NULL REFERENCES requests(request_id),
  subject_id TEXT NOT NULL,
  PRIMARY KEY (request_id, subject_id)
) WITHOUT ROWID;

-- Step records of the targets other than the reference store: one row per (request, target, tier).
CREATE TABLE IF NOT EXISTS target_step_records(
  request_id     TEXT NOT NULL,
  target         TEXT NOT NULL,
  step           TEXT NOT NULL,
  status         TEXT NOT NULL,
  before_count   INTEGER,
  after_count    INTEGER,
  started_at     TEXT NOT NULL,
  ended_at       TEXT,
  removed_digest TEXT,
  detail         TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (request_id, target, step)
) WITHOUT ROWID;

-- Clock events: pauses (identity verification) and extensions.
CREATE TABLE IF NOT EXISTS clock_events(
  event_id   INTEGER PRIMARY KEY,
  request_id TEXT NOT NULL REFERENCES requests(request_id),
  kind       TEXT NOT NULL CHECK (kind IN ('pause', 'resume', 'extend')),
  at         TEXT NOT NULL,
  reason     TEXT NOT NULL,
  detail     TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS ix_clock_events_request ON clock_events(request_id);

-- The subject's footprint in the store, resolved before the first deletion: ids only. Later steps
-- reach items whose links an earlier step removed (chunk vectors after their frames) through it,
-- including after a crash. It only ever grows.
CREATE TABLE IF NOT EXISTS footprint(
  request_id TEXT NOT NULL,
  tier       TEXT NOT NULL,
  kind       TEXT NOT NULL,               -- e.g. frame, chunk, entity, blob, example, session
  item_key   TEXT NOT NULL,
  PRIMARY KEY (request_id, tier, kind, item_key)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS step_records(
  request_id     TEXT NOT NULL,
  step           TEXT NOT NULL,
  status         TEXT NOT NULL,           -- running | erased | skipped | blocked | failed | exception
  before_count   INTEGER,
  after_count    INTEGER,
  started_at     TEXT NOT NULL,
  ended_at       TEXT,
  removed_digest TEXT,                    -- sha256 over sorted, length-prefixed removed ids
  detail         TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (request_id, step)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS exceptions(
  exception_id INTEGER PRIMARY KEY,
  request_id   TEXT NOT NULL,
  tier         TEXT NOT NULL,
  kind         TEXT NOT NULL,             -- model_trained_on_subject | subprocessor_failed | residue ...
  item_key     TEXT NOT NULL,
  detail       TEXT NOT NULL DEFAULT '{}',
  ground       TEXT,                      -- Art.17(3) ground, when one applies
  opened_at    TEXT NOT NULL,
  closed_at    TEXT,
  UNIQUE (request_id, tier, kind, item_key)
);

CREATE TABLE IF NOT EXISTS receipts(
  request_id   TEXT NOT NULL,
  processor    TEXT NOT NULL,
  ticket_id    TEXT,
  status       TEXT NOT NULL,             -- done | pending | failed
  requested_at TEXT NOT NULL,
  completed_at TEXT,
  attempts     INTEGER NOT NULL DEFAULT 0,
  detail       TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (request_id, processor)
) WITHOUT ROWID;

-- The engine's own event log (intake, state changes, attestations): ids and counts only.
CREATE TABLE IF NOT EXISTS engine_events(
  seq        INTEGER PRIMARY KEY,
  at         TEXT NOT NULL,
  request_id TEXT,
  event      TEXT NOT NULL,
  detail     TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS ix_engine_events_request ON engine_events(request_id);
"""


class EngineConnection(apsw.Connection):
    """A connection to the engine database. It keeps the envelopes it has validated (`envelopes`, by
    request id: a vaulted envelope never changes), and while a session lends it out, `close()` gives
    it back instead of closing it."""

    def __init__(self, filename: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(filename, *args, **kwargs)
        self.envelopes: dict[str, ErasureRequestEnvelope] = {}
        self.session: _Session | None = None

    def close(self, force: bool = False) -> None:
        """Close the connection; inside its session, give it back (the session closes it at its end)."""
        if self.session is not None:
            self.session.give_back()
            return
        super().close(force)


class _Session:
    """One engine connection lent to every `open_engine` of a run, one thread at a time."""

    def __init__(self, conn: EngineConnection) -> None:
        self.conn = conn
        self._lock = threading.RLock()
        self._held = threading.local()

    def lend(self) -> bool:
        """Take the connection for this thread (again, if it has it already); False when another
        thread kept it past `LEND_WAIT_SECONDS`."""
        if not self._lock.acquire(timeout=LEND_WAIT_SECONDS):
            return False
        self._held.depth = getattr(self._held, "depth", 0) + 1
        return True

    def give_back(self) -> None:
        """This thread is done with one loan (a `close()` without a loan does nothing)."""
        depth = getattr(self._held, "depth", 0)
        if depth:
            self._held.depth = depth - 1
            self._lock.release()

    def end(self) -> None:
        """Close the connection for real, once no thread holds it (or after the wait)."""
        got = self._lock.acquire(timeout=LEND_WAIT_SECONDS)
        try:
            self.conn.session = None
            self.conn.close()
        finally:
            if got:
                self._lock.release()


_SESSIONS: ContextVar[Mapping[str, _Session]] = ContextVar("erasure_engine_sessions", default=MappingProxyType({}))


def _key(path: Path) -> str:
    return str(Path(path).resolve())


def _open(path: Path) -> EngineConnection:
    for suffix in ("", "-wal", "-shm", "-journal"):
        tighten(Path(f"{path}{suffix}"))
    conn = connect(path, factory=EngineConnection)
    assert isinstance(conn, EngineConnection)
    with transaction(conn):
        conn.execute(ENGINE_SCHEMA)
        conn.execute("INSERT OR IGNORE INTO engine_meta(key, value) VALUES ('engine_id', ?)", (secrets.token_hex(16),))
    return conn


def open_engine(path: Path) -> EngineConnection:
    """Open (creating if needed) the engine database at `path`. It is ours and its vault names
    subjects: created 0600 (`connect`), and made 0600 again if it was left readable by others.
    Inside `engine_session(path)`, the session's connection (close it as usual: that gives it back)."""
    sessions = _SESSIONS.get()
    session = sessions.get(_key(path)) if sessions else None
    if session is not None and session.lend():
        return session.conn
    return _open(path)


@contextmanager
def engine_session(path: Path) -> Iterator[EngineConnection]:
    """One connection to the engine database at `path` for everything run inside (this context, and
    threads started with a copy of it, as `contextvars.copy_context().run`): `open_engine(path)` lends
    it, and its `close()` is a no-op until the session ends. A session inside a session of the same
    path is the outer one."""
    key = _key(path)
    sessions = _SESSIONS.get()
    if key in sessions:
        yield sessions[key].conn
        return
    session = _Session(_open(path))
    session.conn.session = session
    token = _SESSIONS.set({**sessions, key: session})
    try:
        yield session.conn
    finally:
        _SESSIONS.reset(token)
        session.end()


def engine_id(conn: apsw.Connection) -> str:
    """This engine database's random identity, fixed at creation. A database rebuilt at the same path
    gets a new one, so nothing keyed on it (Prefect's step cache) outlives the database."""
    row = conn.execute("SELECT value FROM engine_meta WHERE key = 'engine_id'").fetchone()
    assert row is not None
    return str(row[0])
