"""The store's audit log (tier 9): a hash chain whose personal fields are salted commitments.

Layout (tables in `memory/schema.py`):
- `audit_log`: one row per entry. `entry_hash = sha256(prev_hash + "\\n" + canonical_json(body))`
  with `body = {"seq", "at", "event", "actor", "fields"}`; the first entry's `prev_hash` is 64 zeros.
  A personal field is stored in `fields` as `{"commit": hex}`, `hex = sha256(salt + value)`.
- `audit_vault`: the values and their 16-byte salts, keyed by commitment. Redaction deletes the
  subject's vault rows: the commitments in the chain become unopenable and the chain still verifies.
- `audit_checkpoints`: signed statements `{"type": "audit-checkpoint/v1", "seq", "head_hash", "at"}`
  by the store's Ed25519 key in `<store>/audit-checkpoint.key`.

`check_redaction_evidence` is stdlib + cryptography only: it checks the `audit-log-redaction/v1`
document that goes into a proof pack, and the offline verifier re-implements the same rules.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import secrets
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import apsw
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from erasure.errors import ConfigError, StoreError
from erasure.sqlite import transaction

GENESIS_HASH = "0" * 64
SALT_BYTES = 16
KEY_FILE = "audit-checkpoint.key"  # same name as memory.schema.AUDIT_KEY_FILE
CHECKPOINT_TYPE = "audit-checkpoint/v1"
EVIDENCE_FORMAT = "audit-log-redaction/v1"
HASH_RULE = "sha256(prev_hash + '\\n' + canonical_json(body))"
FULL_ENTRIES_LIMIT = 5000
"""Evidence lists every entry up to the `after` checkpoint when there are at most this many."""

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


# --- hashing -------------------------------------------------------------------------------------

def canonical_json(obj: Any) -> bytes:
    """The one serialisation that is hashed and signed: sorted keys, no spaces, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def entry_hash(prev_hash: str, body: dict[str, Any]) -> str:
    """`sha256(prev_hash + "\\n" + canonical_json(body))`, hex."""
    return hashlib.sha256(prev_hash.encode("ascii") + b"\n" + canonical_json(body)).hexdigest()


def commitment(salt: bytes, value: str) -> str:
    """The salted commitment to a personal value: `sha256(salt + value)`, hex."""
    return hashlib.sha256(salt + value.encode("utf-8")).hexdigest()


def iso_utc(at: datetime | None = None) -> str:
    """ISO 8601 in UTC with a `Z` suffix and microseconds; a naive datetime is taken as UTC."""
    at = at or datetime.now(UTC)
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _body(seq: int, at: str, event: str, actor: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"seq": seq, "at": at, "event": event, "actor": actor, "fields": fields}


# --- appending and verifying ---------------------------------------------------------------------

def _head(conn: apsw.Connection) -> tuple[int, str]:
    row = conn.execute("SELECT seq, entry_hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
    return (0, GENESIS_HASH) if row is None else (int(row[0]), str(row[1]))


def append(conn: apsw.Connection, event: str, actor: str, fields: dict[str, Any],
           personal: dict[str, tuple[str | None, str]] | None = None, *,
           at: datetime | None = None) -> int:
    """Append one entry and return its seq. Runs inside the caller's transaction (outside any, it
    opens its own so the entry and its vault rows commit together).

    `fields` are stored as given (ids, counts, digests: never personal data). Each item of
    `personal` is `field -> (subject_id or None, value)`: the entry holds only `{"commit": hex}` for
    it, and the value with its fresh random salt goes to `audit_vault`. `actor` should name a role
    or service; a person as actor belongs in `personal`.
    """
    if not conn.in_transaction:  # the entry and its vault rows must land together
        with transaction(conn):
            return append(conn, event, actor, fields, personal, at=at)
    personal = personal or {}
    clash = sorted(set(fields) & set(personal))
    if clash:
        raise ValueError(f"audit fields given both plain and personal: {', '.join(clash)}")
    stored = dict(fields)
    vault: list[tuple[str, str, str | None, str, bytes]] = []
    for name, (subject_id, value) in personal.items():
        salt = secrets.token_bytes(SALT_BYTES)
        commit = commitment(salt, value)
        stored[name] = {"commit": commit}
        vault.append((commit, name, subject_id, value, salt))
    last_seq, prev = _head(conn)
    seq = last_seq + 1
    when = iso_utc(at)
    fields_json = canonical_json(stored).decode("utf-8")
    digest = entry_hash(prev, _body(seq, when, event, actor, stored))
    conn.execute(
        "INSERT INTO audit_log(seq, at, event, actor, fields, prev_hash, entry_hash)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (seq, when, event, actor, fields_json, prev, digest),
    )
    conn.executemany(
        "INSERT INTO audit_vault(commitment, seq, field, subject_id, value, salt) VALUES (?, ?, ?, ?, ?, ?)",
        [(c, seq, name, sid, value, salt) for c, name, sid, value, salt in vault],
    )
    return seq


@dataclass(frozen=True)
class ChainStatus:
    """What `verify_chain` found. `first_bad_seq` is the first seq known to be wrong, else None."""

    ok: bool
    entries: int
    head_hash: str
    first_bad_seq: int | None
    checkpoints: int = 0


def _rows(conn: apsw.Connection, start: int = 1,
          end: int | None = None) -> Iterator[tuple[int, str, str, str, str, str, str]]:
    sql = "SELECT seq, at, event, actor, fields, prev_hash, entry_hash FROM audit_log WHERE seq >= ?"
    params: tuple[int, ...] = (start,)
    if end is not None:
        sql += " AND seq <= ?"
        params = (start, end)
    for row in conn.execute(sql + " ORDER BY seq", params):
        yield (int(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4]), str(row[5]), str(row[6]))


