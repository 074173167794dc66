"""Hold wins (invariant 3): with a litigation hold on the subject, preflight says "blocked" with the
hold count and nothing in the store changes, even if the cascade is started anyway; after the
release preflight says "run" and the cascade erases."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import cast

import pytest

from erasure.config import Home
from erasure.errors import HoldActive
from erasure.sqlite import connect
from memory import holds
from memory.schema import create, db_path
from tasks.preflight import preflight
from tasks.runner import run_cascade
from tests.cascade_fixtures import BYSTANDER, SUBJECT, build_store, owned_counts, submit

REQUEST = "req-ann-1"


@pytest.fixture
def built(home: Home, tmp_path: Path) -> Home:
    build_store(home, tmp_path)
    submit(home)
    return home


def store_digest(home: Home) -> dict[str, str]:
    """sha256 of every table's rows (shadow tables of FTS and vec0 included) and of every other file."""
    conn = connect(db_path(home.store_dir), readonly=True)  # `create` itself rewrites the FTS config
    try:
        out: dict[str, str] = {}
        for (name,) in cast(
            list[tuple[str]],
            conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall(),
        ):
            rows = sorted(repr(r) for r in conn.execute(f'SELECT * FROM "{name}"'))
            out[name] = hashlib.sha256("\n".join(rows).encode()).hexdigest()
    finally:
        conn.close()
    for path in sorted(home.store_dir.rglob("*")):
        if path.is_file() and not path.name.startswith("memory.db"):
            out[str(path.relative_to(home.store_dir))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _place(home: Home, subject_id: str, n: int = 1) -> None:
    conn = create(home.store_dir)
    try:
        for i in range(n):
            holds.place(conn, subject_id, f"litigation matter {i + 1}", "legal@example.com")
    finally:
        conn.close()


def _release(home: Home, subject_id: str) -> list[int]:
    conn = create(home.store_dir)
    try:
        return holds.release(conn, subject_id, "matter settled", "legal@example.com")
    finally:
        conn.close()


def test_a_hold_blocks_and_changes_nothing_until_it_is_released(built: Home) -> None:
    _place(built, SUBJECT.id, 2)
    before = store_digest(built)
    assert len(before) > 40  # every table, its shadow tables, blobs, sessions and corpora

    pf = preflight(REQUEST, built)
    assert (pf.action, pf.holds) == ("blocked", 2)
    assert store_digest(built) == before

    with pytest.raises(HoldActive):  # a cascade started anyway (a hold placed after preflight) refuses
        run_cascade(REQUEST, built)
    assert store_digest(built) == before

    assert len(_release(built, SUBJECT.id)) == 2
    pf = preflight(REQUEST, built)
    assert (pf.action, pf.holds) == ("run", 0)
    run_cascade(REQUEST, built)
    assert owned_counts(built, SUBJECT) == dict.fromkeys(owned_counts(built, SUBJECT), 0)


def test_a_hold_on_someone_else_does_not_block(built: Home) -> None:
    _place(built, BYSTANDER.id)
    assert preflight(REQUEST, built).action == "run"
    bystander = owned_counts(built, BYSTANDER)
    run_cascade(REQUEST, built)
    assert owned_counts(built, SUBJECT)["frames"] == 0
    assert owned_counts(built, BYSTANDER) == bystander
