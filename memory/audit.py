"""The store's audit log (tier 9): a hash chain whose personal fields are salted commitments, and a
Merkle tree over the chain (RFC 6962 / RFC 9162 section 2.1, in `memory/audit_tree.py`). Its hashes,
signed statements and names are the proof pack's wire format, defined once in `wire.format`
(stdlib and `cryptography` only), which the offline verifier checks them with.

Layout (tables in `memory/schema.py`):
- `audit_log`: one row per entry. `entry_hash = sha256(prev_hash + "\\n" + canonical_json(body))`
  with `body = {"seq", "at", "event", "actor", "fields"}`; the first entry's `prev_hash` is 64 zeros.
  A personal field is stored in `fields` as `{"commit": hex}`, `hex = sha256(salt + value)`.
- `audit_vault`: the values and their 16-byte salts, keyed by commitment. Redaction deletes the
  subject's vault rows: the commitments in the chain become unopenable and the chain still verifies.
- `audit_merkle`: the perfect subtrees of the Merkle tree whose leaf i is the raw `entry_hash` of
  seq i+1, extended lazily up to the head when a checkpoint is taken.
- `audit_checkpoints`: signed statements `{"type": "audit-checkpoint/v2", "seq", "head_hash",
  "tree_size", "root_hash", "at"}` (tree_size == seq) by the store's Ed25519 key in
  `<store>/audit-checkpoint.key`. Rows written before the tree existed are `audit-checkpoint/v1`
  (`{"type", "seq", "head_hash", "at"}`, no tree size or root) and still verify here.

`redaction_evidence` writes the `audit-log-redaction/v3` document of a proof pack: the checkpoints
before and after the redaction, the consistency proof between them, and only the redacted entries
and the request's `erasure.audit_redaction` entry, with one multiproof of their inclusion (the
subtrees none of them is in); each entry is written once, its hash and, where its predecessor is
also there, its prev_hash left for the verifier to recompute. O(log n) hashes for a few entries,
about k log(n/k) for k, whatever the size of the log. The offline verifier's check 7
(`proof/verify/audit.py`) is what checks it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
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
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erasure.errors import ConfigError, NotFound, StoreError
from erasure.sqlite import transaction
from memory import audit_tree
from wire.format import (
    AUDIT_FORMAT,
    AUDIT_HASH_RULE,
    AUDIT_REDACTION_EVENT,
    GENESIS,
    MERKLE_TREE_RULE,
    audit_entry_hash,
    canonical_json,
    checkpoint_statement,
    keyid_of,
)

SALT_BYTES = 16
KEY_FILE = "audit-checkpoint.key"  # same name as memory.schema.AUDIT_KEY_FILE
CHECKPOINT_TYPE_V1 = "audit-checkpoint/v1"
"""Checkpoints signed before the Merkle tree: still verified in the store, never put in evidence."""
EVIDENCE_FORMAT = AUDIT_FORMAT
REDACTION_EVENT = AUDIT_REDACTION_EVENT
"""The entry the audit-log step appends after redacting; `fields.request_id` names the request."""


# --- hashing -------------------------------------------------------------------------------------


def commitment(salt: bytes, value: str) -> str:
    """The salted commitment to a personal value: `sha256(salt + value)`, hex."""
    return hashlib.sha256(salt + value.encode("utf-8")).hexdigest()


def iso_utc(at: datetime | None = None) -> str:
    """ISO 8601 in UTC with a `Z` suffix and microseconds; a naive datetime is taken as UTC."""
    at = at or datetime.now(UTC)
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _body(seq: int, at: str, event: str, actor: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"seq": seq, "at": at, "event": event, "actor": actor, "fields": fields}


# --- appending and verifying ---------------------------------------------------------------------


def _head(conn: apsw.Connection) -> tuple[int, str]:
    row = conn.execute("SELECT seq, entry_hash FROM audit_log ORDER BY seq DESC LIMIT 1").fetchone()
    return (0, GENESIS) if row is None else (int(row[0]), str(row[1]))


def append(
    conn: apsw.Connection,
    event: str,
    actor: str,
    fields: dict[str, Any],
    personal: dict[str, tuple[str | None, str]] | None = None,
    *,
    at: datetime | None = None,
) -> int:
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
    digest = audit_entry_hash(prev, _body(seq, when, event, actor, stored))
    conn.execute(
        "INSERT INTO audit_log(seq, at, event, actor, fields, prev_hash, entry_hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
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


def _rows(
    conn: apsw.Connection, start: int = 1, end: int | None = None
) -> Iterator[tuple[int, str, str, str, str, str, str]]:
    sql = "SELECT seq, at, event, actor, fields, prev_hash, entry_hash FROM audit_log WHERE seq >= ?"
    params: tuple[int, ...] = (start,)
    if end is not None:
        sql += " AND seq <= ?"
        params = (start, end)
    for row in conn.execute(sql + " ORDER BY seq", params):
        yield (int(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4]), str(row[5]), str(row[6]))


def verify_chain(conn: apsw.Connection) -> ChainStatus:
    """Recompute every entry's hash and link, the Merkle tree's stored nodes, and check the stored
    checkpoints against both.

    An entry is bad when its seq is not the next one, its `prev_hash` is not the previous entry's
    hash, its `fields` are not canonical JSON, or its hash does not recompute. A stored tree node that
    differs from the one the entries give (or is missing, or covers no entry) makes the first seq it
    covers bad: a log rewritten with every hash recomputed still disagrees with its tree. A checkpoint
    whose seq is missing, whose head hash differs from the entry at its seq (a rewritten or truncated
    tail), or (v2) whose tree size is not its seq or whose root is not the recomputed one, makes its
    seq bad. Signatures are checked by `verify_checkpoint`, which has the key.
    """
    cps = [
        (int(r[0]), str(r[1]), r[2], r[3])
        for r in conn.execute("SELECT seq, head_hash, tree_size, root_hash FROM audit_checkpoints ORDER BY seq")
    ]
    wanted = {seq for seq, *_ in cps}
    count, expected_seq, prev = 0, 1, GENESIS
    first_bad: int | None = None
    heads: dict[int, str] = {0: GENESIS}
    raw_hashes: list[bytes] = []
    for seq, at, event, actor, fields_json, prev_hash, stored_hash in _rows(conn):
        count += 1
        if seq in wanted:
            heads[seq] = stored_hash
        if first_bad is None:
            try:  # NaN or Infinity is no canonical JSON: such an entry is bad
                fields = json.loads(fields_json, parse_constant=_not_json)
            except ValueError:
                fields = None
            if (
                seq != expected_seq
                or prev_hash != prev
                or not isinstance(fields, dict)
                or canonical_json(fields).decode("utf-8") != fields_json
                or audit_entry_hash(prev_hash, _body(seq, at, event, actor, fields)) != stored_hash
            ):
                first_bad = seq
        if first_bad is None:
            raw_hashes.append(bytes.fromhex(stored_hash))
        expected_seq, prev = seq + 1, stored_hash
    tree_bad, roots = audit_tree.recompute(conn, raw_hashes, {int(r[2]) for r in cps if r[2] is not None})
    if tree_bad is not None and (first_bad is None or tree_bad < first_bad):
        first_bad = tree_bad
    for cp_seq, cp_head, tree_size, root_hash in cps:
        bad = heads.get(cp_seq) != cp_head
        if tree_size is not None:
            root = roots.get(int(tree_size))
            bad = bad or int(tree_size) != cp_seq or root is None or root.hex() != root_hash
        if bad and (first_bad is None or cp_seq < first_bad):
            first_bad = cp_seq
    return ChainStatus(
        ok=first_bad is None, entries=count, head_hash=prev, first_bad_seq=first_bad, checkpoints=len(cps)
    )


# --- the checkpoint key and checkpoints ----------------------------------------------------------


def _key_path(store_dir: Path) -> Path:
    return Path(store_dir) / KEY_FILE


def checkpoint_key(store_dir: Path) -> Ed25519PrivateKey:
    """The store's checkpoint key, created (mode 0600, atomically) on first use."""
    path = _key_path(store_dir)
    if not path.exists():
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
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