def verify_chain(conn: apsw.Connection) -> ChainStatus:
    """Recompute every entry's hash and link, then check the stored checkpoints against the chain.

    An entry is bad when its seq is not the next one, its `prev_hash` is not the previous entry's
    hash, its `fields` are not canonical JSON, or its hash does not recompute. A checkpoint whose
    seq is missing or whose head hash differs from the entry at its seq (a rewritten or truncated
    tail) makes its seq bad. Signatures are checked by `verify_checkpoint`, which has the key.
    """
    count, expected_seq, prev = 0, 1, GENESIS_HASH
    first_bad: int | None = None
    hashes: dict[int, str] = {}
    for seq, at, event, actor, fields_json, prev_hash, stored_hash in _rows(conn):
        count += 1
        hashes[seq] = stored_hash
        if first_bad is None:
            try:
                fields = json.loads(fields_json)
            except ValueError:
                fields = None
            if (seq != expected_seq or prev_hash != prev or not isinstance(fields, dict)
                    or canonical_json(fields).decode("utf-8") != fields_json
                    or entry_hash(prev_hash, _body(seq, at, event, actor, fields)) != stored_hash):
                first_bad = seq
        expected_seq, prev = seq + 1, stored_hash
    checked = 0
    for cp_seq, cp_head in conn.execute("SELECT seq, head_hash FROM audit_checkpoints ORDER BY seq"):
        checked += 1
        actual = GENESIS_HASH if cp_seq == 0 else hashes.get(int(cp_seq))
        if actual != cp_head and (first_bad is None or int(cp_seq) < first_bad):
            first_bad = int(cp_seq)
    return ChainStatus(ok=first_bad is None, entries=count, head_hash=prev, first_bad_seq=first_bad,
                       checkpoints=checked)


# --- the checkpoint key and checkpoints ----------------------------------------------------------

def _key_path(store_dir: Path) -> Path:
    return Path(store_dir) / KEY_FILE


def checkpoint_key(store_dir: Path) -> Ed25519PrivateKey:
    """The store's checkpoint key, created (mode 0600, atomically) on first use."""
    path = _key_path(store_dir)
    if not path.exists():
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".audit-key-", dir=path.parent)  # mkstemp creates 0600
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(pem)
                fh.flush()
                os.fsync(fh.fileno())
            with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
    if path.stat().st_mode & 0o077:
        raise ConfigError(f"{path} is readable by others: run `chmod 600 {path}`")
    try:
        loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except ValueError as exc:
        raise ConfigError(f"{path} is not a PEM private key") from exc
    if not isinstance(loaded, Ed25519PrivateKey):
        raise ConfigError(f"{path} is not an Ed25519 key")
    return loaded


def public_key_der(public_key: Ed25519PublicKey) -> bytes:
    """SubjectPublicKeyInfo DER of the key: what `key_id` hashes."""
    return public_key.public_bytes(serialization.Encoding.DER,
                                   serialization.PublicFormat.SubjectPublicKeyInfo)


def key_id(public_key: Ed25519PublicKey) -> str:
    """sha256 of the public key's DER, hex."""
    return hashlib.sha256(public_key_der(public_key)).hexdigest()


