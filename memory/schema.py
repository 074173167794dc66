"""Schema of the reference agent-memory store (`<store>/memory.db`) and the files beside it.

Files under the store directory:
- `memory.db` (+ `-wal`/`-journal`): every table below.
- `sessions/<session_id>.json`: working-tier session state, created lazily by the agent runtime.
- `blobs/<location>/<key[:2]>/<key>`: uploads, written to the primary and every replica location
  listed in `store_meta.blob_locations` (fsspec URLs).
- `corpora/<name>/v<version>.jsonl`: fine-tune corpora, one file per version.
- `audit-checkpoint.key`: the store's Ed25519 key that signs audit-log checkpoints.

Every lookup an erasure needs (by subject, by `(source, source_ref)`, by archive link, by turn key,
by reference, by chunk/frame id) is an index; `tests/memory/test_store_schema.py` asserts it with
EXPLAIN QUERY PLAN.
"""

from __future__ import annotations

from pathlib import Path

import apsw

from erasure.errors import StoreError
from erasure.files import private_dirs
from erasure.sqlite import JournalMode, connect, scalar, transaction
from memory.keyed import hashed

SCHEMA_VERSION = 1
EMBEDDING_DIM = 128

TABLES_SQL = """
CREATE TABLE IF NOT EXISTS store_meta(
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

-- Tier 1: working memory. In-flight session state; each row may also have a session file.
CREATE TABLE IF NOT EXISTS working_sessions(
  session_id TEXT PRIMARY KEY,
  subject_id TEXT NOT NULL,
  source     TEXT,
  source_ref TEXT,
  state      TEXT NOT NULL,            -- JSON: recent turns, scratch notes
  updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_working_sessions_subject ON working_sessions(subject_id);
CREATE INDEX IF NOT EXISTS ix_working_sessions_source ON working_sessions(source, source_ref);

-- Tier 2: episodic. The raw archive is append-only: erasure redacts a row to a skeleton.
CREATE TABLE IF NOT EXISTS raw_archive(
  archive_id   INTEGER PRIMARY KEY,
  archive_uid  TEXT NOT NULL UNIQUE,   -- opaque; rotated to a fresh random value on redaction
  source       TEXT NOT NULL,
  source_ref   TEXT NOT NULL,
  subject_id   TEXT,                   -- NULL once redacted
  content      TEXT,                   -- NULL once redacted
  created_at   TEXT NOT NULL,
  erased_at    TEXT,                   -- set once redacted
  erasure_ref  TEXT                    -- the erasing request's id, never the subject
);
CREATE INDEX IF NOT EXISTS ix_raw_archive_subject ON raw_archive(subject_id);
CREATE INDEX IF NOT EXISTS ix_raw_archive_source ON raw_archive(source, source_ref);
CREATE TRIGGER IF NOT EXISTS raw_archive_append_only BEFORE DELETE ON raw_archive
BEGIN SELECT RAISE(ABORT, 'raw_archive is append-only: redact, never delete'); END;
-- Two updates are allowed: the redaction of a row to a skeleton (its source key's halves become their
-- keyed hashes, 'hmac:...', whatever they spell), and the redaction of a mention
-- (another subject named in this row's text is replaced by '[redacted]'; nothing else changes).
DROP TRIGGER IF EXISTS raw_archive_redact_only;
DROP TRIGGER IF EXISTS raw_archive_redact_only_v2;
CREATE TRIGGER IF NOT EXISTS raw_archive_redact_only_v3 BEFORE UPDATE ON raw_archive
WHEN NOT ((NEW.content IS NULL AND NEW.subject_id IS NULL AND NEW.erased_at IS NOT NULL
           AND (NEW.source = OLD.source OR NEW.source LIKE 'hmac:%')
           AND (NEW.source_ref = OLD.source_ref OR NEW.source_ref LIKE 'hmac:%'))
          OR (NEW.subject_id IS OLD.subject_id AND OLD.erased_at IS NULL AND NEW.erased_at IS NULL
              AND NEW.source = OLD.source AND NEW.source_ref = OLD.source_ref
              AND NEW.archive_uid = OLD.archive_uid AND instr(NEW.content, '[redacted]') > 0))
BEGIN SELECT RAISE(ABORT, 'raw_archive rows may only be redacted'); END;

-- Frames: summary frames (carry subject_id and the archive link), verbatim turn frames (carry
-- neither: reached by turn_key = '<source>/<source_ref>' and their item's key, the column item_key of
-- ADDITIVE_COLUMNS; NULL on turns from before items had keys), derived frames (tier 7: reference and
-- quote other frames through frame_refs).
CREATE TABLE IF NOT EXISTS frames(
  frame_id   INTEGER PRIMARY KEY,
  kind       TEXT NOT NULL CHECK (kind IN ('summary', 'turn', 'derived')),
  subject_id TEXT,
  archive_id INTEGER REFERENCES raw_archive(archive_id),
  turn_key   TEXT,
  turn_seq   INTEGER,
  content    TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_frames_subject ON frames(subject_id);
CREATE INDEX IF NOT EXISTS ix_frames_archive ON frames(archive_id);
CREATE INDEX IF NOT EXISTS ix_frames_turn_key ON frames(turn_key);

CREATE TABLE IF NOT EXISTS frame_refs(
  frame_id     INTEGER NOT NULL REFERENCES frames(frame_id) ON DELETE CASCADE,
  ref_frame_id INTEGER NOT NULL REFERENCES frames(frame_id) ON DELETE CASCADE,
  PRIMARY KEY (frame_id, ref_frame_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_frame_refs_ref ON frame_refs(ref_frame_id);

CREATE TABLE IF NOT EXISTS frame_chunks(
  chunk_id INTEGER PRIMARY KEY,
  frame_id INTEGER NOT NULL REFERENCES frames(frame_id) ON DELETE CASCADE,
  seq      INTEGER NOT NULL,
  content  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_frame_chunks_frame ON frame_chunks(frame_id);

-- Tier 3: semantic. Relations reference entities WITHOUT cascade, as real stores have it:
-- relations must go before their entities.
CREATE TABLE IF NOT EXISTS kg_entities(
  entity_id  INTEGER PRIMARY KEY,
  kind       TEXT NOT NULL,            -- person | email | phone | topic | org
  name       TEXT NOT NULL,
  properties TEXT NOT NULL DEFAULT '{}',
  created_at TEXT NOT NULL,
  UNIQUE (kind, name)
);
CREATE INDEX IF NOT EXISTS ix_kg_entities_name ON kg_entities(name);

CREATE TABLE IF NOT EXISTS kg_relations(
  relation_id   INTEGER PRIMARY KEY,
  src_entity_id INTEGER NOT NULL REFERENCES kg_entities(entity_id),
  dst_entity_id INTEGER NOT NULL REFERENCES kg_entities(entity_id),
  predicate     TEXT NOT NULL,
  properties    TEXT NOT NULL DEFAULT '{}',
  frame_id      INTEGER,               -- provenance: the frame that asserted it (no FK)
  created_at    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_kg_relations_src ON kg_relations(src_entity_id);
CREATE INDEX IF NOT EXISTS ix_kg_relations_dst ON kg_relations(dst_entity_id);
CREATE INDEX IF NOT EXISTS ix_kg_relations_frame ON kg_relations(frame_id);

CREATE TABLE IF NOT EXISTS kg_entity_frames(
  entity_id INTEGER NOT NULL REFERENCES kg_entities(entity_id),
  frame_id  INTEGER NOT NULL REFERENCES frames(frame_id) ON DELETE CASCADE,
  PRIMARY KEY (entity_id, frame_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_kg_entity_frames_frame ON kg_entity_frames(frame_id);

-- Tier 5: fine-tune corpora (files) with an index of whose example is on which line, and lineage.
CREATE TABLE IF NOT EXISTS ft_corpora(
  corpus_id     INTEGER PRIMARY KEY,
  name          TEXT NOT NULL,
  version       INTEGER NOT NULL,
  path          TEXT NOT NULL,         -- relative to the store directory
  sha256        TEXT,                  -- of the file once frozen
  examples      INTEGER NOT NULL DEFAULT 0,
  created_at    TEXT NOT NULL,
  frozen_at     TEXT,                  -- set when a model is trained on it; frozen files never change
  removed_at    TEXT,                  -- bytes removed by an erasure (the row stays, for lineage)
  UNIQUE (name, version)
);
CREATE TABLE IF NOT EXISTS ft_examples(
  example_id INTEGER PRIMARY KEY,
  corpus_id  INTEGER NOT NULL REFERENCES ft_corpora(corpus_id) ON DELETE CASCADE,
  line_no    INTEGER NOT NULL,
  subject_id TEXT,
  source     TEXT NOT NULL,
  source_ref TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_ft_examples_subject ON ft_examples(subject_id);
CREATE INDEX IF NOT EXISTS ix_ft_examples_source ON ft_examples(source, source_ref);
CREATE INDEX IF NOT EXISTS ix_ft_examples_corpus ON ft_examples(corpus_id);
CREATE TABLE IF NOT EXISTS model_lineage(
  model_id   TEXT PRIMARY KEY,
  corpus_id  INTEGER NOT NULL REFERENCES ft_corpora(corpus_id),
  base_model TEXT NOT NULL,
  trained_at TEXT NOT NULL,
  status     TEXT NOT NULL DEFAULT 'deployed'
);
CREATE INDEX IF NOT EXISTS ix_model_lineage_corpus ON model_lineage(corpus_id);

-- Tier 6: uploads. Blob bytes live in every location; the table says whose they are and where.
CREATE TABLE IF NOT EXISTS blobs(
  blob_key   TEXT PRIMARY KEY,         -- opaque random key, never derived from content
  subject_id TEXT,
  source     TEXT NOT NULL,
  source_ref TEXT NOT NULL,
  filename   TEXT NOT NULL,
  size       INTEGER NOT NULL,
  sha256     TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_blobs_subject ON blobs(subject_id);
CREATE INDEX IF NOT EXISTS ix_blobs_source ON blobs(source, source_ref);
CREATE TABLE IF NOT EXISTS blob_locations(
  blob_key TEXT NOT NULL REFERENCES blobs(blob_key) ON DELETE CASCADE,
  location TEXT NOT NULL,              -- fsspec URL of the location root
  PRIMARY KEY (blob_key, location)
) WITHOUT ROWID;

-- Tier 7: derivatives besides derived frames: a recall cache keyed by the frame it was built from
-- (no FK: deleting a frame does not reach it).
CREATE TABLE IF NOT EXISTS recall_cache(
  cache_id   INTEGER PRIMARY KEY,
  frame_id   INTEGER NOT NULL,
  query      TEXT NOT NULL,
  answer     TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_recall_cache_frame ON recall_cache(frame_id);

-- Tier 8: subprocessors. The inventory, and which of our records each processor holds.
CREATE TABLE IF NOT EXISTS subprocessors(
  name     TEXT PRIMARY KEY,
  base_url TEXT NOT NULL,
  purpose  TEXT NOT NULL,
  holds    TEXT NOT NULL DEFAULT '[]'  -- JSON list of the tiers/data classes it receives
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS subprocessor_records(
  record_id  INTEGER PRIMARY KEY,
  processor  TEXT NOT NULL REFERENCES subprocessors(name),
  subject_id TEXT NOT NULL,
  source     TEXT NOT NULL,
  source_ref TEXT NOT NULL,
  remote_ref TEXT,                     -- the processor's own id for the record
  created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_subprocessor_records_subject ON subprocessor_records(subject_id);
CREATE INDEX IF NOT EXISTS ix_subprocessor_records_source ON subprocessor_records(source, source_ref);
CREATE INDEX IF NOT EXISTS ix_subprocessor_records_pending ON subprocessor_records(record_id)
  WHERE remote_ref IS NULL;

-- Tier 9: the audit log. A hash chain over entries whose personal fields are salted commitments;
-- the values and salts live in audit_vault. Redaction deletes vault rows: the chain still verifies.
CREATE TABLE IF NOT EXISTS audit_log(
  seq        INTEGER PRIMARY KEY,
  at         TEXT NOT NULL,
  event      TEXT NOT NULL,
  actor      TEXT NOT NULL,
  fields     TEXT NOT NULL,            -- canonical JSON; personal fields as {"commit": "<hex>"}
  prev_hash  TEXT NOT NULL,
  entry_hash TEXT NOT NULL UNIQUE
);
CREATE TRIGGER IF NOT EXISTS audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TABLE IF NOT EXISTS audit_vault(
  commitment TEXT PRIMARY KEY,         -- hex sha256(salt || value)
  seq        INTEGER NOT NULL REFERENCES audit_log(seq),
  field      TEXT NOT NULL,
  subject_id TEXT,                     -- whose value this is (NULL for non-subject personal data)
  value      TEXT NOT NULL,
  salt       BLOB NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_audit_vault_subject ON audit_vault(subject_id);
CREATE INDEX IF NOT EXISTS ix_audit_vault_seq ON audit_vault(seq);
CREATE TABLE IF NOT EXISTS audit_checkpoints(
  checkpoint_id INTEGER PRIMARY KEY,
  seq           INTEGER NOT NULL,      -- last entry covered
  head_hash     TEXT NOT NULL,
  at            TEXT NOT NULL,
  key_id        TEXT NOT NULL,         -- sha256 of the checkpoint key's public DER
  signature     TEXT NOT NULL          -- base64 Ed25519 over the checkpoint statement
);
-- audit_checkpoints gained tree_size and root_hash (audit-checkpoint/v2) and the log its Merkle tree
-- (audit_merkle) after schema version 1 shipped: both are in ADDITIVE_SQL / _ensure_additive below.

-- Sticky erasure (reference 002): one row per erased item, its source key only as keyed hashes
-- ('hmac:...', `memory.suppression.protect`), whatever the key spells. A row without an item_key was
-- written before items had keys: it stands for its whole conversation (one item per key then).
CREATE TABLE IF NOT EXISTS erased_subjects(
  id          INTEGER PRIMARY KEY,
  source      TEXT NOT NULL,
  source_ref  TEXT NOT NULL,
  item_key    TEXT,                    -- the erased item's `memory.items.item_key`
  erased_at   TEXT NOT NULL,
  request_ref TEXT,                    -- the erasing request's id
  UNIQUE (source, source_ref, item_key)
);

-- Sticky erasure by identity (issue 9): keyed hashes of the erased subjects' normalised identifiers,
-- in ADDITIVE_SQL below (existing stores gain the table when opened).

-- Litigation holds. The subject is named by a keyed hash (store_meta.subject_key_secret), so a
-- released hold does not keep the subject's id in the store's bytes after an erasure.
CREATE TABLE IF NOT EXISTS holds(
  hold_id        INTEGER PRIMARY KEY,
  subject_key    TEXT NOT NULL,
  reason         TEXT NOT NULL,
  placed_at      TEXT NOT NULL,
  placed_by      TEXT NOT NULL,
  released_at    TEXT,
  release_reason TEXT,
  released_by    TEXT
);
CREATE INDEX IF NOT EXISTS ix_holds_subject ON holds(subject_key, released_at);
"""

