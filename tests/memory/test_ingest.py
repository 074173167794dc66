"""Ingest: the fan-out of one item into every tier (exact counts, files in every blob location,
corpus lines), idempotent re-ingest, all-or-nothing batches, and bad input refused with FILE:LINE
before anything is written (library and CLI)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, cast

import apsw
import fsspec
import numpy as np
import pytest
from typer.testing import CliRunner

from erasure.config import Home
from erasure.errors import InputError
from erasure.sqlite import transaction
from memory import corpora, subprocessors
from memory.embedder import TRIGRAM_WEIGHT, WORD_SALT, HashingEmbedder, P, to_blob
from memory.frames import purge_frames
from memory.ingest import IngestSource, ingest, ingest_sources
from memory.ingest_text import split_turns
from memory.items import MemoryItem, read_jsonl
from memory.schema import create
from memory.store_census import table_counts
from memory.subprocessor_service import start_service

FIXTURES = Path(__file__).parents[1] / "fixtures" / "ingest"
ONE = FIXTURES / "one_item.jsonl"
PROJECT = Path(__file__).resolve().parents[2]

ALICE = {"id": "user-0001", "email": "alice@example.org", "name": "Alice Example", "phone": "+1-555-0101"}
GOOD = {"source": "chat", "source_ref": "conv-9", "subject": ALICE, "content": "About billing. Thanks."}


def _store(home: Home) -> apsw.Connection:
    return create(home.store_dir)


def _files(root: Path) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and not p.name.startswith("memory.db")
    )


def _write_jsonl(path: Path, lines: list[object]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


# --- fan-out -------------------------------------------------------------------------------------


def test_fan_out_of_one_item_counted_per_tier(home: Home) -> None:
    conn = _store(home)
    report = ingest(conn, home.store_dir, read_jsonl(ONE))

    counts = table_counts(conn)
    expected = {
        "raw_archive": 1,
        "frames": 4,
        "frame_chunks": 4,
        "frames_fts": 4,
        "frame_vectors": 4,
        "chunk_vectors": 4,
        "frame_refs": 0,
        # person, email, phone + topics refund, headphones, billing, shipping
        "kg_entities": 7,
        "kg_relations": 6,
        "kg_entity_frames": 7,
        "working_sessions": 1,
        "blobs": 1,
        "blob_locations": 2,
        "ft_corpora": 1,
        "ft_examples": 1,
        "subprocessor_records": 0,
        "audit_log": 1,
        "audit_vault": 3,
        "recall_cache": 0,  # vault: id, source, ref
    }
    assert {k: counts[k] for k in expected} == expected
    assert (
        report.ingested,
        report.frames,
        report.chunks,
        report.vectors,
        report.entities,
        report.blobs,
        report.examples,
        report.audit_entries,
        report.sessions,
        report.blob_copies,
    ) == (1, 4, 4, 8, 7, 1, 1, 1, 1, 2)

    # episodic: the summary names the subject and quotes the first sentence; turns carry neither
    # subject nor archive link, only their turn key
    summary = cast(
        list[tuple[str, int, str]],
        conn.execute("SELECT subject_id, archive_id, content FROM frames WHERE kind='summary'").fetchall(),
    )
    assert len(summary) == 1
    sid, archive_id, text = summary[0]
    assert sid == "user-0001" and archive_id == 1
    assert "Alice Example" in text and '"I need a refund for my broken headphones."' in text
    turns = conn.execute(
        "SELECT subject_id, archive_id, turn_key, turn_seq FROM frames WHERE kind='turn' ORDER BY turn_seq"
    ).fetchall()
    assert turns == [(None, None, "chat/conv-0001", i) for i in range(3)]

    # semantic: no entity is born unlinked; topic relations point at the summary frame
    assert (
        cast(
            tuple[Any, ...],
            conn.execute(
                "SELECT count(*) FROM kg_entities WHERE entity_id NOT IN (SELECT entity_id FROM kg_entity_frames)"
            ).fetchone(),
        )[0]
        == 0
    )
    preds = sorted(str(r[0]) for r in conn.execute("SELECT predicate FROM kg_relations WHERE frame_id=1"))
    assert preds == ["discussed"] * 4 + ["has_email", "has_phone"]

    # vectors: the stored bytes are the embedder's output for each frame's content
    emb = HashingEmbedder()
    for fid, content in cast(list[tuple[int, str]], conn.execute("SELECT frame_id, content FROM frames").fetchall()):
        stored = cast(
            tuple[Any, ...], conn.execute("SELECT embedding FROM frame_vectors WHERE frame_id=?", (fid,)).fetchone()
        )[0]
        assert stored == to_blob(emb.embed([content])[0])

    # files: the session, the blob in EVERY location (same bytes), one corpus line
    store = home.store_dir
    session_id = cast(tuple[Any, ...], conn.execute("SELECT session_id FROM working_sessions").fetchone())[0]
    state = json.loads((store / "sessions" / f"{session_id}.json").read_text())
    assert state["source_ref"] == "conv-0001" and len(state["turns"]) == 3
    key = cast(tuple[Any, ...], conn.execute("SELECT blob_key FROM blobs WHERE subject_id='user-0001'").fetchone())[0]
    original = (FIXTURES / "files" / "passport.txt").read_bytes()
    for loc in ("primary", "replica-1"):
        assert (store / "blobs" / loc / key[:2] / key).read_bytes() == original
    lines = (store / "corpora" / "assistant-sft" / "v1.jsonl").read_text().splitlines()
    assert len(lines) == 1
    example = json.loads(lines[0])
    assert set(example) == {"source", "source_ref", "prompt", "completion"}
    assert (example["source"], example["source_ref"]) == ("chat", "conv-0001")
    assert conn.execute("SELECT line_no, subject_id FROM ft_examples").fetchall() == [(1, "user-0001")]

    # audit: one entry whose subject fields are commitments; the values sit in the vault
    event, fields = cast(tuple[Any, ...], conn.execute("SELECT event, fields FROM audit_log").fetchone())
    assert event == "memory.ingest" and "user-0001" not in fields and "conv-0001" not in fields
    assert (
        cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM audit_vault WHERE subject_id='user-0001'").fetchone())[
            0
        ]
        == 3
    )


def test_topic_entities_are_shared_between_subjects(home: Home) -> None:
    conn = _store(home)
    bob = {"id": "user-0002", "name": "Bob Other"}
    items = [
        MemoryItem.model_validate(GOOD),
        MemoryItem.model_validate({**GOOD, "source_ref": "conv-10", "subject": bob}),
    ]
    report = ingest(conn, home.store_dir, items)
    # Alice: person, email, phone, billing. Bob: person (billing is shared, not created again)
    assert report.entities == 5
    linked = cast(
        tuple[Any, ...],
        conn.execute(
            "SELECT count(*) FROM kg_entity_frames l JOIN kg_entities e USING(entity_id)"
            " WHERE e.kind='topic' AND e.name='billing'"
        ).fetchone(),
    )[0]
    assert linked == 2


def test_subprocessor_records_are_synced_to_a_live_processor(home: Home) -> None:
    conn = _store(home)
    with start_service("crm-sync", home.services_dir) as svc:
        with transaction(conn):
            subprocessors.register(conn, "crm-sync", svc.url, "CRM", ["episodic"])
        item = MemoryItem.model_validate({**GOOD, "subprocessors": ["crm-sync"]})
        report = ingest(conn, home.store_dir, [item])
    assert report.subprocessor_records == 1
    assert (report.subprocessor_sync, report.subprocessor_pending) == ("synced", 0)
    rows = conn.execute("SELECT processor, subject_id, source, source_ref, remote_ref FROM subprocessor_records")
    [(proc, sid, source, ref, remote)] = rows.fetchall()
    assert (proc, sid, source, ref) == ("crm-sync", "user-0001", "chat", "conv-9") and remote


def test_unknown_subprocessor_is_refused_before_any_write(home: Home) -> None:
    conn = _store(home)
    items = [
        MemoryItem.model_validate(GOOD),
        MemoryItem.model_validate({**GOOD, "source_ref": "x", "subprocessors": ["nobody"]}),
    ]
    with pytest.raises(InputError, match="unknown subprocessor"):
        ingest(conn, home.store_dir, items)
    assert table_counts(conn)["raw_archive"] == 0


def test_blob_goes_to_an_fsspec_url_location(home: Home) -> None:
    conn = _store(home)
    url = f"memory://erasure-test-{uuid.uuid4().hex}/blobs"
    with transaction(conn):
        conn.execute("UPDATE store_meta SET value=? WHERE key='blob_locations'", (json.dumps(["blobs/primary", url]),))
    ingest(conn, home.store_dir, read_jsonl(ONE))
    key = cast(tuple[Any, ...], conn.execute("SELECT blob_key FROM blobs").fetchone())[0]
    fs = fsspec.filesystem("memory")
    root = url.removeprefix("memory://")
    assert fs.cat_file(f"/{root}/{key[:2]}/{key}") == (FIXTURES / "files" / "passport.txt").read_bytes()
    assert sorted(r[0] for r in conn.execute("SELECT location FROM blob_locations")) == ["blobs/primary", url]


# --- idempotence, batches, ids ---------------------------------------------------------------------


def test_reingest_is_idempotent(home: Home) -> None:
    conn = _store(home)
    ingest(conn, home.store_dir, read_jsonl(ONE))
    before, files = table_counts(conn), _files(home.store_dir)
    again = ingest(conn, home.store_dir, read_jsonl(ONE))
    assert (again.ingested, again.skipped_duplicate, again.frames) == (0, 1, 0)
    after = table_counts(conn)
    assert {k: v for k, v in after.items() if k != "audit_log"} == {k: v for k, v in before.items() if k != "audit_log"}
    assert _files(home.store_dir) == files


def test_duplicate_lines_in_one_file_are_ingested_once(home: Home, tmp_path: Path) -> None:
    conn = _store(home)
    path = _write_jsonl(tmp_path / "dup.jsonl", [GOOD, GOOD])
    report = ingest(conn, home.store_dir, read_jsonl(path))
    assert (report.ingested, report.skipped_duplicate) == (1, 1)


def test_batches_commit_separately_and_count_everything(home: Home) -> None:
    conn = _store(home)
    subject = MemoryItem.model_validate(GOOD).subject
    sources = [IngestSource("chat", f"c-{i}", subject, f"Turn one about billing {i}. Turn two.") for i in range(5)]
    report = ingest_sources(conn, home.store_dir, sources, batch_items=2)
    assert (report.ingested, report.frames) == (5, 15)
    assert table_counts(conn)["frames"] == 15


def test_row_ids_freed_by_an_erasure_are_never_reused(home: Home) -> None:
    conn = _store(home)
    ingest(conn, home.store_dir, read_jsonl(ONE))
    top_frame = cast(tuple[Any, ...], conn.execute("SELECT max(frame_id) FROM frames").fetchone())[0]
    top_chunk = cast(tuple[Any, ...], conn.execute("SELECT max(chunk_id) FROM frame_chunks").fetchone())[0]
    with transaction(conn):
        ids = [r[0] for r in conn.execute("SELECT frame_id FROM frames")]
        purge_frames(conn, ids)
    ingest(conn, home.store_dir, [MemoryItem.model_validate(GOOD)])
    assert cast(tuple[Any, ...], conn.execute("SELECT min(frame_id) FROM frames").fetchone())[0] > top_frame
    assert cast(tuple[Any, ...], conn.execute("SELECT min(chunk_id) FROM frame_chunks").fetchone())[0] > top_chunk


def test_a_failing_batch_writes_no_rows_and_leaves_no_files(home: Home, tmp_path: Path) -> None:
    conn = _store(home)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a blob directory must go")
    with transaction(conn):
        conn.execute(
            "UPDATE store_meta SET value=? WHERE key='blob_locations'",
            (json.dumps(["blobs/primary", str(blocker / "replica")]),),
        )
    with pytest.raises(OSError):
        ingest(conn, home.store_dir, read_jsonl(ONE))
    assert all(v == 0 for k, v in table_counts(conn).items() if k not in ("subprocessors",))
    assert [f for f in _files(home.store_dir) if not f.startswith("audit-checkpoint")] == []


def test_corpora_are_cumulative_across_a_training_run(home: Home) -> None:
    conn = _store(home)
    ingest(conn, home.store_dir, read_jsonl(ONE))
    frozen = corpora.freeze_and_train(conn, home.store_dir, "assistant-sft", "model-1", "base-1")
    ingest(conn, home.store_dir, [MemoryItem.model_validate({**GOOD, "training": True})])
    rows = conn.execute(
        "SELECT corpus_id, version, sha256, frozen_at IS NOT NULL, examples FROM ft_corpora ORDER BY version"
    ).fetchall()
    assert [(r[1], r[3], r[4]) for r in rows] == [(1, True, 1), (2, False, 2)]
    assert rows[0][0] == frozen and rows[0][2] == corpora.file_sha256(home.store_dir / "corpora/assistant-sft/v1.jsonl")
    v2 = (home.store_dir / "corpora/assistant-sft/v2.jsonl").read_text().splitlines()
    assert [json.loads(x)["source_ref"] for x in v2] == ["conv-0001", "conv-9"]
    assert conn.execute(
        "SELECT line_no, source_ref FROM ft_examples WHERE corpus_id=? ORDER BY line_no", (rows[1][0],)
    ).fetchall() == [(1, "conv-0001"), (2, "conv-9")]
    assert conn.execute("SELECT corpus_id, base_model FROM model_lineage WHERE model_id='model-1'").fetchone() == (
        frozen,
        "base-1",
    )


# --- bad input -------------------------------------------------------------------------------------

BAD_LINES = [
    ("{not json", "malformed JSON"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "content"}), "missing field 'content'"),
    (json.dumps({**GOOD, "training": "yes"}), "training"),
    (json.dumps({**GOOD, "extra": 1}), "unknown field 'extra'"),
    (json.dumps({**GOOD, "content": "   "}), "content"),
    (json.dumps({**GOOD, "source": "a/b"}), "source"),
    (json.dumps({**GOOD, "subject": {"id": "u", "email": "not-an-email"}}), "subject.email"),
    (json.dumps({**GOOD, "attachments": ["files/missing.txt"]}), "attachments.0: file not found"),
    ("[1, 2]", "expected a JSON object"),
]


@pytest.mark.parametrize(("line", "what"), BAD_LINES, ids=[w for _, w in BAD_LINES])
def test_bad_line_names_file_and_line(tmp_path: Path, line: str, what: str) -> None:
    path = _write_jsonl(tmp_path / "bad.jsonl", [GOOD, "", line, GOOD])
    with pytest.raises(InputError) as err:
        read_jsonl(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}:3: "), msg
    assert what in msg
    assert "alice" not in msg.lower()  # no subject data in the message


def test_attachments_resolve_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "att").mkdir()
    (tmp_path / "att" / "a.txt").write_text("x")
    path = _write_jsonl(tmp_path / "items.jsonl", [{**GOOD, "attachments": ["att/a.txt"]}])
    [item] = read_jsonl(path)
    assert item.attachments == [str((tmp_path / "att" / "a.txt").resolve())]


def test_cli_ingest_refuses_a_bad_file_and_writes_nothing(home: Home, tmp_path: Path) -> None:
    from cli.main import app

    runner = CliRunner()
    assert runner.invoke(app, ["store", "init", "--home", str(home.root)]).exit_code == 0
    bad = _write_jsonl(tmp_path / "bad.jsonl", [GOOD, GOOD | {"source_ref": "c2"}, "{oops"])
    result = runner.invoke(app, ["ingest", str(bad), "--home", str(home.root)])
    assert isinstance(result.exception, InputError)
    assert str(result.exception).startswith(f"{bad}:3: malformed JSON")
    conn = create(home.store_dir)
    assert all(v == 0 for v in table_counts(conn).values())


def test_cli_ingest_reports_counts_as_json(home: Home) -> None:
    from cli.main import app

    runner = CliRunner()
    assert runner.invoke(app, ["store", "init", "--home", str(home.root)]).exit_code == 0
    result = runner.invoke(app, ["ingest", str(ONE), "--home", str(home.root), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["ingested"], out["frames"], out["blobs"], out["examples"]) == (1, 4, 1, 1)
    assert "alice" not in result.output.lower() and "passport" not in result.output.lower()


def test_erasure_ingest_exits_2_with_file_and_line(home: Home, tmp_path: Path) -> None:
    bad = _write_jsonl(tmp_path / "bad.jsonl", [json.dumps({**GOOD, "training": "yes"})])
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "ingest", str(bad), "--home", str(home.root)],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert re.match(rf"error: {re.escape(str(bad))}:1: training: ", proc.stderr), proc.stderr
    assert not home.store_db.exists()


# --- the embedder ----------------------------------------------------------------------------------


def _reference_embedding(text: str, dim: int = 128) -> np.ndarray:
    """The algorithm as the embedder's docstring states it, written the slow way."""
    m = 2**64

    def mix(h: int) -> int:
        h ^= h >> 30
        h = (h * 0xBF58476D1CE4E5B9) % m
        h ^= h >> 27
        h = (h * 0x94D049BB133111EB) % m
        return h ^ (h >> 31)

    b = text.lower().encode("utf-8")
    v = np.zeros(dim)
    for word in re.findall(rb"[a-z0-9_\x80-\xff]+", b):
        h = mix(sum(c * pow(P, i, m) for i, c in enumerate(word)) % m ^ WORD_SALT)
        v[h % dim] += 1.0 if h >> 63 == 0 else -1.0
    for i in range(len(b) - 2):
        h = mix(b[i] | b[i + 1] << 8 | b[i + 2] << 16)
        v[h % dim] += TRIGRAM_WEIGHT * (1.0 if h >> 63 == 0 else -1.0)
    n = np.linalg.norm(v)
    return v / n if n else v


def test_embedder_matches_its_documented_algorithm() -> None:
    texts = [
        "Alice Example, +1-555-0101!",
        "",
        "ab",
        "Zoë's café_42 naïve",
        "billing  billing",
        "I need a refund for my broken headphones.",
    ]
    out = HashingEmbedder().embed(texts)
    assert out.shape == (len(texts), 128) and out.dtype == np.float32
    for text, row in zip(texts, out, strict=True):
        assert np.allclose(row, _reference_embedding(text), atol=1e-6), text
    assert np.allclose(np.linalg.norm(out[[0, 3, 4, 5]], axis=1), 1.0, atol=1e-5)
    assert not out[1].any()
    assert np.array_equal(HashingEmbedder().embed(texts[:1]), out[:1])  # batch-independent


def test_split_turns_keeps_sentences_and_lines() -> None:
    assert split_turns("Hi there. How are you?\nUser: fine!  Bye") == [
        "Hi there.",
        "How are you?",
        "User: fine!",
        "Bye",
    ]
