"""What a window's probes read once and share among its subjects: one scan per distinct needle, one index
of the store's personal entities, phrase checks that stop at the first bystander frame. Real hyperscan,
real SQLite (FTS5)."""

from __future__ import annotations

from pathlib import Path

import apsw

from probes.needles import Needle, NeedleKind
from probes.resolve import PersonalEntities, fts_hit_outside
from probes.window_bytes import _scan


def _needle(data: bytes, *, caseless: bool = False, kind: NeedleKind = NeedleKind.canary) -> Needle:
    return Needle(kind=kind, group=0, data=data, caseless=caseless)


def test_a_needle_two_subjects_share_is_scanned_once_and_reported_to_both(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 300_000 + b"shared canary text, Dana Ortiz, shared canary text")
    (tmp_path / "small").write_bytes(b"dana ortiz")
    first = [_needle(b"shared canary text"), _needle(b"Dana Ortiz", caseless=True)]
    second = [_needle(b"absent"), _needle(b"Dana Ortiz"), _needle(b"shared canary text")]
    hits, unreadable, _files = _scan(tmp_path, [first, second])
    assert hits == [{0: 2, 1: 2}, {1: 1, 2: 2}]  # the caseless spelling also matches the lower-cased copy
    assert unreadable == 0


def _entities(rows: list[tuple[int, str, str]]) -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE TABLE kg_entities (entity_id INTEGER PRIMARY KEY, kind TEXT, name TEXT)")
    conn.executemany("INSERT INTO kg_entities VALUES (?, ?, ?)", rows)
    return conn


def test_personal_entities_are_found_by_name_collapsed_name_and_phone_digits() -> None:
    conn = _entities(
        [
            (1, "person", "Dana  Ortiz"),
            (2, "person", "DANA ORTIZ"),
            (3, "phone", "+1 (555) 010-2345"),
            (4, "person", "15550102345"),
            (5, "topic", "dana ortiz"),
            (6, "email", "Dana@Example.org"),
            (7, "person", "Dana Ortiz Jr"),
        ]
    )
    index = PersonalEntities.read(conn)
    assert index.named({"dana ortiz"}, "15550102345") == {1, 2, 3}
    assert index.named({"dana  ortiz"}, "") == {1}
    assert index.named({"dana@example.org", "15550102345"}, "") == {4, 6}


def test_a_phrase_is_shared_only_when_a_frame_outside_the_subjects_holds_it() -> None:
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE VIRTUAL TABLE frames_fts USING fts5(content)")
    conn.executemany(
        "INSERT INTO frames_fts(rowid, content) VALUES (?, ?)",
        [
            (1, "the quarterly plan for the harbour office"),
            (2, "The Quarterly Plan for the harbour"),
            (3, "an unrelated note"),
        ],
    )
    assert fts_hit_outside(conn, "quarterly plan for the harbour", "[1]")
    assert not fts_hit_outside(conn, "quarterly plan for the harbour", "[1, 2]")
    assert not fts_hit_outside(conn, "harbour office", "[1]")
    assert not fts_hit_outside(conn, "...", "[]")
