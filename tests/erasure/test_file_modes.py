"""File modes: what holds a subject's data is its owner's only. The engine database (its vault names
the subject) and the store are created 0600 in folders 0700, and so is a new home; the outbox never
follows a symlink and always writes 0600."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from erasure.errors import ConfigError
from erasure.models import parse_envelope
from erasure.sqlite import connect
from tests.cli_fixtures import erasure

FIXTURES = Path(__file__).parents[1] / "fixtures"
RID = "req-gdpr-0001"


def mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


@pytest.fixture
def umask_022() -> object:
    """The usual umask (files 0644, folders 0755 unless the code says otherwise)."""
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture
def new_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask_022: object) -> Path:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    monkeypatch.delenv("ERASURE_HOME", raising=False)
    return tmp_path / "a" / "new-home"


# --- the home, the engine and the store ----------------------------------------------------------


def test_a_new_home_and_its_folders_are_0700(new_home: Path) -> None:
    h = Home.resolve(new_home).ensure()
    for d in (h.root, h.store_dir, h.engine_dir, h.keys_dir, h.outbox_dir, h.inbox_dir, h.services_dir, h.prefect_home):
        assert mode(d) == 0o700, d


def test_an_existing_home_folder_keeps_its_mode_and_gets_private_folders(tmp_path: Path, umask_022: object) -> None:
    root = tmp_path / "shared"
    root.mkdir(mode=0o755)
    h = Home.resolve(root).ensure()
    assert mode(root) == 0o755  # a folder we did not make is not ours to change
    assert mode(h.engine_dir) == 0o700 and mode(h.store_dir) == 0o700


def test_submit_creates_the_engine_database_0600(new_home: Path) -> None:
    res = erasure("request", "submit", str(FIXTURES / "requests" / "gdpr.json"), "--home", str(new_home))
    assert res.code == 0, res.err
    h = Home.resolve(new_home)
    assert mode(h.root) == 0o700 and mode(h.engine_dir) == 0o700
    files = sorted(h.engine_dir.iterdir())
    assert h.engine_db in files
    for f in files:
        assert mode(f) == 0o600, f


def test_the_engine_databases_wal_and_shm_are_0600_while_open(tmp_path: Path, umask_022: object) -> None:
    db = tmp_path / "engine" / "engine.db"
    conn = open_engine(db)
    try:
        conn.execute("INSERT INTO engine_events(at, event) VALUES ('2024-01-01T00:00:00Z', 'x')")
        present = [p for p in (db, db.with_name("engine.db-wal"), db.with_name("engine.db-shm")) if p.exists()]
        assert len(present) == 3
        assert [mode(p) for p in present] == [0o600] * 3
        assert mode(db.parent) == 0o700
    finally:
        conn.close()


def test_an_engine_database_made_readable_by_others_is_made_private_again(tmp_path: Path, umask_022: object) -> None:
    db = tmp_path / "engine.db"
    open_engine(db).close()
    os.chmod(db, 0o644)  # as an older version left it
    open_engine(db).close()
    assert mode(db) == 0o600


def test_store_init_and_ingest_keep_the_store_private(new_home: Path) -> None:
    res = erasure("store", "init", "--home", str(new_home))
    assert res.code == 0, res.err
    h = Home.resolve(new_home)
    assert mode(h.store_dir) == 0o700 and mode(h.store_db) == 0o600
    res = erasure("ingest", str(FIXTURES / "ingest" / "one_item.jsonl"), "--home", str(new_home))
    assert res.code == 0, res.err
    conn = connect(h.store_db)  # while a connection is open its -wal and -shm exist
    try:
        conn.execute("SELECT count(*) FROM frames").fetchone()
        for name in ("memory.db", "memory.db-wal", "memory.db-shm"):
            assert mode(h.store_dir / name) == 0o600, name
    finally:
        conn.close()


def test_a_new_database_anywhere_is_0600(tmp_path: Path, umask_022: object) -> None:
    db = tmp_path / "x" / "y" / "new.db"
    connect(db).close()
    assert mode(db) == 0o600
    assert mode(db.parent) == 0o700 and mode(db.parent.parent) == 0o700


# --- the outbox ------------------------------------------------------------------------------------


@pytest.fixture
def vaulted(home: Home, umask_022: object) -> Home:
    envelope = parse_envelope((FIXTURES / "requests" / "gdpr.json").read_bytes())
    engine = open_engine(home.engine_db)
    try:
        request_records.submit(engine, envelope, now=datetime.now(UTC))
    finally:
        engine.close()
    return home


def _notify(h: Home) -> Path | None:
    from service.signoff import notify_requester

    return notify_requester(h, RID, "ab" * 32, "2024-02-01T00:00:00.000000Z")


def _state(h: Home) -> str:
    engine = open_engine(h.engine_db)
    try:
        return request_records.get(engine, RID).state.value
    finally:
        engine.close()


def test_the_outbox_file_is_0600_even_over_an_existing_readable_file(vaulted: Home) -> None:
    out = vaulted.outbox_dir / f"{RID}.eml"
    out.write_text("old")
    os.chmod(out, 0o644)
    assert _notify(vaulted) == out
    assert mode(out) == 0o600
    assert b"Subject: Your erasure request" in out.read_bytes()
    assert sorted(p.name for p in vaulted.outbox_dir.iterdir()) == [out.name]  # no temporary left


def test_the_outbox_never_writes_through_a_symlinked_file(vaulted: Home, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    os.chmod(victim, 0o644)
    out = vaulted.outbox_dir / f"{RID}.eml"
    out.symlink_to(victim)
    _notify(vaulted)
    assert victim.read_text() == "keep me" and mode(victim) == 0o644
    assert not out.is_symlink() and mode(out) == 0o600


def test_a_symlinked_outbox_folder_is_refused(vaulted: Home, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    vaulted.outbox_dir.rmdir()
    vaulted.outbox_dir.symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="outbox"):
        _notify(vaulted)
    assert list(elsewhere.iterdir()) == []
    assert _state(vaulted) == "submitted"  # not recorded as notified
