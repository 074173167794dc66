"""Tampering before a `restore replay` (issue 34, finding 12): a restored reference store, and then the
ledger of erasures or the store's epoch records changed by hand so that the restore would go unnoticed
or an erasure would not be replayed. Each is detected: a ledger changed outside the product is refused
by everything that trusts it (exit 6, one line); an epoch raised by hand accounts for no erasure, so the
store stays refused until the replay has erased the three subjects again."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from erasure.config import Home
from tests import oracle
from tests.backup_fixtures import THREE, restore_folder
from tests.cli_fixtures import erasure
from tests.service.test_restore_reference import REQUESTS, erased_three  # noqa: F401  (the fixture)


def _ledger(home: Home) -> sqlite3.Connection:
    return sqlite3.connect(home.root / "ledger" / "erasures.db", isolation_level=None)


def delete_the_newest_ledger_entry(home: Home) -> None:
    with _ledger(home) as db:
        (seq,) = db.execute("SELECT max(seq) FROM entries").fetchone()
        db.execute("DELETE FROM entry_hashes WHERE seq = ?", (seq,))
        db.execute("DELETE FROM entries WHERE seq = ?", (seq,))


def delete_the_newest_entry_its_seal_and_the_head(home: Home) -> None:
    with _ledger(home) as db:
        (seq,) = db.execute("SELECT max(seq) FROM entries").fetchone()
        db.execute("DELETE FROM entry_hashes WHERE seq = ?", (seq,))
        db.execute("DELETE FROM entries WHERE seq = ?", (seq,))
        db.execute("DELETE FROM seals WHERE seq = ?", (seq,))
    (home.keys_dir / "ledger.head").unlink()


def lower_an_entrys_epoch_to_the_backups(home: Home) -> None:
    with _ledger(home) as db:
        db.execute("UPDATE entries SET epoch = 0")


def drop_an_entrys_identity_hashes(home: Home) -> None:
    """The replay would find nobody to erase again: "nothing_found"."""
    with _ledger(home) as db:
        db.execute("DELETE FROM entry_hashes WHERE seq = (SELECT min(seq) FROM entries)")


@pytest.mark.parametrize(
    "tamper",
    [
        delete_the_newest_ledger_entry,
        delete_the_newest_entry_its_seal_and_the_head,
        lower_an_entrys_epoch_to_the_backups,
        drop_an_entrys_identity_hashes,
    ],
    ids=lambda f: f.__name__,
)
def test_a_ledger_changed_before_a_replay_is_refused(
    home: Home,
    erased_three: dict[str, Path],  # noqa: F811
    tamper: Callable[[Home], None],
) -> None:
    h = str(home.root)
    restore_folder(erased_three["online"], home.store_dir)
    tamper(home)
    for args in (("restore", "replay", "--target", "reference"), ("restore", "status")):
        res = erasure(*args, "--home", h)
        assert res.code == 6, res.out + res.err
        assert res.err.count("\n") == 1 and "the ledger of erasures" in res.err, res.err
    assert any(oracle.scan_tree(home.store_dir, who).hits for who in THREE)  # nothing was "replayed" away
    ingest = erasure("ingest", str(home.root.parent / "items.jsonl"), "--home", h)
    assert ingest.code == 6 and "the ledger of erasures" in ingest.err, ingest.err


def test_a_restored_stores_epoch_raised_by_hand_is_noticed_and_replayed(
    home: Home,
    erased_three: dict[str, Path],  # noqa: F811
) -> None:
    """The restored store's epoch set to the ledger's by an inserted row: it accounts for none of the
    three erasures, so the store is still refused, and the replay erases the three again."""
    h = str(home.root)
    restore_folder(erased_three["online"], home.store_dir)
    db = sqlite3.connect(home.store_db, isolation_level=None)
    try:
        db.execute(
            "CREATE TABLE IF NOT EXISTS erasure_epoch(request_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL,"
            " at TEXT NOT NULL) WITHOUT ROWID"
        )
        db.execute("INSERT INTO erasure_epoch VALUES ('fixed-by-hand', 3, '2026-01-01T00:00:00Z')")
    finally:
        db.close()
    status = json.loads(erasure("restore", "status", "--home", h, "--json").out)["targets"][0]
    assert status["restored"] is True and status["pending"] == REQUESTS, status
    ingest = erasure("ingest", str(home.root.parent / "items.jsonl"), "--home", h)
    assert ingest.code == 6 and "restored from a backup" in ingest.err, ingest.err
    replay = erasure("restore", "replay", "--target", "reference", "--home", h, "--json")
    assert replay.code == 0, replay.out[-3000:] + replay.err[-3000:]
    out = json.loads(replay.out)
    assert [r["original"] for r in out["replayed"]] == REQUESTS and out["restored"] is False
    assert {r["outcome"] for r in out["replayed"]} == {"all_clear"}
    assert not any(oracle.scan_tree(home.store_dir, who).hits for who in THREE)
