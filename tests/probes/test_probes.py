"""Independent residue probes: each finds its kind of residue, reports 0 where the subject never was,
and sees bystanders lost. Real stores (real schema, real ingest), real hyperscan, real HTTP."""

from __future__ import annotations

import os
import shutil
import socket
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from erasure.config import Home
from erasure.errors import Conflict, InputError
from erasure.sqlite import checkpoint_truncate, transaction
from erasure.subject import Subject
from erasure.tiers import Tier
from memory.subprocessor_service import RunningService, start_service
from probes.bytescan import scan_tree
from probes.fingerprint import Fingerprint, FingerprintError, destroy, sealed_pair_exists, take_fingerprint
from probes.model import PROBE_TIERS, ProbeResult
from probes.needles import NeedleKind, distinctive_pieces
from probes.run import Verification, run_probes, to_json
from tests.probe_fixtures import (
    BYSTANDERS,
    SUBJECT,
    Built,
    add_frame,
    build_store,
    delete_bystander_frame,
    erase_by_hand,
)

NINE = [t.value for t in Tier]


@pytest.fixture
def built(home: Home) -> Iterator[Built]:
    b = build_store(home.store_dir)
    yield b
    b.conn.close()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[RunningService]:
    with start_service("crm-test", tmp_path / "svc") as svc:
        yield svc


def _result(v: Verification, tier: str, method: str) -> ProbeResult:
    return next(p for p in v.probes if p.tier == tier and p.method == method)


def _residue(v: Verification) -> dict[tuple[str, str], int]:
    return {(p.tier, p.method): p.residue for p in v.probes if p.residue}


# --- a store where the subject never was; the subject before and after a complete erasure -----------


def test_subject_never_present_reports_zero_everywhere(home: Home) -> None:
    b = build_store(home.store_dir, subject_present=False)
    try:
        fp = take_fingerprint(home.store_dir, SUBJECT)
        v = run_probes(home.store_dir, SUBJECT, fp)
    finally:
        b.conn.close()
    assert {p.tier for p in v.probes} == set(PROBE_TIERS)
    assert _residue(v) == {}
    assert v.all_clear and v.failing_tiers() == []
    # the identifiers are still looked for, byte by byte, each in every spelling, in any letter case
    looked_for = {n.data.lower() for n in fp.needles if n.kind is NeedleKind.identifier}
    assert {i.lower().encode() for i in SUBJECT.identifiers()} <= looked_for
    assert all(n.caseless for n in fp.needles if n.kind is NeedleKind.identifier)
    assert fp.keys.frame_ids == [] and fp.keys.blob_keys == []


def test_probes_see_the_subject_in_every_tier_before_the_cascade(built: Built, service: RunningService) -> None:
    with transaction(built.conn):
        built.conn.execute(
            "INSERT INTO subprocessors(name, base_url, purpose) VALUES ('crm-test', ?, 't')", (service.url,)
        )
    import httpx

    httpx.post(
        f"{service.url}/v1/records", json={"subject_ref": SUBJECT.id, "records": [{"ref": "r1", "content": "x"}]}
    ).raise_for_status()
    fp = take_fingerprint(built.store_dir, SUBJECT)
    counts = fp.subject_counts()
    assert all(counts[t] > 0 for t in [*NINE, "bytes"]), counts
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert v.failing_tiers() == list(PROBE_TIERS)
    assert not v.all_clear


def test_complete_erasure_is_all_clear_and_keeps_bystanders(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built)
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert _residue(v) == {}
    assert v.all_clear
    canaries = _result(v, "bytes", "canaries")
    assert canaries.bystanders_before == canaries.bystanders_after >= 8
    frames = _result(v, "episodic", "frames-by-fingerprint-id")
    assert frames.bystanders_before == frames.bystanders_after > 10


# --- each probe finds its own kind of residue ----------------------------------------------------