def checkpoint_statement(seq: int, head_hash: str, at: str) -> bytes:
    """The bytes a checkpoint signature covers."""
    return canonical_json({"type": CHECKPOINT_TYPE, "seq": seq, "head_hash": head_hash, "at": at})


@dataclass(frozen=True)
class Checkpoint:
    """A signed statement that the log's entry `seq` has hash `head_hash` (seq 0: the empty log)."""

    checkpoint_id: int
    seq: int
    head_hash: str
    at: str
    key_id: str
    signature: str  # base64 Ed25519 over checkpoint_statement(seq, head_hash, at)

    def as_evidence(self) -> dict[str, Any]:
        """The `before`/`after` object of the redaction evidence."""
        return {"seq": self.seq, "head_hash": self.head_hash, "at": self.at, "signature": self.signature}


def checkpoint(conn: apsw.Connection, store_dir: Path) -> Checkpoint:
    """Sign the current head of the log and record it in `audit_checkpoints`.

    Runs in the caller's transaction when there is one (so the head cannot move under it).
    """
    key = checkpoint_key(store_dir)
    seq, head = _head(conn)
    at = iso_utc()
    signature = base64.b64encode(key.sign(checkpoint_statement(seq, head, at))).decode("ascii")
    kid = key_id(key.public_key())
    conn.execute(
        "INSERT INTO audit_checkpoints(seq, head_hash, at, key_id, signature) VALUES (?, ?, ?, ?, ?)",
        (seq, head, at, kid, signature),
    )
    return Checkpoint(int(conn.last_insert_rowid()), seq, head, at, kid, signature)


def checkpoints(conn: apsw.Connection) -> list[Checkpoint]:
    """Every recorded checkpoint, oldest first."""
    return [Checkpoint(int(r[0]), int(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]))
            for r in conn.execute("SELECT checkpoint_id, seq, head_hash, at, key_id, signature"
                                  " FROM audit_checkpoints ORDER BY checkpoint_id")]


def _signature_ok(public_key: Ed25519PublicKey, seq: int, head_hash: str, at: str, signature: str) -> bool:
    try:
        public_key.verify(base64.b64decode(signature, validate=True),
                          checkpoint_statement(seq, head_hash, at))
    except (InvalidSignature, ValueError):
        return False
    return True


def verify_checkpoint(conn: apsw.Connection, store_dir: Path, cp: Checkpoint) -> bool:
    """True when `cp` is signed by this store's key and its head hash is the log's entry at its seq."""
    public = checkpoint_key(store_dir).public_key()
    if cp.key_id != key_id(public) or not _signature_ok(public, cp.seq, cp.head_hash, cp.at, cp.signature):
        return False
    if cp.seq == 0:
        return cp.head_hash == GENESIS_HASH
    row = conn.execute("SELECT entry_hash FROM audit_log WHERE seq = ?", (cp.seq,)).fetchone()
    return row is not None and row[0] == cp.head_hash


# --- redaction -----------------------------------------------------------------------------------

class RedactedField(NamedTuple):
    """One commitment whose value and salt were destroyed."""

    seq: int
    field: str
    commitment: str


@dataclass(frozen=True)
class RedactionResult:
    """What `redact_subject` destroyed: ids and commitments only."""

    redacted: list[RedactedField]

    @property
    def count(self) -> int:
        return len(self.redacted)


def vault_count(conn: apsw.Connection, subject_id: str) -> int:
    """How many vault values of the subject remain."""
    row = conn.execute("SELECT count(*) FROM audit_vault WHERE subject_id = ?", (subject_id,)).fetchone()
    return int(row[0]) if row else 0


def redact_subject(conn: apsw.Connection, subject_id: str) -> RedactionResult:
    """Delete the subject's vault rows (values and salts) inside the caller's transaction.

    The log itself is untouched, so the chain still verifies; `secure_delete` (set by
    `erasure.sqlite.connect`) zeroes the freed bytes, and the caller checkpoints the WAL after commit.
    Idempotent: a second call redacts nothing.
    """
    redacted = [RedactedField(int(r[0]), str(r[1]), str(r[2])) for r in conn.execute(
        "SELECT seq, field, commitment FROM audit_vault WHERE subject_id = ? ORDER BY seq, field",
        (subject_id,))]
    conn.execute("DELETE FROM audit_vault WHERE subject_id = ?", (subject_id,))
    return RedactionResult(redacted)


# --- evidence for the proof pack -----------------------------------------------------------------