ADDITIVE_SQL = """
-- Sticky erasure by identity: digest = HMAC-SHA256(store_meta.subject_key_secret, "<kind>:<normal
-- form>") hex (`erasure.identity.salted_hash`) of an erased subject's id, email and phone spellings
-- (never the name: a namesake must not be held), written by the erasure in the same transaction as
-- its erased_subjects rows. Ingest holds an item whose subject matches one (`held_erased_identity`).
CREATE TABLE IF NOT EXISTS erased_identities(
  kind        TEXT NOT NULL CHECK (kind IN ('id', 'email', 'phone')),
  digest      TEXT NOT NULL,
  erasure_ref TEXT NOT NULL,           -- the erasing request's id
  created_at  TEXT NOT NULL,
  PRIMARY KEY (digest, kind, erasure_ref)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_erased_identities_ref ON erased_identities(erasure_ref);

-- The audit log's Merkle tree (RFC 6962 / RFC 9162 2.1, memory/audit_tree.py): every perfect subtree
-- of the leaves stored so far; node (level, idx) covers leaves [idx * 2^level, (idx + 1) * 2^level),
-- leaf i being the entry of seq i+1. Extended lazily up to the head by audit_tree.extend.
CREATE TABLE IF NOT EXISTS audit_merkle(
  level INTEGER NOT NULL,
  idx   INTEGER NOT NULL,
  hash  BLOB NOT NULL,                 -- 32 bytes
  PRIMARY KEY (level, idx)
) WITHOUT ROWID;
"""
"""Tables added after schema version 1 shipped: created on new stores and, when missing, when an
existing store is opened (additive only: new tables, and the nullable columns of `ADDITIVE_COLUMNS`)."""