@pytest.mark.parametrize(
    ("skip", "tier", "method"),
    [
        ("sessions", "working", "sessions-by-subject-id"),
        ("session_files", "working", "session-files"),
        ("turn_frames", "episodic", "turn-frames-by-key"),
        ("frames", "episodic", "frames-by-archive-link"),
        ("archive", "episodic", "archive-content-by-source-ref"),
        ("entities", "semantic", "entities-by-identifier"),
        ("chunk_vectors", "vectors", "chunk-vectors-by-fingerprint-id"),
        ("frame_vectors", "vectors", "identical-vector"),
        ("examples", "fine_tune", "examples-by-subject-id"),
        ("corpus_files", "fine_tune", "corpus-files"),
        ("blobs", "uploads", "blobs-by-fingerprint-key"),
        ("blob_files", "uploads", "blob-files"),
        ("derived", "derivatives", "derived-by-fingerprint-id"),
        ("fts", "derivatives", "fts-rows-by-fingerprint-id"),
        ("recall_cache", "derivatives", "recall-cache-by-fingerprint-frame"),
        ("vault", "audit_log", "vault-by-subject-id"),
        ("checkpoint", "bytes", "scan:content"),
    ],
)
def test_each_probe_finds_its_residue(built: Built, skip: str, tier: str, method: str) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built, skip=[skip])
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert _result(v, tier, method).residue > 0
    assert tier in v.failing_tiers()
    assert not v.all_clear


