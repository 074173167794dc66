"""Issue 26 on the reference store, through the real CLI: a backup taken (SQLite's online backup API,
and `VACUUM INTO`) before three erasures is restored; the restored store is noticed (its erasure epoch is
behind the ledger's) and refused for ingest and requests (exit 6, one line); `erasure restore replay`
erases the three subjects again, ends all clear, puts the sticky lists back, and writes replay packs
that verify offline; the oracle finds nothing of them in any decoded view of any file; the bystander's
items are unchanged."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, cast

import pytest

from erasure.config import Home
from tests import oracle
from tests.backup_fixtures import (
    STAYS,
    THREE,
    folder_backup,
    reference_items,
    request_file,
    restore_folder,
    verify_offline,
)
from tests.cascade_fixtures import owned_counts
from tests.cli_fixtures import erasure

REQUESTS = [f"req-bk-{i}" for i in range(1, 4)]


def _verify(pack: Path, home: Home, tmp: Path) -> subprocess.CompletedProcess[str]:
    from memory.audit import checkpoint_public_pem

    audit_pub = tmp / "audit.pub.pem"
    audit_pub.write_bytes(checkpoint_public_pem(home.store_dir))
    return verify_offline(str(pack), home, audit_pub)


@pytest.fixture
def erased_three(home: Home, tmp_path: Path, prefect_harness: None) -> dict[str, Path]:
    """A store with THREE and STAYS; backups taken; then THREE erased one request each, all clear."""
    h = str(home.root)
    assert erasure("store", "init", "--home", h).code == 0
    res = erasure("ingest", str(reference_items(tmp_path / "items.jsonl")), "--home", h)
    assert res.code == 0, res.err
    assert erasure("keys", "generate", "--role", "engine", "--home", h).code == 0
    backups = {
        "online": folder_backup(home.store_dir, tmp_path / "backups" / "online", databases=("memory.db",)),
        "vacuum": folder_backup(home.store_dir, tmp_path / "backups" / "vacuum", databases=("memory.db",), vacuum=True),
    }
    for rid, who in zip(REQUESTS, THREE, strict=True):
        assert (
            erasure("request", "submit", str(request_file(tmp_path / f"{rid}.json", rid, who)), "--home", h).code == 0
        )
        run = erasure("request", "run", rid, "--home", h, "--json")
        assert run.code == 0, run.out[-2000:] + run.err[-2000:]
    return backups


def test_erasures_record_the_ledger_and_advance_the_epoch(home: Home, erased_three: dict[str, Path]) -> None:
    status = erasure("restore", "status", "--home", str(home.root), "--json")
    assert status.code == 0, status.err
    (row,) = json.loads(status.out)["targets"]
    assert row == {
        "target": "reference",
        "kind": "reference",
        "store_epoch": 3,
        "ledger_epoch": 3,
        "restored": False,
        "pending": [],
    }
    ledger_db = home.root / "ledger" / "erasures.db"
    assert oct(ledger_db.stat().st_mode & 0o777) == "0o600"
    assert oct((home.keys_dir / "ledger.key").stat().st_mode & 0o777) == "0o600"
    data = ledger_db.read_bytes()
    for who in THREE:  # keyed hashes only
        for v in (who.id, who.email, who.name, who.phone):
            assert str(v).encode() not in data and str(v).lower().encode() not in data


@pytest.mark.parametrize("kind", ["online", "vacuum"])
def test_restore_is_refused_then_replay_ends_all_clear(
    home: Home, tmp_path: Path, erased_three: dict[str, Path], kind: str
) -> None:
    h = str(home.root)
    bystander = owned_counts(home, STAYS)
    restore_folder(erased_three[kind], home.store_dir)
    assert any(oracle.scan_tree(home.store_dir, who).hits for who in THREE)  # the backup brought them back

    # Noticed: refused for ingest and requests, shown in targets list and restore status.
    again = erasure("ingest", str(tmp_path / "items.jsonl"), "--home", h)
    assert again.code == 6, again.out + again.err
    assert again.err.count("\n") == 1 and "restored from a backup" in again.err
    assert (
        erasure("request", "submit", str(request_file(tmp_path / "new.json", "req-bk-new", STAYS)), "--home", h).code
        == 0
    )
    refused = erasure("request", "run", "req-bk-new", "--home", h)
    assert refused.code == 6 and "restore replay --target reference" in refused.err
    listed = json.loads(erasure("targets", "list", "--home", h, "--json").out)["targets"]
    assert listed[0]["restored"] is True and listed[0]["to_replay"] == REQUESTS
    from flows.sla_monitor import sla_monitor

    assert sla_monitor(metrics_textfile=str(tmp_path / "sla.prom"))["restored"] == ["reference"]  # + an event

    replay = erasure("restore", "replay", "--target", "reference", "--home", h, "--json")
    assert replay.code == 0, replay.out[-3000:] + replay.err[-3000:]
    out = json.loads(replay.out)
    assert [r["original"] for r in out["replayed"]] == REQUESTS
    assert {r["outcome"] for r in out["replayed"]} == {"all_clear"}
    assert {r["found_by"] for r in out["replayed"]} == {"store"}  # by the ledger's keyed hashes
    assert out["restored"] is False and out["store_epoch"] == out["ledger_epoch"] == 3

    # Nothing of the three in any decoded view of any file of the home (but the vault and keys) or evidence.
    scan = oracle.scan_home(home.root, home.evidence_root, *THREE)
    assert scan.hits == [], scan.hits[:5]
    assert owned_counts(home, STAYS) == bystander
    for r in out["replayed"]:
        assert r["replay"].startswith(r["original"] + ".replay-")
        verified = _verify(Path(r["pack"]), home, tmp_path)
        assert verified.returncode == 0, verified.stdout + verified.stderr

    # The sticky lists are back: re-ingesting the old file stores nothing of the three.
    report = erasure("ingest", str(tmp_path / "items.jsonl"), "--home", h, "--json")
    assert report.code == 0, report.err
    counts = json.loads(report.out)
    assert counts["ingested"] == 0 and counts["skipped_suppressed"] == 6
    assert oracle.scan_home(home.root, home.evidence_root, *THREE).hits == []
    assert erasure("request", "run", "req-bk-new", "--home", h, "--json").code == 0  # no longer refused


def test_the_ledger_outlives_the_request_vault(home: Home, tmp_path: Path, erased_three: dict[str, Path]) -> None:
    """Replay finds the subjects by keyed hashes in the store, not through the vault: with every vault
    row of the original requests gone (their retention ended), the replay still ends all clear."""
    from erasure.engine import open_engine

    engine = open_engine(home.engine_db)
    try:
        for table in ("vault_store_ids", "vault"):
            engine.execute(f"DELETE FROM {table} WHERE request_id IN (?, ?, ?)", REQUESTS)
    finally:
        engine.close()
    restore_folder(erased_three["online"], home.store_dir)
    replay = erasure("restore", "replay", "--target", "reference", "--home", str(home.root), "--json")
    assert replay.code == 0, replay.out[-3000:] + replay.err[-3000:]
    assert oracle.scan_home(home.root, home.evidence_root, *THREE).hits == []
    assert os.path.exists(home.root / "ledger" / "erasures.db")


def test_the_replay_flow_is_the_commands_shell(home: Home, tmp_path: Path, erased_three: dict[str, Path]) -> None:
    """`erasure-replay` (the UI's way) runs the same service call as `erasure restore replay`: the three
    erased again through the request flow as subflows, epochs caught up, a result of ids and counts only."""
    from flows.replay import erasure_replay

    restore_folder(erased_three["online"], home.store_dir)
    assert any(oracle.scan_tree(home.store_dir, who).hits for who in THREE)

    state = erasure_replay("reference", return_state=True)

    assert state.is_completed(), (state.name, state.message)
    out = cast(dict[str, Any], state.result())
    assert out["restored"] is False and out["store_epoch"] == out["ledger_epoch"] == 3
    assert [r["original request"] for r in out["replays"]] == REQUESTS
    assert {r["outcome"] for r in out["replays"]} == {"all_clear"}
    assert all(r["pack"] == "proof.tar.gz" for r in out["replays"]), out
    assert oracle.scan_home(home.root, home.evidence_root, *THREE).hits == []
    shown = json.dumps(out)
    for who in THREE:
        assert all(v not in shown for v in (who.id, who.email, who.name) if v)


def test_a_replay_that_cannot_run_fails_the_flow_with_one_sentence(home: Home, erased_three: dict[str, Path]) -> None:
    """A replay on a target the home does not have ends Failed with a sentence, never a traceback state."""
    from flows.replay import erasure_replay

    state = erasure_replay("no-such-target", return_state=True)

    assert state.is_failed() and state.name == "ReplayFailed", (state.name, state.message)
    assert "no-such-target" in (state.message or "")