VIRTUAL_SQL = f"""
CREATE VIRTUAL TABLE IF NOT EXISTS frames_fts USING fts5(content, tokenize = 'unicode61');
CREATE VIRTUAL TABLE IF NOT EXISTS frame_vectors USING vec0(
  frame_id INTEGER PRIMARY KEY, embedding float[{EMBEDDING_DIM}]
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_vectors USING vec0(
  chunk_id INTEGER PRIMARY KEY, embedding float[{EMBEDDING_DIM}]
);
"""
# frames_fts rowid = frames.frame_id; frame_vectors keyed by frame_id; chunk_vectors by chunk_id.

STORE_FILES = ("memory.db",)
SESSIONS_DIR = "sessions"
BLOBS_DIR = "blobs"
CORPORA_DIR = "corpora"
AUDIT_KEY_FILE = "audit-checkpoint.key"


def db_path(store_dir: Path) -> Path:
    return Path(store_dir) / "memory.db"


def create(store_dir: Path, *, tenant_id: str = "default", journal_mode: JournalMode | None = None) -> apsw.Connection:
    """Create (or open and check) the store in `store_dir`; returns a writable connection.

    Idempotent: on an existing store it checks the schema version and the tenant and returns without
    writing (its journal mode is kept unless `journal_mode` is given; a new store starts in WAL).
    FTS5 secure-delete is switched on at creation; it is a persistent property of the FTS table.
    """
    store_dir = Path(store_dir)
    private_dirs(store_dir)  # 0700 when made here; the database file is made 0600 by `connect`
    conn = connect(db_path(store_dir), journal_mode=journal_mode)
    if scalar(conn, "SELECT count(*) FROM sqlite_master WHERE name = 'store_meta'") == 1:
        _check_existing(conn, store_dir, tenant_id)
        _ensure_additive(conn)
        return conn
    with transaction(conn):
        conn.execute(TABLES_SQL)
        conn.execute(ADDITIVE_SQL)
        for table, column, kind in ADDITIVE_COLUMNS:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        conn.execute(VIRTUAL_SQL)
        conn.execute(ITEMS_SQL)
        conn.execute("INSERT INTO frames_fts(frames_fts, rank) VALUES('secure-delete', 1)")
        existing = scalar(conn, "SELECT value FROM store_meta WHERE key='tenant_id'")
        if existing is not None and existing != tenant_id:
            raise StoreError(f"the store at {store_dir} belongs to tenant {existing!r}, not {tenant_id!r}")
        version = scalar(conn, "SELECT value FROM store_meta WHERE key='schema_version'")
        if version is not None and int(version) != SCHEMA_VERSION:
            raise StoreError(f"store schema version {version} is not {SCHEMA_VERSION}")
        conn.execute(
            "INSERT OR IGNORE INTO store_meta(key, value) VALUES "
            "('tenant_id', ?), ('schema_version', ?), ('embedding_dim', ?), ('subject_key_secret', ?),"
            " ('blob_locations', ?)",
            (tenant_id, str(SCHEMA_VERSION), str(EMBEDDING_DIM), _new_secret(), _default_blob_locations(store_dir)),
        )
    return conn


