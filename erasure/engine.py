"""The engine database (`<home>/engine/engine.db`): ours, kept apart from the store on purpose.

It holds the request vault (the only place a subject's identifiers are kept, for as long as the
request is evidence), request state and clock, the subject footprint (ids only), step records,
exceptions, subprocessor receipts and the engine's own event log. Nothing here is erased by a
cascade; after an erasure the vault still names whom the request was for.

`open_engine` is the one place a connection to it is made; who opens one, and how a run shares it,
is `erasure.engine_db.Engine`'s business.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from erasure.files import tighten
from erasure.sqlite import connect, transaction

if TYPE_CHECKING:  # pydantic is imported only where an envelope is validated (the CLI answers at once)
    from erasure.models import ErasureRequestEnvelope

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

-- Confirmation tokens of `erasure mcp` that were used (single use, across processes): the token's
-- random id and the request it filed, never the identifiers it carried.
CREATE TABLE IF NOT EXISTS agent_tokens(
  token_id   TEXT PRIMARY KEY,
  used_at    TEXT NOT NULL,
  request_id TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_agent_tokens_request ON agent_tokens(request_id);
"""


class EngineConnection(apsw.Connection):
    """A connection to the engine database. It keeps the envelopes it has validated (`envelopes`, by
    request id: a vaulted envelope never changes)."""

    def __init__(self, filename: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(filename, *args, **kwargs)
        self.envelopes: dict[str, ErasureRequestEnvelope] = {}


def open_engine(path: Path) -> EngineConnection:
    """Open (creating if needed) the engine database at `path`: a new connection, every call. It is
    ours and its vault names subjects: created 0600 (`connect`), and made 0600 again if it was left
    readable by others. Only entry points open one, through `erasure.engine_db.Engine`."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        tighten(Path(f"{path}{suffix}"))
    conn = connect(path, factory=EngineConnection)
    assert isinstance(conn, EngineConnection)
    with transaction(conn):
        conn.execute(ENGINE_SCHEMA)
        conn.execute("INSERT OR IGNORE INTO engine_meta(key, value) VALUES ('engine_id', ?)", (secrets.token_hex(16),))
    return conn


def engine_id(conn: apsw.Connection) -> str:
    """This engine database's random identity, fixed at creation. A database rebuilt at the same path
    gets a new one, so nothing keyed on it (Prefect's step cache) outlives the database."""
    row = conn.execute("SELECT value FROM engine_meta WHERE key = 'engine_id'").fetchone()
    assert row is not None
    return str(row[0])