def _entry_json(row: tuple[int, str, str, str, str, str, str]) -> dict[str, Any]:
    seq, at, event, actor, fields_json, prev_hash, digest = row
    return {"seq": seq, "at": at, "event": event, "actor": actor, "fields": json.loads(fields_json),
            "prev_hash": prev_hash, "entry_hash": digest}


def redaction_evidence(conn: apsw.Connection, store_dir: Path, before: Checkpoint, after: Checkpoint,
                       redacted: RedactionResult | Sequence[tuple[int, str, str]], *,
                       subject_id: str | None = None) -> dict[str, Any]:
    """The `audit-log-redaction/v1` document for the proof pack (see `check_redaction_evidence`).

    Every entry up to `after.seq` is listed when there are at most `FULL_ENTRIES_LIMIT`; otherwise
    the entries from the first redacted seq (or `before.seq`, if earlier) onwards, the first one's
    `prev_hash` anchoring them. `vault_remaining_for_subject` counts the redacted commitments still
    in the vault plus, when `subject_id` is given, any vault value of that subject. The document is
    checked before it is returned: `StoreError` if the log does not support it.
    """
    items = redacted.redacted if isinstance(redacted, RedactionResult) else redacted
    fields = sorted(RedactedField(int(s), str(f), str(c)) for s, f, c in items)
    if before.seq > after.seq:
        raise ValueError("the 'before' checkpoint is later than the 'after' checkpoint")
    if fields and fields[-1].seq > after.seq:
        raise ValueError("a redacted entry lies after the 'after' checkpoint")
    public = checkpoint_key(store_dir).public_key()
    kid = key_id(public)
    if before.key_id != kid or after.key_id != kid:
        raise StoreError("an audit checkpoint was signed by another key than this store's")
    start = 1
    if after.seq > FULL_ENTRIES_LIMIT:
        anchors = [s for s in [before.seq, *(f.seq for f in fields)] if s > 0]
        start = min(anchors, default=after.seq) or 1
    entries = [_entry_json(r) for r in _rows(conn, start, after.seq)]
    row = conn.execute(
        "SELECT count(*) FROM audit_vault WHERE subject_id IS ? AND ? IS NOT NULL"
        " OR commitment IN (SELECT value FROM json_each(?))",
        (subject_id, subject_id, json.dumps([f.commitment for f in fields])),
    ).fetchone()
    remaining = int(row[0]) if row else 0
    doc: dict[str, Any] = {
        "format": EVIDENCE_FORMAT,
        "hash": HASH_RULE,
        "checkpoint_key": {
            "key_id": kid,
            "public_key_pem": public.public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo
                                                  ).decode("ascii"),
            "algorithm": "ed25519",
        },
        "before": before.as_evidence(),
        "after": after.as_evidence(),
        "entries": entries,
        "redacted": [{"seq": f.seq, "field": f.field, "commitment": f.commitment} for f in fields],
        "vault_remaining_for_subject": remaining,
    }
    try:
        check_redaction_evidence(doc)
    except ValueError as exc:
        raise StoreError(f"the audit log does not support its redaction evidence: {exc}") from exc
    return doc


def check_redaction_evidence(doc: dict[str, Any]) -> None:
    """Check an `audit-log-redaction/v1` document; raise `ValueError` naming the first fault.

    Steps:
    1. `format` and `hash` are the v1 strings.
    2. `checkpoint_key` is an Ed25519 public key whose `key_id` is sha256 of its DER.
    3. `before` and `after` signatures verify over their checkpoint statements; before.seq <= after.seq.
    4. `entries` have consecutive seqs ending at after.seq; they start at 1 (prev_hash = 64 zeros)
       unless after.seq > 5000, when they start no later than before.seq and every redacted seq.
    5. Each entry's hash recomputes; each prev_hash is the previous entry's hash.
    6. before.head_hash / after.head_hash are the entry hashes at their seqs (64 zeros at seq 0).
    7. Each redacted (seq, field) holds exactly `{"commit": commitment}` in that entry.
    8. `vault_remaining_for_subject` is 0.
    Uses only the stdlib and cryptography, like the offline verifier.
    """
    try:
        _check(doc)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ValueError(f"malformed redaction evidence: {type(exc).__name__}: {exc}") from exc