def _check_existing(conn: apsw.Connection, store_dir: Path, tenant_id: str) -> None:
    existing = scalar(conn, "SELECT value FROM store_meta WHERE key='tenant_id'")
    if existing is not None and existing != tenant_id:
        conn.close()
        raise StoreError(f"the store at {store_dir} belongs to tenant {existing!r}, not {tenant_id!r}")
    version = scalar(conn, "SELECT value FROM store_meta WHERE key='schema_version'")
    if version is not None and int(version) != SCHEMA_VERSION:
        conn.close()
        raise StoreError(f"store schema version {version} is not {SCHEMA_VERSION}")


def open_store(store_dir: Path) -> apsw.Connection:
    """Open an existing store for writing; `StoreError` if there is none."""
    path = db_path(Path(store_dir))
    if not path.exists():
        raise StoreError(f"no store at {store_dir}: create one with `erasure store init`")
    conn = connect(path)
    if scalar(conn, "SELECT count(*) FROM sqlite_master WHERE name='store_meta'") != 1:
        raise StoreError(f"{path} is not an agent-memory store")
    _ensure_additive(conn)
    return conn


ADDITIVE_COLUMNS = (
    # audit-checkpoint/v2: the Merkle tree's size and root the checkpoint signs (NULL on v1 rows)
    ("audit_checkpoints", "tree_size", "INTEGER"),
    ("audit_checkpoints", "root_hash", "TEXT"),
    # items are not conversations: an archive row's item identity (`memory.items.item_key`; NULL on rows
    # archived before it, one item per (source, source_ref) then)
    ("raw_archive", "item_key", "TEXT"),
    ("frames", "item_key", "TEXT"),  # a turn frame's item (its turn_key is its conversation's)
)
"""Columns added after schema version 1 shipped: (table, column, type), added when missing."""