def checkpoint_public_pem(store_dir: Path) -> bytes:
    """The store's checkpoint public key (SubjectPublicKeyInfo PEM): what a regulator pins with
    `--audit-key`. `NotFound` when the store has no key yet (never creates one)."""
    if not _key_path(store_dir).exists():
        raise NotFound(
            f"the store at {store_dir} has no audit checkpoint key yet (it is made with the first checkpoint)"
        )
    return (
        checkpoint_key(store_dir)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


@dataclass(frozen=True)
class Checkpoint:
    """A signed statement that the log's entry `seq` has hash `head_hash` and that the Merkle tree of
    its first `tree_size` (= seq) entries has root `root_hash` (seq 0: the empty log). A v1 checkpoint,
    signed before the tree existed, has neither (None)."""

    checkpoint_id: int
    seq: int
    head_hash: str
    at: str
    key_id: str
    signature: str  # base64 Ed25519 over the statement
    tree_size: int | None = None
    root_hash: str | None = None

    def statement(self) -> bytes:
        """The bytes the signature covers (v2, or v1 for an old row)."""
        if self.tree_size is None or self.root_hash is None:
            return canonical_json(
                {"type": CHECKPOINT_TYPE_V1, "seq": self.seq, "head_hash": self.head_hash, "at": self.at}
            )
        return checkpoint_statement(self.seq, self.head_hash, self.tree_size, self.root_hash, self.at)

    def as_evidence(self) -> dict[str, Any]:
        """The `before`/`after` object of the redaction evidence (v2 checkpoints only)."""
        if self.tree_size is None:
            raise StoreError(f"audit checkpoint {self.checkpoint_id} is v1 (no Merkle root): it cannot be evidence")
        return {
            "seq": self.seq,
            "head_hash": self.head_hash,
            "tree_size": self.tree_size,
            "root_hash": self.root_hash,
            "at": self.at,
            "signature": self.signature,
        }


def checkpoint(conn: apsw.Connection, store_dir: Path, *, tree_size: int | None = None) -> Checkpoint:
    """Sign the head of the log (or, with `tree_size`, its first `tree_size` entries: a statement
    about a prefix, which never changes) and record it in `audit_checkpoints`.

    Extends the Merkle tree to the head first. Runs in the caller's transaction when there is one (so
    the head cannot move under it), else in its own.
    """
    if not conn.in_transaction:
        with transaction(conn):
            return checkpoint(conn, store_dir, tree_size=tree_size)
    key = checkpoint_key(store_dir)
    size = audit_tree.extend(conn)
    if tree_size is not None:
        if not 0 <= tree_size <= size:
            raise ValueError(f"the log has no prefix of {tree_size} entries")
        size = tree_size
    row = conn.execute("SELECT entry_hash FROM audit_log WHERE seq = ?", (size,)).fetchone()
    head = GENESIS if size == 0 or row is None else str(row[0])
    root = audit_tree.root(conn, size).hex()
    at = iso_utc()
    signature = base64.b64encode(key.sign(checkpoint_statement(size, head, size, root, at))).decode("ascii")
    kid = keyid_of(key.public_key())
    conn.execute(
        "INSERT INTO audit_checkpoints(seq, head_hash, at, key_id, signature, tree_size, root_hash)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (size, head, at, kid, signature, size, root),
    )
    return Checkpoint(int(conn.last_insert_rowid()), size, head, at, kid, signature, size, root)


def checkpoints(conn: apsw.Connection) -> list[Checkpoint]:
    """Every recorded checkpoint, oldest first."""
    return [
        Checkpoint(
            int(r[0]),
            int(r[1]),
            str(r[2]),
            str(r[3]),
            str(r[4]),
            str(r[5]),
            None if r[6] is None else int(r[6]),
            None if r[7] is None else str(r[7]),
        )
        for r in conn.execute(
            "SELECT checkpoint_id, seq, head_hash, at, key_id, signature, tree_size,"
            " root_hash FROM audit_checkpoints ORDER BY checkpoint_id"
        )
    ]


def verify_checkpoint(conn: apsw.Connection, store_dir: Path, cp: Checkpoint) -> bool:
    """True when `cp` is signed by this store's key, its head hash is the log's entry at its seq and
    (v2) its root is the stored tree's root at its size."""
    public = checkpoint_key(store_dir).public_key()
    try:
        public.verify(base64.b64decode(cp.signature, validate=True), cp.statement())
    except (InvalidSignature, ValueError):
        return False
    if cp.key_id != keyid_of(public):
        return False
    if cp.seq == 0:
        head_ok = cp.head_hash == GENESIS
    else:
        row = conn.execute("SELECT entry_hash FROM audit_log WHERE seq = ?", (cp.seq,)).fetchone()
        head_ok = row is not None and row[0] == cp.head_hash
    if cp.tree_size is None:
        return head_ok
    try:
        return head_ok and cp.tree_size == cp.seq and audit_tree.root(conn, cp.tree_size).hex() == cp.root_hash
    except StoreError:
        return False


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
    redacted = [
        RedactedField(int(r[0]), str(r[1]), str(r[2]))
        for r in conn.execute(
            "SELECT seq, field, commitment FROM audit_vault WHERE subject_id = ? ORDER BY seq, field", (subject_id,)
        )
    ]
    conn.execute("DELETE FROM audit_vault WHERE subject_id = ?", (subject_id,))
    return RedactionResult(redacted)


# --- evidence for the proof pack -----------------------------------------------------------------


def _entry_json(row: tuple[int, str, str, str, str, str, str]) -> dict[str, Any]:
    seq, at, event, actor, fields_json, prev_hash, digest = row
    return {
        "seq": seq,
        "at": at,
        "event": event,
        "actor": actor,
        "fields": json.loads(fields_json),
        "prev_hash": prev_hash,
        "entry_hash": digest,
    }


def _entry(conn: apsw.Connection, seq: int) -> dict[str, Any]:
    rows = list(_rows(conn, seq, seq))
    if not rows:
        raise StoreError(f"the audit log has no entry at seq {seq}")
    return _entry_json(rows[0])


def redaction_evidence(
    conn: apsw.Connection,
    store_dir: Path,
    before: Checkpoint,
    after: Checkpoint,
    redacted: RedactionResult | Sequence[tuple[int, str, str]],
    *,
    request_id: str,
    subject_id: str | None = None,
) -> dict[str, Any]:
    """The `audit-log-redaction/v3` document for the proof pack (the offline verifier's check 7).

    `before` and `after` are v2 checkpoints of this store; `consistency` proves the tree at
    after.tree_size extends the one at before.tree_size; `entries` are the entries holding a redacted
    commitment and this request's `erasure.audit_redaction` entry after `before` (seq, at, event,
    actor, fields, and prev_hash only where entry seq-1 is not among them); `multiproof` proves them
    all in the tree of after.tree_size (`audit_tree.multiproof`); `redacted` names (seq, field) of each
    destroyed commitment, which the entry holds. `vault_remaining_for_subject`
    counts the redacted commitments still in the vault plus, when `subject_id` is given, any vault
    value of that subject. Raises `StoreError` when the store does not support the document (another
    key, a log or tree that no longer gives the signed heads and roots, an entry that does not
    recompute, no redaction entry of the request, values left in the vault).
    """
    items = redacted.redacted if isinstance(redacted, RedactionResult) else redacted
    fields = sorted({RedactedField(int(s), str(f), str(c)) for s, f, c in items})
    if before.seq > after.seq:
        raise ValueError("the 'before' checkpoint is later than the 'after' checkpoint")
    if fields and fields[-1].seq > after.seq:
        raise ValueError("a redacted entry lies after the 'after' checkpoint")
    public = checkpoint_key(store_dir).public_key()
    kid = keyid_of(public)
    if before.key_id != kid or after.key_id != kid:
        raise StoreError("an audit checkpoint was signed by another key than this store's")
    before_doc, after_doc = before.as_evidence(), after.as_evidence()
    audit_tree.extend(conn)
    for name, cp in (("before", before), ("after", after)):
        if not verify_checkpoint(conn, store_dir, cp):
            raise StoreError(
                f"the {name} audit checkpoint no longer matches the log or its tree: run audit.verify_chain"
            )
    mine = [
        int(seq)
        for seq, fields_json in conn.execute(
            "SELECT seq, fields FROM audit_log WHERE seq > ? AND seq <= ? AND event = ? ORDER BY seq",
            (before.seq, after.seq, REDACTION_EVENT),
        )
        if json.loads(fields_json).get("request_id") == request_id
    ]
    if not mine:
        raise StoreError(f"no {REDACTION_EVENT} entry of this request between the audit checkpoints")
    seqs = sorted({f.seq for f in fields} | {mine[-1]})
    by_seq: dict[int, dict[str, Any]] = {}
    for seq in seqs:
        e = _entry(conn, seq)
        body = _body(seq, e["at"], e["event"], e["actor"], e["fields"])
        if audit_entry_hash(e["prev_hash"], body) != e["entry_hash"]:
            raise StoreError(f"audit entry {seq} does not recompute: run audit.verify_chain")
        del e["entry_hash"]
        if seq - 1 in by_seq:  # the verifier takes it from the predecessor it recomputes
            del e["prev_hash"]
        by_seq[seq] = e
    for f in fields:
        if by_seq[f.seq]["fields"].get(f.field) != {"commit": f.commitment}:
            raise StoreError(f"audit entry {f.seq} field {f.field!r} does not hold the redacted commitment")
    row = conn.execute(
        "SELECT count(*) FROM audit_vault WHERE subject_id IS ? AND ? IS NOT NULL"
        " OR commitment IN (SELECT value FROM json_each(?))",
        (subject_id, subject_id, json.dumps([f.commitment for f in fields])),
    ).fetchone()
    remaining = int(row[0]) if row else 0
    if remaining:
        raise StoreError("the audit vault still holds values of the subject")
    return {
        "format": EVIDENCE_FORMAT,
        "hash": AUDIT_HASH_RULE,
        "tree": MERKLE_TREE_RULE,
        "checkpoint_key": {
            "key_id": kid,
            "public_key_pem": public.public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ).decode("ascii"),
            "algorithm": "ed25519",
        },
        "before": before_doc,
        "after": after_doc,
        "consistency": [h.hex() for h in audit_tree.consistency(conn, before.seq, after.seq)],
        "entries": [by_seq[seq] for seq in seqs],
        "multiproof": [h.hex() for h in audit_tree.multiproof(conn, [seq - 1 for seq in seqs], after.seq)],
        "redacted": [{"seq": f.seq, "field": f.field} for f in fields],
        "vault_remaining_for_subject": remaining,
    }
