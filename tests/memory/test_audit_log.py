"""The store's hash-chained audit log (tier 9): commitments, chain, checkpoints, redaction evidence."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw
import pytest

import wire.format
from erasure.config import Home
from erasure.errors import StoreError
from erasure.sqlite import checkpoint_truncate, connect, transaction
from memory import audit, audit_tree, schema
from proof import verify
from proof.verify import archive

ALICE = "subj-alice"
BOB = "subj-bob"
ALICE_EMAIL = "alice.liddell@example.org"
ALICE_NAME = "Alice Pleasance Liddell"
BOB_EMAIL = "bob.bystander@example.net"


@pytest.fixture
def store(home: Home) -> Iterator[apsw.Connection]:
    conn = schema.create(home.store_dir)
    yield conn
    conn.close()


def _populate(conn: apsw.Connection) -> list[int]:
    """Seven entries: Alice personal at seqs 2 and 5, Bob at 3, plain events elsewhere."""
    seqs = []
    with transaction(conn):
        seqs.append(audit.append(conn, "store.created", "system", {"tenant": "default"}))
        seqs.append(
            audit.append(
                conn,
                "ingest",
                "ingest-worker",
                {"items": 3},
                {"email": (ALICE, ALICE_EMAIL), "name": (ALICE, ALICE_NAME)},
            )
        )
        seqs.append(audit.append(conn, "ingest", "ingest-worker", {"items": 1}, {"email": (BOB, BOB_EMAIL)}))
        seqs.append(audit.append(conn, "hold.placed", "compliance", {"hold_id": 1}))
        seqs.append(audit.append(conn, "export", "api", {"rows": 2}, {"email": (ALICE, ALICE_EMAIL)}))
        seqs.append(audit.append(conn, "ingest", "ingest-worker", {"items": 5}))
        seqs.append(audit.append(conn, "ingest", "ingest-worker", {"items": 6}, {"operator": (None, "Dana Operator")}))
    return seqs


def _one(conn: apsw.Connection, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...]:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return tuple(row)


def _log_rows(conn: apsw.Connection) -> list[tuple[Any, ...]]:
    return list(conn.execute("SELECT * FROM audit_log ORDER BY seq"))


def _db_bytes(store_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(store_dir.glob("memory.db*")))


def _raw_tamper(store_dir: Path, sql: str, params: tuple[Any, ...] = ()) -> None:
    """What an attacker with file access does: drop the append-only triggers and edit rows."""
    raw = connect(schema.db_path(store_dir))
    raw.execute("PRAGMA foreign_keys=OFF")
    raw.execute("DROP TRIGGER audit_log_no_update")
    raw.execute("DROP TRIGGER audit_log_no_delete")
    raw.execute(sql, params)
    raw.close()


# --- append ---------------------------------------------------------------------------------------


def test_append_keeps_personal_values_out_of_the_log(store: apsw.Connection) -> None:
    seqs = _populate(store)
    assert seqs == [1, 2, 3, 4, 5, 6, 7]
    log_text = json.dumps(_log_rows(store))
    for value in (ALICE_EMAIL, ALICE_NAME, BOB_EMAIL, ALICE, BOB, "Dana Operator"):
        assert value not in log_text
    fields = json.loads(_one(store, "SELECT fields FROM audit_log WHERE seq = 2")[0])
    assert fields["items"] == 3
    assert set(fields["email"]) == {"commit"} and len(fields["email"]["commit"]) == 64
    # the commitment opens with the vault's salt and value
    salt, value = _one(store, "SELECT salt, value FROM audit_vault WHERE commitment = ?", (fields["email"]["commit"],))
    assert value == ALICE_EMAIL and len(salt) == audit.SALT_BYTES
    assert audit.commitment(salt, value) == fields["email"]["commit"]
    # the same value gets a fresh salt each time: two entries do not link by commitment
    again = json.loads(_one(store, "SELECT fields FROM audit_log WHERE seq = 5")[0])
    assert again["email"]["commit"] != fields["email"]["commit"]
    assert audit.vault_count(store, ALICE) == 3
    assert audit.vault_count(store, BOB) == 1


def test_append_hashes_the_documented_body(store: apsw.Connection) -> None:
    at = datetime(2024, 2, 29, 12, 30, 5, 123456, tzinfo=UTC)
    with transaction(store):
        audit.append(store, "a", "system", {"n": 1}, at=at)
        audit.append(store, "b", "system", {"ü": "ß"}, at=at)
    rows = _log_rows(store)
    assert rows[0][1] == "2024-02-29T12:30:05.123456Z"
    prev = "0" * 64
    for seq, at_s, event, actor, fields, prev_hash, digest in rows:
        assert prev_hash == prev
        body = json.dumps(
            {"seq": seq, "at": at_s, "event": event, "actor": actor, "fields": json.loads(fields)},
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
        assert digest == hashlib.sha256(prev.encode() + b"\n" + body).hexdigest()
        prev = digest


def test_append_refuses_a_field_both_plain_and_personal(store: apsw.Connection) -> None:
    with pytest.raises(ValueError, match="email"), transaction(store):
        audit.append(store, "x", "system", {"email": "x"}, {"email": (ALICE, ALICE_EMAIL)})
    assert _log_rows(store) == []


def test_append_rolls_back_with_the_callers_transaction(store: apsw.Connection) -> None:
    with pytest.raises(RuntimeError), transaction(store):
        audit.append(store, "x", "system", {}, {"email": (ALICE, ALICE_EMAIL)})
        raise RuntimeError("the step failed")
    assert _log_rows(store) == [] and audit.vault_count(store, ALICE) == 0


def test_append_outside_a_transaction_commits_entry_and_vault_together(store: apsw.Connection) -> None:
    seq = audit.append(store, "x", "system", {}, {"email": (ALICE, ALICE_EMAIL)})
    assert seq == 1 and not store.in_transaction
    assert audit.vault_count(store, ALICE) == 1 and audit.verify_chain(store).ok


def test_log_is_append_only(store: apsw.Connection) -> None:
    _populate(store)
    with pytest.raises(apsw.ConstraintError):
        store.execute("UPDATE audit_log SET event = 'x' WHERE seq = 1")
    with pytest.raises(apsw.ConstraintError):
        store.execute("DELETE FROM audit_log WHERE seq = 1")


# --- chain verification ----------------------------------------------------------------------------


def test_chain_verifies(store: apsw.Connection) -> None:
    assert audit.verify_chain(store) == audit.ChainStatus(True, 0, "0" * 64, None, 0)
    _populate(store)
    status = audit.verify_chain(store)
    assert status.ok and status.entries == 7 and status.first_bad_seq is None
    assert status.head_hash == _log_rows(store)[-1][6]


def test_tampered_fields_are_detected_at_their_seq(home: Home, store: apsw.Connection) -> None:
    _populate(store)
    _raw_tamper(home.store_dir, "UPDATE audit_log SET fields = ? WHERE seq = 4", ('{"hold_id":2}',))
    status = audit.verify_chain(store)
    assert not status.ok and status.first_bad_seq == 4


def test_non_canonical_fields_are_detected(home: Home, store: apsw.Connection) -> None:
    _populate(store)
    _raw_tamper(home.store_dir, "UPDATE audit_log SET fields = ? WHERE seq = 6", ('{"items": 5}',))
    assert audit.verify_chain(store).first_bad_seq == 6


def test_deleted_entry_breaks_the_link_after_it(home: Home, store: apsw.Connection) -> None:
    _populate(store)
    _raw_tamper(home.store_dir, "DELETE FROM audit_log WHERE seq = 3")
    status = audit.verify_chain(store)
    assert not status.ok and status.first_bad_seq == 4 and status.entries == 6


def test_rewritten_tail_is_caught_by_a_checkpoint(home: Home, store: apsw.Connection) -> None:
    """An attacker who recomputes every hash after the edit passes the chain walk, not the checkpoint."""
    _populate(store)
    cp = audit.checkpoint(store, home.store_dir)
    rows = _log_rows(store)
    raw = connect(schema.db_path(home.store_dir))
    raw.execute("DROP TRIGGER audit_log_no_update")
    prev = rows[4][5]
    for seq, at, event, actor, fields, _prev, _digest in rows[4:]:
        if seq == 5:
            fields = '{"rows":99}'
        digest = wire.format.audit_entry_hash(
            prev, {"seq": seq, "at": at, "event": event, "actor": actor, "fields": json.loads(fields)}
        )
        raw.execute(
            "UPDATE audit_log SET fields = ?, prev_hash = ?, entry_hash = ? WHERE seq = ?", (fields, prev, digest, seq)
        )
        prev = digest
    raw.close()
    status = audit.verify_chain(store)
    assert not status.ok and status.first_bad_seq == 5  # the stored tree's leaf 5 disagrees
    assert not audit.verify_checkpoint(store, home.store_dir, cp)
    # ...and a forger who also rebuilds the tree still meets the checkpoint's signed root
    store.execute("DELETE FROM audit_merkle")
    audit_tree.extend(store)
    status = audit.verify_chain(store)
    assert not status.ok and status.first_bad_seq == cp.seq == 7
    assert not audit.verify_checkpoint(store, home.store_dir, cp)


def test_truncated_tail_is_caught_by_a_checkpoint(home: Home, store: apsw.Connection) -> None:
    _populate(store)
    audit.checkpoint(store, home.store_dir)
    _raw_tamper(home.store_dir, "DELETE FROM audit_log WHERE seq >= 6")
    status = audit.verify_chain(store)
    assert not status.ok and status.first_bad_seq == 6 and status.entries == 5  # the tree has leaf 6


# --- checkpoints -----------------------------------------------------------------------------------


def test_checkpoint_key_is_private_and_stable(home: Home, store: apsw.Connection) -> None:
    cp1 = audit.checkpoint(store, home.store_dir)
    key_file = home.store_dir / schema.AUDIT_KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert not [p for p in home.store_dir.iterdir() if p.name.startswith(".audit-key-")]
    _populate(store)
    cp2 = audit.checkpoint(store, home.store_dir)
    assert cp1.key_id == cp2.key_id and len(cp1.key_id) == 64
    assert (cp1.seq, cp1.head_hash) == (0, "0" * 64)
    assert cp2.seq == 7 and cp2.head_hash == audit.verify_chain(store).head_hash
    assert audit.checkpoints(store) == [cp1, cp2]
    assert audit.verify_checkpoint(store, home.store_dir, cp1)
    assert audit.verify_checkpoint(store, home.store_dir, cp2)
    forged = dataclasses.replace(cp2, head_hash="f" * 64)
    assert not audit.verify_checkpoint(store, home.store_dir, forged)


def test_checkpoint_key_readable_by_others_is_refused(home: Home, store: apsw.Connection) -> None:
    from erasure.errors import ConfigError

    audit.checkpoint(store, home.store_dir)
    os.chmod(home.store_dir / schema.AUDIT_KEY_FILE, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        audit.checkpoint(store, home.store_dir)


# --- redaction -------------------------------------------------------------------------------------


def _redact_alice(
    home: Home, store: apsw.Connection
) -> tuple[audit.Checkpoint, audit.Checkpoint, audit.RedactionResult]:
    _populate(store)
    with transaction(store):
        before = audit.checkpoint(store, home.store_dir)
        result = audit.redact_subject(store, ALICE)
        audit.append(store, audit.REDACTION_EVENT, "erasure-engine", {"redacted": result.count, "request_id": "req-1"})
        after = audit.checkpoint(store, home.store_dir)
    checkpoint_truncate(store)
    return before, after, result


def test_redaction_destroys_values_and_keeps_the_chain(home: Home, store: apsw.Connection) -> None:
    _populate(store)
    log_before = _log_rows(store)
    before = audit.checkpoint(store, home.store_dir)
    with transaction(store):
        result = audit.redact_subject(store, ALICE)
    checkpoint_truncate(store)
    assert [(r.seq, r.field) for r in result.redacted] == [(2, "email"), (2, "name"), (5, "email")]
    commits = {
        json.loads(r[4])[f]["commit"]
        for r in log_before
        if r[0] in (2, 5)
        for f in json.loads(r[4])
        if isinstance(json.loads(r[4])[f], dict)
    }
    assert {r.commitment for r in result.redacted} == commits
    assert audit.vault_count(store, ALICE) == 0 and audit.vault_count(store, BOB) == 1
    assert _log_rows(store) == log_before
    assert audit.verify_chain(store).ok
    after = audit.checkpoint(store, home.store_dir)
    assert audit.verify_checkpoint(store, home.store_dir, before)
    assert audit.verify_checkpoint(store, home.store_dir, after)
    assert before.head_hash == after.head_hash
    raw = _db_bytes(home.store_dir)
    assert ALICE_EMAIL.encode() not in raw and ALICE_NAME.encode() not in raw
    assert BOB_EMAIL.encode() in raw
    with transaction(store):
        assert audit.redact_subject(store, ALICE).count == 0


# --- redaction evidence ----------------------------------------------------------------------------
# The document is checked by the offline verifier's check 7 (proof/verify/audit.py), the one code that checks it.

REQUEST = "req-1"


def _check(doc: dict[str, Any]) -> verify.AuditSummary:
    return verify.check_audit_log(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())


@pytest.fixture
def evidence(home: Home, store: apsw.Connection) -> dict[str, Any]:
    before, after, result = _redact_alice(home, store)
    doc = audit.redaction_evidence(store, home.store_dir, before, after, result, request_id=REQUEST, subject_id=ALICE)
    assert _check(doc).redaction_request == REQUEST
    return doc


def test_evidence_has_the_documented_shape(evidence: dict[str, Any]) -> None:
    assert set(evidence) == {
        "format",
        "hash",
        "tree",
        "checkpoint_key",
        "before",
        "after",
        "consistency",
        "entries",
        "multiproof",
        "redacted",
        "vault_remaining_for_subject",
    }
    assert evidence["format"] == "audit-log-redaction/v3"
    assert evidence["hash"] == "sha256(prev_hash + '\\n' + canonical_json(body))"
    assert evidence["checkpoint_key"]["algorithm"] == "ed25519"
    assert evidence["checkpoint_key"]["public_key_pem"].startswith("-----BEGIN PUBLIC KEY-----")
    assert set(evidence["before"]) == {"seq", "head_hash", "tree_size", "root_hash", "at", "signature"}
    assert (evidence["before"]["seq"], evidence["after"]["seq"]) == (7, 8)
    assert (evidence["before"]["tree_size"], evidence["after"]["tree_size"]) == (7, 8)
    assert [e["seq"] for e in evidence["entries"]] == [2, 5, 8]  # Alice's two entries, the redaction record
    assert set(evidence["entries"][0]) == {"seq", "at", "event", "actor", "fields", "prev_hash"}
    # leaves 1, 4 and 7 of 8: the subtrees holding none are leaves 0, 5 and 6 and the pair (2, 3)
    assert len(evidence["multiproof"]) == 4
    assert len(evidence["consistency"]) == 4  # from 7 leaves to 8 (RFC 9162 2.1.4.1)
    assert evidence["redacted"] == [
        {"seq": 2, "field": "email"},
        {"seq": 2, "field": "name"},
        {"seq": 5, "field": "email"},
    ]
    assert evidence["vault_remaining_for_subject"] == 0
    text = json.dumps(evidence)
    for value in (ALICE_EMAIL, ALICE_NAME, ALICE, BOB_EMAIL, "Dana Operator"):
        assert value not in text


def test_changed_entry_field_fails(evidence: dict[str, Any]) -> None:
    doc = copy.deepcopy(evidence)
    doc["entries"][1]["fields"]["rows"] = 3
    with pytest.raises(verify.AuditLogError, match="the entries' multiproof does not verify"):
        _check(doc)


def test_redacted_field_that_holds_no_commitment_fails(evidence: dict[str, Any]) -> None:
    doc = copy.deepcopy(evidence)
    doc["redacted"][2]["field"] = "actor_note"
    with pytest.raises(verify.AuditLogError, match="entry 5: a redacted field"):
        _check(doc)


def test_evidence_counts_values_left_in_the_vault(home: Home, store: apsw.Connection) -> None:
    _populate(store)
    before = audit.checkpoint(store, home.store_dir)
    with transaction(store):
        result = audit.redact_subject(store, ALICE)
        audit.append(store, "late", "ingest-worker", {}, {"email": (ALICE, ALICE_EMAIL)})
        audit.append(store, audit.REDACTION_EVENT, "erasure-engine", {"request_id": REQUEST})
    after = audit.checkpoint(store, home.store_dir)
    with pytest.raises(StoreError, match="vault still holds"):
        audit.redaction_evidence(store, home.store_dir, before, after, result, request_id=REQUEST, subject_id=ALICE)
    # without the subject id it counts only the redacted commitments, which are gone
    doc = audit.redaction_evidence(store, home.store_dir, before, after, result, request_id=REQUEST)
    assert doc["vault_remaining_for_subject"] == 0


def test_evidence_needs_the_requests_redaction_entry(home: Home, store: apsw.Connection) -> None:
    before, after, result = _redact_alice(home, store)
    with pytest.raises(StoreError, match=r"no erasure\.audit_redaction entry of this request"):
        audit.redaction_evidence(store, home.store_dir, before, after, result, request_id="req-other")


def test_evidence_refuses_a_tampered_entry(home: Home, store: apsw.Connection) -> None:
    before, after, result = _redact_alice(home, store)
    _raw_tamper(home.store_dir, "UPDATE audit_log SET actor = 'someone' WHERE seq = 5")
    with pytest.raises(StoreError, match="entry 5 does not recompute"):
        audit.redaction_evidence(store, home.store_dir, before, after, result, request_id=REQUEST)


def test_evidence_refuses_a_tree_that_no_longer_gives_the_signed_root(home: Home, store: apsw.Connection) -> None:
    before, after, result = _redact_alice(home, store)
    store.execute("UPDATE audit_merkle SET hash = zeroblob(32) WHERE level = 2 AND idx = 0")
    with pytest.raises(StoreError, match="before audit checkpoint no longer matches"):
        audit.redaction_evidence(store, home.store_dir, before, after, result, request_id=REQUEST)


def test_evidence_size_grows_with_the_subject_not_the_log(home: Home, store: apsw.Connection) -> None:
    """Two of 5,000 entries are the subject's: three entries, and one multiproof of the 2 x 13 hashes
    (ceil(log2(5001))) their paths have, less the top one they share, and less."""
    n = 5000
    with transaction(store):
        for i in range(1, n + 1):
            personal: dict[str, tuple[str | None, str]] | None = (
                {"email": (ALICE, ALICE_EMAIL)} if i in (17, 4321) else None
            )
            audit.append(store, "ingest", "ingest-worker", {"i": i}, personal)
        before = audit.checkpoint(store, home.store_dir)
        result = audit.redact_subject(store, ALICE)
        audit.append(store, audit.REDACTION_EVENT, "erasure-engine", {"request_id": REQUEST, "redacted": result.count})
        after = audit.checkpoint(store, home.store_dir)
    assert audit.verify_chain(store).ok
    doc = audit.redaction_evidence(store, home.store_dir, before, after, result, request_id=REQUEST, subject_id=ALICE)
    assert [e["seq"] for e in doc["entries"]] == [17, 4321, n + 1]
    assert len(doc["multiproof"]) <= 2 * 13
    assert len(json.dumps(doc)) < 5000
    assert _check(doc).redaction_request == REQUEST


def test_evidence_of_a_subject_with_thousands_of_entries_fits_the_verifier(home: Home, store: apsw.Connection) -> None:
    """A heavy user: 4,000 ingests of the subject (id, source and source ref in the vault, as ingest
    writes them) among 16,000 entries. The v2 evidence (a path and both hashes in every entry, the
    commitments again in `redacted`) was over 9 MiB, past the verifier's 4 MiB a file, so the pack was
    refused and the subject never got one; v3 is well inside it, and so is its gzipped pack."""
    n, every = 16_000, 4
    with transaction(store):
        for i in range(1, n + 1):
            personal: dict[str, tuple[str | None, str]] | None = None
            if i % every == 0:
                personal = {
                    "subject_id": (ALICE, ALICE),
                    "source": (ALICE, "chat"),
                    "source_ref": (ALICE, f"conv-{i:06d}"),
                }
            audit.append(
                store,
                "ingest",
                "ingest-worker",
                {"frames": 3, "chunks": 2, "blobs": 0, "training": False, "subprocessors": 0},
                personal,
            )
        before = audit.checkpoint(store, home.store_dir)
        result = audit.redact_subject(store, ALICE)
        audit.append(store, audit.REDACTION_EVENT, "erasure-engine", {"request_id": REQUEST, "redacted": result.count})
        after = audit.checkpoint(store, home.store_dir)
    assert result.count == 3 * n // every
    doc = audit.redaction_evidence(store, home.store_dir, before, after, result, request_id=REQUEST, subject_id=ALICE)
    data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()  # as tasks/audit_log.py writes it
    assert len(doc["entries"]) == n // every + 1
    assert len(data) < archive.MAX_FILE_BYTES * 3 // 4, len(data)
    assert len(gzip.compress(data)) < 1024 * 1024
    assert verify.check_audit_log(data).redaction_request == REQUEST


def test_evidence_after_a_v1_before_checkpoint_resigned_as_v2(home: Home, store: apsw.Connection) -> None:
    """A prefix can be signed later (the audit-log step does so for a v1 before checkpoint)."""
    _populate(store)
    with transaction(store):
        result = audit.redact_subject(store, ALICE)
        audit.append(store, audit.REDACTION_EVENT, "erasure-engine", {"request_id": REQUEST, "redacted": result.count})
    before = audit.checkpoint(store, home.store_dir, tree_size=7)
    after = audit.checkpoint(store, home.store_dir)
    assert (before.seq, before.tree_size, after.seq) == (7, 7, 8)
    assert audit.verify_checkpoint(store, home.store_dir, before)
    doc = audit.redaction_evidence(store, home.store_dir, before, after, result, request_id=REQUEST)
    assert _check(doc).redaction_request == REQUEST