def _ensure_additive(conn: apsw.Connection) -> None:
    """Create the tables of `ADDITIVE_SQL` and the `ADDITIVE_COLUMNS` on a store made before them
    (writes only when one is missing)."""
    tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    missing_tables = not {"erased_identities", "audit_merkle"} <= tables
    missing_columns = [
        (t, c, kind)
        for t, c, kind in ADDITIVE_COLUMNS
        if c not in {str(r[1]) for r in conn.execute(f"PRAGMA table_info({t})")}
    ]
    suppression_columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(erased_subjects)")}
    legacy_keys = bool(suppression_columns) and "item_key" not in suppression_columns  # gone: guard fails closed
    if missing_tables or missing_columns or legacy_keys:
        with transaction(conn):
            conn.execute(ADDITIVE_SQL)
            for table, column, kind in missing_columns:
                if column not in {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            conn.execute(ITEMS_SQL)
            if legacy_keys:
                _migrate_erased_keys(conn)


ITEMS_SQL = """
CREATE INDEX IF NOT EXISTS ix_raw_archive_item ON raw_archive(item_key);
CREATE INDEX IF NOT EXISTS ix_frames_turn_item ON frames(turn_key, item_key);
"""
"""Indexes of item identities (dedup at ingest, an item's turn frames), made once the columns exist."""


def _migrate_erased_keys(conn: apsw.Connection) -> None:
    """Rebuild `erased_subjects` of a store made before items had keys: unique per item, not per
    conversation, and every source key of an erased item, in the list and in the archive's skeletons,
    kept only as its keyed hash (old rows kept a half in plaintext unless it spelled the subject)."""
    rows = conn.execute("SELECT id, source, source_ref, erased_at, request_ref FROM erased_subjects").fetchall()
    conn.execute("ALTER TABLE erased_subjects RENAME TO erased_subjects_v1")
    conn.execute(TABLES_SQL)  # creates the new erased_subjects; every other table exists already
    conn.executemany(
        "INSERT OR IGNORE INTO erased_subjects(id, source, source_ref, erased_at, request_ref) VALUES (?,?,?,?,?)",
        [(i, hashed(conn, str(s)), hashed(conn, str(r)), at, ref) for i, s, r, at, ref in rows],
    )
    conn.execute("DROP TABLE erased_subjects_v1")
    skeletons = conn.execute("SELECT archive_id, source, source_ref FROM raw_archive WHERE erased_at IS NOT NULL")
    conn.executemany(
        "UPDATE raw_archive SET source = ?, source_ref = ? WHERE archive_id = ?",
        [
            (hs, hr, a)
            for a, s, r in skeletons.fetchall()
            if (hs := hashed(conn, str(s)), hr := hashed(conn, str(r))) != (s, r)
        ],
    )


def meta(conn: apsw.Connection, key: str) -> str:
    value = scalar(conn, "SELECT value FROM store_meta WHERE key=?", (key,))
    if value is None:
        raise StoreError(f"store_meta has no {key!r}")
    return str(value)


def _new_secret() -> str:
    import secrets

    return secrets.token_hex(32)


def _default_blob_locations(store_dir: Path) -> str:
    """Blob locations: paths relative to the store directory, or fsspec URLs (`s3://...`)."""
    import json

    return json.dumps([f"{BLOBS_DIR}/primary", f"{BLOBS_DIR}/replica-1"])
