"""The demo store: deterministic per seed, every tier filled, bystanders sharing topics with
subjects, identifiers that never collide, and the CLI that builds it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import apsw
import pytest
from typer.testing import CliRunner

from erasure.config import Home
from erasure.errors import Conflict, InputError
from erasure.sqlite import transaction
from memory import subprocessors
from memory.demo import DemoResult, build_demo
from memory.demo_words import FIRST_NAMES
from memory.schema import create
from memory.store_census import content_digest, table_counts
from memory.subprocessor_service import start_service

FRAMES, SUBJECTS = 1500, 3


def _build(root: Path, seed: int = 11) -> tuple[apsw.Connection, Path, DemoResult]:
    store = root / "store"
    conn = create(store)
    return conn, store, build_demo(conn, store, frames=FRAMES, subjects=SUBJECTS, seed=seed)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[apsw.Connection, Path, DemoResult]:
    return _build(tmp_path_factory.mktemp("demo"))


def test_same_seed_same_store(tmp_path: Path, built: tuple[apsw.Connection, Path, DemoResult]) -> None:
    conn1, store1, res1 = built
    conn2, store2, res2 = _build(tmp_path / "again")
    assert table_counts(conn1) == table_counts(conn2)
    assert content_digest(conn1, store1) == content_digest(conn2, store2)
    assert res1.subjects == res2.subjects
    conn3, store3, _ = _build(tmp_path / "other", seed=12)
    assert content_digest(conn3, store3) != content_digest(conn1, store1)


def test_exact_frame_count_and_every_tier_filled(built: tuple[apsw.Connection, Path, DemoResult]) -> None:
    conn, _, res = built
    counts = table_counts(conn)
    assert res.frames == counts["frames"] == FRAMES
    assert counts["frames_fts"] == counts["frame_vectors"] == FRAMES
    assert counts["chunk_vectors"] == counts["frame_chunks"] >= FRAMES
    for table in (
        "raw_archive",
        "kg_entities",
        "kg_relations",
        "kg_entity_frames",
        "working_sessions",
        "blobs",
        "blob_locations",
        "ft_examples",
        "model_lineage",
        "recall_cache",
        "audit_log",
        "frame_refs",
    ):
        assert counts[table] > 0, table
    assert counts["ft_corpora"] == 2 and res.model_id is not None  # v1 frozen and trained on, v2 open
    assert counts["subprocessor_records"] == 0  # no processor registered
    assert [s.id for s in res.subjects] == ["subj-0001", "subj-0002", "subj-0003"]
    # only each person's latest item keeps a live session
    assert counts["working_sessions"] == res.people
    # every frame is distinct, so no two vectors coincide
    assert cast(tuple[Any, ...], conn.execute("SELECT count(DISTINCT content) FROM frames").fetchone())[0] == FRAMES


def test_derived_frames_reference_and_quote_several_people(built: tuple[apsw.Connection, Path, DemoResult]) -> None:
    conn, _, res = built
    first = cast(
        list[tuple[int, str, int, int]],
        conn.execute(
            "SELECT d.frame_id, d.content, count(*), count(DISTINCT s.subject_id) FROM frames d"
            " JOIN frame_refs r ON r.frame_id = d.frame_id JOIN frames s ON s.frame_id = r.ref_frame_id"
            " WHERE d.kind='derived' AND s.kind='summary' GROUP BY d.frame_id"
        ).fetchall(),
    )
    assert len(first) >= res.derived * 0.9
    for fid, content, refs, people in first:
        assert 2 <= refs <= 3 and people == refs
        for (summary,) in conn.execute(
            "SELECT s.content FROM frame_refs r JOIN frames s ON s.frame_id = r.ref_frame_id WHERE r.frame_id=?", (fid,)
        ):
            quote = summary[summary.index('"') + 1 : -1]
            assert quote in content
    unlinked = cast(
        tuple[Any, ...],
        conn.execute(
            "SELECT count(*) FROM frames WHERE kind='derived' AND frame_id NOT IN (SELECT frame_id FROM frame_refs)"
        ).fetchone(),
    )[0]
    assert unlinked >= 1  # quotes without a reference: only FTS finds them
    second = cast(
        tuple[Any, ...],
        conn.execute(
            "SELECT count(DISTINCT r.frame_id) FROM frame_refs r JOIN frames t ON t.frame_id = r.ref_frame_id"
            " WHERE t.kind='derived'"
        ).fetchone(),
    )[0]
    assert second == res.second_order >= 1
    dangling = cast(
        tuple[Any, ...],
        conn.execute(
            "SELECT count(*) FROM recall_cache WHERE frame_id NOT IN (SELECT frame_id FROM frames)"
        ).fetchone(),
    )[0]
    assert dangling == 0


def test_bystanders_share_topic_entities_with_subjects(built: tuple[apsw.Connection, Path, DemoResult]) -> None:
    conn, _, res = built
    for subject in res.subjects:
        shared = cast(
            tuple[Any, ...],
            conn.execute(
                "SELECT count(DISTINCT e.entity_id) FROM kg_entities e"
                " JOIN kg_entity_frames mine ON mine.entity_id = e.entity_id"
                " JOIN frames fm ON fm.frame_id = mine.frame_id AND fm.subject_id = ?"
                " JOIN kg_entity_frames theirs ON theirs.entity_id = e.entity_id"
                " JOIN frames ft ON ft.frame_id = theirs.frame_id AND ft.subject_id LIKE 'user-%'"
                " WHERE e.kind = 'topic'",
                (subject.id,),
            ).fetchone(),
        )[0]
        assert shared >= 1, subject.id


def test_identifiers_never_collide(built: tuple[apsw.Connection, Path, DemoResult]) -> None:
    conn, _, res = built
    assert not [a for a in FIRST_NAMES for b in FIRST_NAMES if a != b and b.endswith(a)]
    for kind in ("person", "email", "phone"):
        names = [str(r[0]) for r in conn.execute("SELECT name FROM kg_entities WHERE kind=?", (kind,))]
        assert len(names) == res.people
        blob = "\n".join(names)
        for name in names:
            assert blob.count(name) == 1, (kind, name)
    # a subject's name appears only in their own summaries and turns (and in derived frames)
    for s in res.subjects:
        own = cast(
            tuple[Any, ...],
            conn.execute(
                "SELECT count(*) FROM frames f WHERE f.content LIKE ? AND f.kind != 'derived'"
                " AND coalesce(f.subject_id, '') != ? AND coalesce(f.turn_key, '') NOT IN"
                " (SELECT source || '/' || source_ref FROM raw_archive WHERE subject_id = ?)",
                (f"%{s.name}%", s.id, s.id),
            ).fetchone(),
        )[0]
        assert own == 0, s.id


def test_processors_get_records_when_registered(home: Home) -> None:
    conn = create(home.store_dir)
    with start_service("crm-sync", home.services_dir) as svc:
        with transaction(conn):
            subprocessors.register(conn, "crm-sync", svc.url, "CRM", ["episodic"])
        build_demo(conn, home.store_dir, frames=1000, subjects=2, seed=3)
    rows = conn.execute("SELECT count(*), count(remote_ref) FROM subprocessor_records").fetchone()
    assert rows is not None
    assert rows[0] > 0 and rows[1] == rows[0]


def test_refuses_a_store_with_data_and_bad_sizes(
    built: tuple[apsw.Connection, Path, DemoResult], tmp_path: Path
) -> None:
    conn, store, _ = built
    with pytest.raises(Conflict):
        build_demo(conn, store, frames=1000, subjects=1, seed=1)
    fresh = create(tmp_path / "s")
    for frames, subjects in ((999, 1), (1_000_001, 1), (1000, 0), (1000, 20)):
        with pytest.raises(InputError):
            build_demo(fresh, tmp_path / "s", frames=frames, subjects=subjects, seed=1)


def test_cli_store_init_demo_writes_the_subjects_file(home: Home) -> None:
    from cli.main import app

    result = CliRunner().invoke(
        app,
        [
            "store",
            "init",
            "--home",
            str(home.root),
            "--demo",
            "--frames",
            "1000",
            "--subjects",
            "2",
            "--seed",
            "5",
            "--journal",
            "delete",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["frames"], out["subjects"], out["journal"]) == (1000, 2, "delete")
    doc = json.loads((home.root / "demo-subjects.json").read_text())
    assert doc["format"] == "demo-subjects/v1" and doc["seed"] == 5
    assert [s["id"] for s in doc["subjects"]] == ["subj-0001", "subj-0002"]
    for s in doc["subjects"]:
        assert set(s) == {"id", "email", "name", "phone"}
        assert s["id"] not in result.output and s["name"] not in result.output
    empty = CliRunner().invoke(app, ["store", "init", "--home", str(home.root), "--frames", "1000"])
    assert isinstance(empty.exception, InputError)