def _int(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{what} is not a non-negative integer")
    return value


def _check(doc: dict[str, Any]) -> None:
    # 1
    if doc["format"] != EVIDENCE_FORMAT:
        raise ValueError(f"format is not {EVIDENCE_FORMAT}")
    if doc["hash"] != HASH_RULE:
        raise ValueError("hash rule is not the v1 rule")
    # 2
    ck = doc["checkpoint_key"]
    if ck["algorithm"] != "ed25519":
        raise ValueError("checkpoint key algorithm is not ed25519")
    try:
        public = serialization.load_pem_public_key(ck["public_key_pem"].encode("ascii"))
    except ValueError as exc:
        raise ValueError("checkpoint public key is not a PEM public key") from exc
    if not isinstance(public, Ed25519PublicKey):
        raise ValueError("checkpoint public key is not Ed25519")
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if hashlib.sha256(der).hexdigest() != ck["key_id"]:
        raise ValueError("checkpoint key_id is not sha256 of the public key's DER")
    # 3
    cps = {}
    for name in ("before", "after"):
        cp = doc[name]
        seq = _int(cp["seq"], f"{name}.seq")
        if not _HEX64.match(cp["head_hash"]):
            raise ValueError(f"{name}.head_hash is not 64 hex digits")
        if not _signature_ok(public, seq, cp["head_hash"], cp["at"], cp["signature"]):
            raise ValueError(f"{name} checkpoint signature does not verify")
        cps[name] = (seq, cp["head_hash"])
    (before_seq, before_head), (after_seq, after_head) = cps["before"], cps["after"]
    if before_seq > after_seq:
        raise ValueError("before.seq is later than after.seq")
    redacted = doc["redacted"]
    redacted_seqs = [_int(r["seq"], "redacted seq") for r in redacted]
    # 4
    entries = doc["entries"]
    if not isinstance(entries, list):
        raise ValueError("entries is not a list")
    if after_seq == 0:
        if entries:
            raise ValueError("entries listed past the 'after' checkpoint at seq 0")
    else:
        if not entries:
            raise ValueError("no entries for a non-empty log")
        first = _int(entries[0]["seq"], "entries[0].seq")
        if after_seq <= FULL_ENTRIES_LIMIT and first != 1:
            raise ValueError(f"entries start at seq {first}, not 1, for a log of {after_seq} entries")
        latest_start = min([s for s in [before_seq, *redacted_seqs] if s > 0], default=after_seq)
        if first > latest_start:
            raise ValueError(f"entries start at seq {first}, after seq {latest_start} that they must cover")
    # 5
    hashes: dict[int, str] = {}
    by_seq: dict[int, dict[str, Any]] = {}
    prev: str | None = None
    expected: int | None = None
    for i, e in enumerate(entries):
        seq = _int(e["seq"], f"entries[{i}].seq")
        if expected is not None and seq != expected:
            raise ValueError(f"entries are not consecutive at seq {seq} (expected {expected})")
        if prev is None:
            if seq == 1 and e["prev_hash"] != GENESIS_HASH:
                raise ValueError("the first entry's prev_hash is not the genesis hash")
        elif e["prev_hash"] != prev:
            raise ValueError(f"broken link at seq {seq}: prev_hash is not the previous entry's hash")
        if not isinstance(e["fields"], dict):
            raise ValueError(f"entry {seq} fields is not an object")
        body = _body(seq, e["at"], e["event"], e["actor"], e["fields"])
        if not isinstance(e["prev_hash"], str) or entry_hash(e["prev_hash"], body) != e["entry_hash"]:
            raise ValueError(f"entry {seq} hash does not recompute")
        hashes[seq], by_seq[seq] = e["entry_hash"], e
        prev, expected = e["entry_hash"], seq + 1
    if entries and expected is not None and expected - 1 != after_seq:
        raise ValueError(f"entries end at seq {expected - 1}, not at after.seq {after_seq}")
    # 6
    for name, seq, head in (("before", before_seq, before_head), ("after", after_seq, after_head)):
        actual = GENESIS_HASH if seq == 0 else hashes.get(seq)
        if actual != head:
            raise ValueError(f"{name}.head_hash is not the hash of entry {seq}")
    # 7
    for r, seq in zip(redacted, redacted_seqs, strict=True):
        commit = r["commitment"]
        if not isinstance(commit, str) or not _HEX64.match(commit):
            raise ValueError(f"redacted commitment at seq {seq} is not 64 hex digits")
        if seq not in by_seq:
            raise ValueError(f"redacted seq {seq} is not among the entries")
        if by_seq[seq]["fields"].get(r["field"]) != {"commit": commit}:
            raise ValueError(f"entry {seq} field {r['field']!r} does not hold the redacted commitment")
    # 8
    if _int(doc["vault_remaining_for_subject"], "vault_remaining_for_subject") != 0:
        raise ValueError("the vault still holds values of the subject")
