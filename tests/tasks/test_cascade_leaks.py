"""The leaks of reference 000, one test each: a naive delete on a copy of the store shows the leak
(residue > 0), the cascade on the original leaves none.

The naive deletes are what a hand-written erasure (or a maintenance path) does: delete the rows that
carry the subject id and trust foreign keys for the rest.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, cast

import apsw
import pytest

from erasure.config import Home
from erasure.sqlite import connect
from memory.compact import compact_derived
from memory.embedder import HashingEmbedder, to_blob
from memory.frames import chunk_ids_of
from memory.schema import create
from tasks.runner import run_cascade
from tests.cascade_fixtures import BYSTANDER, SUBJECT, SUBJECT_PHRASE, build_store, submit

REQUEST = "req-ann-1"

ORPHANS = {
    "chunk_vectors": "SELECT count(*) FROM chunk_vectors WHERE chunk_id NOT IN (SELECT chunk_id FROM frame_chunks)",
    "frame_vectors": "SELECT count(*) FROM frame_vectors WHERE frame_id NOT IN (SELECT frame_id FROM frames)",
    "fts": "SELECT count(*) FROM frames_fts WHERE rowid NOT IN (SELECT frame_id FROM frames)",
    "recall_cache": "SELECT count(*) FROM recall_cache WHERE frame_id NOT IN (SELECT frame_id FROM frames)",
    "entities": "SELECT count(*) FROM kg_entities e WHERE NOT EXISTS "
    "(SELECT 1 FROM kg_entity_frames l WHERE l.entity_id = e.entity_id)",
}


def orphans(conn: apsw.Connection) -> dict[str, int]:
    """Rows of every projection whose owner row is gone."""
    return {name: int(cast(tuple[Any, ...], conn.execute(sql).fetchone())[0]) for name, sql in ORPHANS.items()}


@pytest.fixture
def built(home: Home, tmp_path: Path) -> Home:
    build_store(home, tmp_path)
    submit(home)
    return home


@pytest.fixture
def naive(built: Home, tmp_path: Path) -> apsw.Connection:
    """A writable connection to a byte-for-byte copy of the built store (the naive delete's victim)."""
    copy = tmp_path / "naive-store"
    shutil.copytree(built.store_dir, copy)
    conn = connect(copy / "memory.db")
    assert orphans(conn) == dict.fromkeys(ORPHANS, 0)  # a consistent store to start from
    return conn


def store(home: Home) -> apsw.Connection:
    return create(home.store_dir)


def _subject_frames(conn: apsw.Connection) -> list[int]:
    """The subject's summary frames and verbatim turn frames, by the store's own keys."""
    ids = [int(r[0]) for r in conn.execute("SELECT frame_id FROM frames WHERE subject_id = ?", (SUBJECT.id,))]
    for key in ("chat/conv-1001", "email/msg-2002"):
        ids += [int(r[0]) for r in conn.execute("SELECT frame_id FROM frames WHERE turn_key = ?", (key,))]
    return sorted(ids)


def _nearest_chunks(conn: apsw.Connection, text: str, k: int = 3) -> list[tuple[int, float]]:
    vec = to_blob(HashingEmbedder().embed([text])[0])
    return [
        (int(r[0]), float(r[1]))
        for r in conn.execute(
            "SELECT chunk_id, distance FROM chunk_vectors WHERE embedding MATCH ? AND k = ? ORDER BY distance", (vec, k)
        )
    ]


def test_leak_1_chunk_vectors_survive_a_frame_delete_and_stay_recallable(built: Home, naive: apsw.Connection) -> None:
    frames = [int(r[0]) for r in naive.execute("SELECT frame_id FROM frames WHERE subject_id = ?", (SUBJECT.id,))]
    chunks = chunk_ids_of(naive, frames)
    text = str(
        cast(
            tuple[Any, ...],
            naive.execute("SELECT content FROM frame_chunks WHERE chunk_id = ?", (chunks[0],)).fetchone(),
        )[0]
    )
    naive.execute("DELETE FROM frames WHERE subject_id = ?", (SUBJECT.id,))
    assert chunk_ids_of(naive, frames) == []  # the chunks went by FK cascade...
    assert orphans(naive)["chunk_vectors"] == len(chunks) > 0  # ...their vectors did not
    top, distance = _nearest_chunks(naive, text)[0]
    assert top == chunks[0] and distance < 1e-4  # and nearest-neighbour recall still finds the subject

    conn = store(built)
    all_chunks = chunk_ids_of(conn, _subject_frames(conn))
    run_cascade(REQUEST, built)
    assert orphans(conn)["chunk_vectors"] == 0 and orphans(conn)["frame_vectors"] == 0
    for cid in all_chunks:
        assert (
            cast(
                tuple[Any, ...],
                conn.execute("SELECT count(*) FROM chunk_vectors WHERE chunk_id = ?", (cid,)).fetchone(),
            )[0]
            == 0
        )
    assert all(cid not in all_chunks for cid, _ in _nearest_chunks(conn, text, k=10))
    assert (
        cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM chunk_vectors").fetchone())[0] > 0
    )  # bystander vectors stay


def test_leak_2_entities_left_with_no_link_are_deleted_shared_ones_survive(built: Home, naive: apsw.Connection) -> None:
    naive.execute("DELETE FROM frames WHERE subject_id = ?", (SUBJECT.id,))
    assert orphans(naive)["entities"] > 0
    named = {
        str(r[0])
        for r in naive.execute(
            "SELECT name FROM kg_entities e WHERE NOT EXISTS (SELECT 1 FROM kg_entity_frames l "
            "WHERE l.entity_id = e.entity_id)"
        )
    }
    assert {SUBJECT.name, SUBJECT.email, SUBJECT.phone, "delivery"} <= named  # PII still searchable

    conn = store(built)
    run_cascade(REQUEST, built)
    assert orphans(conn)["entities"] == 0
    names = {str(r[0]) for r in conn.execute("SELECT name FROM kg_entities")}
    assert not names & {SUBJECT.name, SUBJECT.email, SUBJECT.phone, "delivery"}
    assert {BYSTANDER.name, BYSTANDER.email, "billing", "refund"} <= names


def test_fk_gotcha_relations_block_a_naive_entity_delete_the_cascade_deletes_them_first(
    built: Home, naive: apsw.Connection
) -> None:
    with pytest.raises(apsw.ConstraintError):
        naive.execute("DELETE FROM kg_entities WHERE kind = 'person' AND name = ?", (SUBJECT.name,))
    assert (
        cast(
            tuple[Any, ...],
            naive.execute("SELECT count(*) FROM kg_entities WHERE name = ?", (SUBJECT.name,)).fetchone(),
        )[0]
        == 1
    )

    conn = store(built)
    person = int(
        cast(
            tuple[Any, ...],
            conn.execute(
                "SELECT entity_id FROM kg_entities WHERE kind = 'person' AND name = ?", (SUBJECT.name,)
            ).fetchone(),
        )[0]
    )
    assert (
        cast(
            tuple[Any, ...],
            conn.execute("SELECT count(*) FROM kg_relations WHERE src_entity_id = ?", (person,)).fetchone(),
        )[0]
        > 0
    )
    run_cascade(REQUEST, built)
    assert (
        cast(
            tuple[Any, ...], conn.execute("SELECT count(*) FROM kg_entities WHERE entity_id = ?", (person,)).fetchone()
        )[0]
        == 0
    )
    assert (
        cast(
            tuple[Any, ...],
            conn.execute(
                "SELECT count(*) FROM kg_relations WHERE src_entity_id = ? OR dst_entity_id = ?", (person, person)
            ).fetchone(),
        )[0]
        == 0
    )
    assert list(conn.execute("PRAGMA foreign_key_check")) == []
    assert (
        cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM kg_relations").fetchone())[0] > 0
    )  # the bystander's stay


def test_verbatim_turn_frames_carry_no_archive_link_and_are_reached_by_turn_key(
    built: Home, naive: apsw.Connection
) -> None:
    naive.execute(
        "DELETE FROM frames WHERE subject_id = ? OR archive_id IN "
        "(SELECT archive_id FROM raw_archive WHERE subject_id = ?)",
        (SUBJECT.id, SUBJECT.id),
    )
    left = cast(
        tuple[Any, ...],
        naive.execute("SELECT count(*) FROM frames WHERE turn_key IN ('chat/conv-1001', 'email/msg-2002')").fetchone(),
    )[0]
    assert left > 0
    assert (
        cast(
            tuple[Any, ...],
            naive.execute(
                "SELECT count(*) FROM frames WHERE kind = 'turn' AND content LIKE ?", (f"%{SUBJECT_PHRASE}%",)
            ).fetchone(),
        )[0]
        == 1
    )  # the subject's own words, verbatim

    conn = store(built)
    bob_turns = cast(
        tuple[Any, ...],
        conn.execute("SELECT count(*) FROM frames WHERE turn_key IN ('chat/conv-3003', 'chat/conv-4004')").fetchone(),
    )[0]
    run_cascade(REQUEST, built)
    assert (
        cast(
            tuple[Any, ...],
            conn.execute(
                "SELECT count(*) FROM frames WHERE turn_key IN ('chat/conv-1001', 'email/msg-2002')"
            ).fetchone(),
        )[0]
        == 0
    )
    assert (
        cast(
            tuple[Any, ...],
            conn.execute(
                "SELECT count(*) FROM frames_fts WHERE frames_fts MATCH ?", (f'"{SUBJECT_PHRASE}"',)
            ).fetchone(),
        )[0]
        == 0
    )
    assert (
        cast(
            tuple[Any, ...],
            conn.execute(
                "SELECT count(*) FROM frames WHERE turn_key IN ('chat/conv-3003', 'chat/conv-4004')"
            ).fetchone(),
        )[0]
        == bob_turns
        > 0
    )


def test_derived_frames_that_reference_or_quote_erased_frames_go_to_a_fixpoint(
    built: Home, naive: apsw.Connection
) -> None:
    naive.execute("DELETE FROM frames WHERE subject_id = ?", (SUBJECT.id,))
    quoting = cast(
        tuple[Any, ...],
        naive.execute(
            "SELECT count(*) FROM frames WHERE kind = 'derived' AND (content LIKE ? OR content LIKE ?)",
            (f"%{SUBJECT_PHRASE}%", f"%{SUBJECT.name}%"),
        ).fetchone(),
    )[0]
    assert quoting == 2  # the digest quoting the phrase, the escalation quoting the name
    roll_up = cast(
        tuple[Any, ...], naive.execute("SELECT count(*) FROM frames WHERE content LIKE 'Quarterly roll-up%'").fetchone()
    )[0]
    assert roll_up == 1  # second order: references the digest, which is still there

    conn = store(built)
    run_cascade(REQUEST, built)
    derived = [str(r[0]) for r in conn.execute("SELECT content FROM frames WHERE kind = 'derived'")]
    assert derived == ["Bystander-only digest: laptop refunds are slow."]
    assert orphans(conn) == dict.fromkeys(ORPHANS, 0)
    for needle in (SUBJECT_PHRASE, SUBJECT.name):
        assert (
            cast(
                tuple[Any, ...],
                conn.execute("SELECT count(*) FROM frames_fts WHERE frames_fts MATCH ?", (f'"{needle}"',)).fetchone(),
            )[0]
            == 0
        )


def test_compaction_purges_projections_where_a_naive_prune_orphans_them(built: Home, naive: apsw.Connection) -> None:
    derived = cast(tuple[Any, ...], naive.execute("SELECT count(*) FROM frames WHERE kind = 'derived'").fetchone())[0]
    assert derived == 4
    naive.execute("DELETE FROM frames WHERE kind = 'derived'")
    left = orphans(naive)
    for name in ("chunk_vectors", "frame_vectors", "fts", "recall_cache"):
        assert left[name] == derived, name

    conn = store(built)
    counts = compact_derived(conn, keep_latest=1)
    assert counts["frames"] == 3 and counts["chunk_vectors"] == 3 and counts["frame_vectors"] == 3
    assert counts["fts_rows"] == 3 and counts["cache_rows"] == 3
    assert orphans(conn) == dict.fromkeys(ORPHANS, 0)
    assert cast(tuple[Any, ...], conn.execute("SELECT count(*) FROM frames WHERE kind = 'derived'").fetchone())[0] == 1