def test_leftover_chunk_vector_is_found_by_id_by_search_and_by_bytes(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    chunk = fp.keys.chunk_ids[-1]
    kept = cast(
        tuple[Any, ...], built.conn.execute("SELECT embedding FROM chunk_vectors WHERE chunk_id=?", (chunk,)).fetchone()
    )[0]
    erase_by_hand(built)
    with transaction(built.conn):  # one orphaned chunk vector, as a frame delete that forgot them leaves
        built.conn.execute("INSERT INTO chunk_vectors(chunk_id, embedding) VALUES (?,?)", (chunk, kept))
    checkpoint_truncate(built.conn)
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert _result(v, "vectors", "chunk-vectors-by-fingerprint-id").residue == 1
    assert _result(v, "bytes", "scan:vector").residue == 1
    assert v.failing_tiers() == ["bytes", "vectors"]


def test_blob_in_a_replica_dir_nobody_configured(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    key = fp.keys.blob_keys[0]
    primary = built.store_dir / "blobs" / "primary" / key[:2] / key
    data = primary.read_bytes()
    erase_by_hand(built)
    stray = built.store_dir / "blobs" / "replica-2019-migration" / key[:2] / key
    stray.parent.mkdir(parents=True)
    stray.write_bytes(data)
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert _result(v, "uploads", "blob-files").residue == 1
    assert _result(v, "bytes", "scan:blob").residue == 1
    assert v.failing_tiers() == ["bytes", "uploads"]


def test_blob_copied_under_another_name_is_found_by_its_bytes(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    key = fp.keys.blob_keys[1]
    data = (built.store_dir / "blobs" / "primary" / key[:2] / key).read_bytes()
    erase_by_hand(built)
    (built.store_dir / "exports").mkdir()
    (built.store_dir / "exports" / "attachment-copy.bin").write_bytes(data)
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert _residue(v) == {("bytes", "scan:blob"): 1}


def test_text_left_in_the_wal_is_found(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built, skip=["checkpoint"])  # rows deleted, but the WAL still has the old pages
    report = scan_tree(built.store_dir, fp.needle_bytes())
    content = {i for i, n in enumerate(fp.needles) if n.kind is NeedleKind.content}
    wal_hits = [h for h in report.found if h.index in content and "memory.db-wal" in h.files]
    assert wal_hits
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert _result(v, "bytes", "scan:content").residue > 0
    assert v.failing_tiers() == ["bytes"]
    checkpoint_truncate(built.conn)
    assert run_probes(built.store_dir, SUBJECT, fp).all_clear


def test_row_left_in_a_side_table(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built)
    with transaction(built.conn):  # recall_cache has no FK: a frame delete never reaches it
        built.conn.execute(
            "INSERT INTO recall_cache(frame_id, query, answer, created_at) VALUES (?,?,?,?)",
            (fp.keys.frame_ids[0], "q", "a", "2025-01-01"),
        )
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert _residue(v) == {("derivatives", "recall-cache-by-fingerprint-frame"): 1}


def test_derived_summary_quoting_the_subject(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built)
    add_frame(built.conn, "derived", f"Monthly rollup: {SUBJECT.name} moved the appointment again.")
    checkpoint_truncate(built.conn)
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert _result(v, "derivatives", "fts-identifier").residue == 1
    assert _result(v, "bytes", "scan:identifier").residue == 1
    assert v.failing_tiers() == ["bytes", "derivatives"]


def test_orphan_entity_named_by_the_subject(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built)
    with transaction(built.conn):  # an entity born unlinked: no frame leads to it
        built.conn.execute(
            "INSERT INTO kg_entities(kind, name, created_at) VALUES ('email', ?, '2025')", (SUBJECT.email,)
        )
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert _result(v, "semantic", "entities-by-identifier").residue == 1


def test_corpus_file_nobody_lists_is_parsed(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built)
    stray = built.store_dir / "corpora" / "export-2024" / "part-0.jsonl"
    stray.parent.mkdir(parents=True)
    src, ref = fp.keys.source_refs[0]
    stray.write_text(
        f'{{"source": "{src}", "source_ref": "{ref}", "prompt": "p", "completion": "c"}}\n'
        f"not json at all, but it names {ref}\n"
        '{"source": "chat", "source_ref": "someone-else", "prompt": "p", "completion": "c"}\n'
    )
    v = run_probes(built.store_dir, SUBJECT, fp)
    corpus = _result(v, "fine_tune", "corpus-files")
    assert corpus.residue == 2
    assert corpus.bystanders_after == corpus.bystanders_before + 1


def test_remote_blob_location_is_residue_unknown(built: Built) -> None:
    with transaction(built.conn):
        built.conn.execute(
            "UPDATE store_meta SET value = ? WHERE key = 'blob_locations'",
            ('["blobs/primary", "blobs/replica-1", "s3://backup-bucket/blobs"]',),
        )
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built)
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert _residue(v) == {("uploads", "location-unverifiable"): 1}


# --- subprocessors over real HTTP ------------------------------------------------------------------


def test_subprocessor_that_still_answers_for_the_subject(home: Home, service: RunningService) -> None:
    b = build_store(home.store_dir, processors=[("crm-test", service.url)])
    try:
        fp = take_fingerprint(home.store_dir, SUBJECT)
        assert fp.keys.subprocessors == ["crm-test"]
        erase_by_hand(b, skip=["subprocessor_calls"])
        v = run_probes(home.store_dir, SUBJECT, fp)
        lookup = _result(v, "subprocessors", "lookup:crm-test")
        assert lookup.residue == 3
        assert lookup.bystanders_before == lookup.bystanders_after == 6
        assert v.failing_tiers() == ["subprocessors"]
    finally:
        b.conn.close()


def test_subprocessor_deletion_clears_and_keeps_bystanders(home: Home, service: RunningService) -> None:
    b = build_store(home.store_dir, processors=[("crm-test", service.url)])
    try:
        fp = take_fingerprint(home.store_dir, SUBJECT)
        erase_by_hand(b)
        v = run_probes(home.store_dir, SUBJECT, fp)
    finally:
        b.conn.close()
    lookup = _result(v, "subprocessors", "lookup:crm-test")
    assert (lookup.residue, lookup.bystanders_before, lookup.bystanders_after) == (0, 6, 6)
    assert v.all_clear


def test_unreachable_subprocessor_counts_as_residue(built: Built) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with transaction(built.conn):
        built.conn.execute(
            "INSERT INTO subprocessors(name, base_url, purpose) VALUES ('gone', ?, 't')", (f"http://127.0.0.1:{port}",)
        )
    fp = take_fingerprint(built.store_dir, SUBJECT, http_timeout=0.5)
    erase_by_hand(built)
    v = run_probes(built.store_dir, SUBJECT, fp, http_timeout=0.5)
    assert _residue(v) == {("subprocessors", "lookup-unreachable:gone"): 1}
    assert v.failing_tiers() == ["subprocessors"]


# --- bystanders ------------------------------------------------------------------------------------


def test_over_deleting_erasure_shows_bystanders_lost(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built)
    delete_bystander_frame(built)
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert _residue(v) == {}
    frames = _result(v, "episodic", "frames-by-subject-id")
    assert frames.bystanders_after == frames.bystanders_before - 1
    assert {"episodic", "vectors", "derivatives"} <= set(v.failing_tiers())
    assert not v.all_clear


def test_bystander_vault_row_deleted_is_seen(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built)
    with transaction(built.conn):
        built.conn.execute("DELETE FROM audit_vault WHERE subject_id=?", (BYSTANDERS[2].id,))
    v = run_probes(built.store_dir, SUBJECT, fp)
    vault = _result(v, "audit_log", "vault-by-subject-id")
    assert vault.bystanders_after < vault.bystanders_before
    assert v.failing_tiers() == ["audit_log"]


def test_shared_topic_survives_and_its_loss_is_seen(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built)
    conn = built.conn
    refund = conn.execute("SELECT entity_id FROM kg_entities WHERE kind='topic' AND name='refund'").fetchone()
    assert refund is not None  # mentioned by the subject AND a bystander: shared, kept
    assert _residue(run_probes(built.store_dir, SUBJECT, fp)) == {}
    with transaction(conn):
        conn.execute("DELETE FROM kg_relations WHERE dst_entity_id=?", (refund[0],))
        conn.execute("DELETE FROM kg_entity_frames WHERE entity_id=?", (refund[0],))
        conn.execute("DELETE FROM kg_entities WHERE entity_id=?", (refund[0],))
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert v.failing_tiers() == ["semantic"]
    entities = _result(v, "semantic", "entities-by-identifier")
    assert entities.bystanders_after == entities.bystanders_before - 1


def test_byte_canaries_show_a_rebuilt_store(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built)
    # an erasure that "wins" by discarding everything leaves no residue, and no bystanders
    built.conn.close()
    shutil.rmtree(built.store_dir)
    built.conn = build_store(built.store_dir, subject_present=False).conn
    with transaction(built.conn):
        built.conn.execute("DELETE FROM frames_fts")
        built.conn.execute("DELETE FROM frame_chunks")
        built.conn.execute("DELETE FROM frame_refs")
        built.conn.execute("DELETE FROM kg_entity_frames")
        built.conn.execute("DELETE FROM kg_relations")
        built.conn.execute("DELETE FROM recall_cache")
        built.conn.execute("DELETE FROM frames")
        built.conn.execute("DELETE FROM working_sessions")
    checkpoint_truncate(built.conn)
    v = run_probes(built.store_dir, SUBJECT, fp)
    canaries = _result(v, "bytes", "canaries")
    assert canaries.bystanders_after < canaries.bystanders_before
    assert "bytes" in v.failing_tiers()


# --- needle selection --------------------------------------------------------------------------------


def test_identifiers_that_would_match_bystanders_are_searched_as_shared_never_withheld_silently(home: Home) -> None:
    b = build_store(home.store_dir, subject_present=False)
    try:
        # a prefix of a bystander's id, a too-short name, and a name a bystander's frame contains
        odd = Subject(id=BYSTANDERS[0].id[:8], name="Li", email="someone.else@example.org")
        fp = take_fingerprint(home.store_dir, odd)
        weiss = Subject(id="zz-unrelated-1", name="Li Wei")
        fp2 = take_fingerprint(home.store_dir, weiss)
    finally:
        b.conn.close()
    # the id is part of a bystander's id: searched as a shared identifier, its hits reported, not residue
    assert fp.needle_stats["identifier_shared:id"] >= 1
    assert fp.needle_stats["identifier_withheld_short:name"] == 1  # "Li" is counted, never silently dropped
    assert [n.data for n in fp.needles if n.kind is NeedleKind.identifier] == [b"someone.else@example.org"]
    assert any(n.kind is NeedleKind.shared_identifier for n in fp.needles)
    assert fp2.needle_stats["identifier_shared:name"] >= 1  # "Li Wei" is a bystander's person entity


def test_vector_needles_come_in_pieces_and_content_is_distinctive(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    pieces = [n for n in fp.needles if n.kind is NeedleKind.vector]
    assert pieces and all(len(n.data) == 128 for n in pieces)
    assert len({n.group for n in pieces}) == fp.needle_stats["vector"]
    content = [n.data.decode() for n in fp.needles if n.kind is NeedleKind.content]
    assert content and all(24 <= len(c) <= 48 for c in content)
    assert fp.subject_before["bytes/scan:vector"] == fp.needle_stats["vector"]  # every vector seen in bytes


# --- the fingerprint's sealing ---------------------------------------------------------------------


def _paths(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "engine" / "fp.sealed", tmp_path / "keys" / "fp.key"


def test_seal_unseal_round_trip_without_plaintext_on_disk(built: Built, tmp_path: Path) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    ct, key = _paths(tmp_path)
    fp.seal(ct, key)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and stat.S_IMODE(ct.stat().st_mode) == 0o600
    blob = ct.read_bytes()
    assert not any(n.data in blob for n in fp.needles)
    assert SUBJECT.email is not None and SUBJECT.email.encode() not in blob
    again = Fingerprint.unseal(ct, key)
    assert again == fp
    assert (
        run_probes(built.store_dir, SUBJECT, again).failing_tiers()
        == run_probes(built.store_dir, SUBJECT, fp).failing_tiers()
    )


def test_fingerprint_repr_names_no_one(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    text = repr(fp) + str(fp)
    assert all(i not in text for i in SUBJECT.identifiers())


def test_tampered_or_wrong_key_is_refused(built: Built, tmp_path: Path) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    ct, key = _paths(tmp_path)
    fp.seal(ct, key)
    data = bytearray(ct.read_bytes())
    data[40] ^= 1
    ct.write_bytes(bytes(data))
    with pytest.raises(FingerprintError):
        Fingerprint.unseal(ct, key)
    key.write_bytes(os.urandom(32))
    with pytest.raises(FingerprintError):
        Fingerprint.unseal(ct, key)
    key.unlink()
    with pytest.raises(FingerprintError):
        Fingerprint.unseal(ct, key)


def test_seal_never_replaces_a_sealed_fingerprint_but_replaces_a_leftover(built: Built, tmp_path: Path) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    ct, key = _paths(tmp_path)
    fp.seal(ct, key)
    with pytest.raises(Conflict):
        fp.seal(ct, key)
    ct.unlink()  # a crash after the key was written, before the ciphertext
    assert not sealed_pair_exists(ct, key)
    fp.seal(ct, key)
    assert Fingerprint.unseal(ct, key) == fp


def test_destroy_removes_both_and_is_idempotent(built: Built, tmp_path: Path) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    ct, key = _paths(tmp_path)
    fp.seal(ct, key)
    leftover = key.with_name(f".{key.name}.999.tmp")  # a crash between writing and renaming
    leftover.write_bytes(b"k" * 32)
    destroy(ct, key)
    assert not ct.exists() and not key.exists() and not leftover.exists()
    destroy(ct, key)
    Fingerprint.destroy(ct, key)


# --- the runner ------------------------------------------------------------------------------------


def test_zero_probes_is_never_all_clear(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built)
    v = run_probes(built.store_dir, SUBJECT, fp, tiers=[])
    assert v.probes == [] and not v.all_clear
    doc = to_json(v, "req-1", datetime(2025, 3, 2, tzinfo=UTC))
    assert doc["all_clear"] is False


def test_selected_tiers_and_json_shape(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built, skip=["recall_cache"])
    v = run_probes(built.store_dir, SUBJECT, fp, tiers=[Tier.derivatives, "episodic"])
    assert {p.tier for p in v.probes} == {"episodic", "derivatives"}
    doc = to_json(v, "req-42", datetime(2025, 3, 2, 9, 30, tzinfo=UTC))
    assert set(doc) == {
        "request_id",
        "verified_at",
        "all_clear",
        "probes",
        "failing_tiers",
        "residue_tiers",
        "lost_bystander_tiers",
        "unscanned_content",
        "others_content",
        "matching_rule",
    }
    assert doc["verified_at"] == "2025-03-02T09:30:00Z"
    # What "all clear" means travels in the pack: the rule's version (both implementations name it), its
    # families and the formats read.
    import erasure.matching
    import probes.rule

    rule = doc["matching_rule"]
    assert rule["version"] == probes.rule.RULE_VERSION == erasure.matching.RULE_VERSION
    assert rule["document"] == "docs/matching.md" and "unscanned_content" in rule["meaning"]
    assert any("PDF" in f for f in rule["formats"]) and any(f.startswith("phones") for f in rule["families"])
    assert doc["failing_tiers"] == ["derivatives"]
    assert set(doc["probes"][0]) == {"tier", "method", "residue", "bystanders_before", "bystanders_after"}
    text = str(doc)
    assert all(i not in text for i in SUBJECT.identifiers())


def test_runner_refuses_bad_input(built: Built) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    with pytest.raises(InputError):
        run_probes(built.store_dir, SUBJECT, fp, tiers=["bogus"])
    with pytest.raises(InputError):
        run_probes(built.store_dir, BYSTANDERS[0], fp)


def test_a_probe_that_cannot_run_is_residue(built: Built, tmp_path: Path) -> None:
    fp = take_fingerprint(built.store_dir, SUBJECT)
    empty = tmp_path / "not-a-store"
    empty.mkdir()
    v = run_probes(empty, SUBJECT, fp)
    errors = [p for p in v.probes if p.method.startswith("probe-error")]
    assert {p.tier for p in errors} == set(NINE)
    assert all(p.residue == 1 for p in errors)
    assert not v.all_clear


def test_a_vector_piece_a_bystander_shares_is_not_a_needle(built: Built) -> None:
    """A hashed embedding is sparse: two different texts can share a 128-byte piece of a vector (seen on
    the demo store). A piece that bystander data also holds proves nothing about the subject."""
    import numpy as np

    from erasure.sqlite import checkpoint_truncate

    conn = built.conn
    fid = int(
        cast(
            tuple[Any, ...],
            conn.execute("SELECT min(frame_id) FROM frames WHERE subject_id = ?", (SUBJECT.id,)).fetchone(),
        )[0]
    )
    own = np.frombuffer(
        bytes(
            cast(
                tuple[Any, ...],
                conn.execute("SELECT embedding FROM frame_vectors WHERE frame_id = ?", (fid,)).fetchone(),
            )[0]
        ),
        dtype="<f4",
    ).copy()
    pieces = distinctive_pieces(own.tobytes())
    assert pieces  # the vector has pieces worth looking for: the check below can fail
    kept = np.zeros(len(own), dtype=bool)
    for at, piece in pieces:
        kept[at // 4 : (at + len(piece)) // 4] = True
    twin = np.where(kept, own, np.roll(own, 7) * 0.5).astype("<f4")  # the same pieces, different elsewhere
    bystander = add_frame(conn, "turn", "An unrelated bystander sentence about a parking permit.")
    with transaction(conn):
        conn.execute("INSERT INTO frame_vectors(frame_id, embedding) VALUES (?, ?)", (bystander, twin.tobytes()))
    checkpoint_truncate(conn)
    fp = take_fingerprint(built.store_dir, SUBJECT)
    assert not {p for _at, p in pieces} & set(fp.needle_bytes())
    erase_by_hand(built)
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert _residue(v) == {}
    assert v.all_clear


def test_an_identifier_in_plaintext_in_an_audit_entry_is_residue(built: Built) -> None:
    """A personal value written into an audit entry's plain fields (not as a commitment), in another
    letter case, is found by the audit-log probe even after everything else of the subject is gone."""
    from memory import audit
    from memory.schema import create

    fp = take_fingerprint(built.store_dir, SUBJECT)
    erase_by_hand(built, skip=[])
    conn = create(built.store_dir)
    try:
        audit.append(conn, "support.note", "helpdesk", {"note": f"called back {SUBJECT.email.upper()}"})  # type: ignore[union-attr]
    finally:
        conn.close()
    v = run_probes(built.store_dir, SUBJECT, fp)
    assert _result(v, "audit_log", "plaintext-in-entries").residue == 1
    assert not v.all_clear
