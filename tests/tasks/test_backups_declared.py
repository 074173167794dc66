"""Issue 26, declared backups: a pack written while a backup taken before the erasure still exists lists
it with its expiry and says erasedWithExceptions (`held_in_backup_until`); `erasure backups list` shows
the open expiry; once the backup is gone, a signed follow-up statement is written beside the pack, and
the offline verifier checks it (and refuses a forged one)."""

from __future__ import annotations

import base64
import json
import os
import sys
import tarfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from erasure.backups import list_backups
from erasure.config import Home
from erasure.targets import load_targets
from tests.backup_fixtures import THREE, reference_items, request_file, sqlite_online_backup, verify_offline
from tests.cli_fixtures import erasure

RID = "req-bk-held-1"


def _predicate(pack: Path) -> dict[str, object]:
    with tarfile.open(pack, "r:gz") as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("signatures/engine.intoto.json"))
        f = tar.extractfile(member)
        assert f is not None
        env = json.loads(f.read())
    pred = json.loads(base64.b64decode(env["payload"]))["predicate"]
    assert isinstance(pred, dict)
    return pred


def test_a_backup_holding_the_subject_is_in_the_pack_until_the_followup(
    home: Home, tmp_path: Path, prefect_harness: None
) -> None:
    h = str(home.root)
    assert erasure("store", "init", "--home", h).code == 0
    assert erasure("ingest", str(reference_items(tmp_path / "items.jsonl")), "--home", h).code == 0
    assert erasure("keys", "generate", "--role", "engine", "--home", h).code == 0
    folder = tmp_path / "nightly"
    backup = sqlite_online_backup(home.store_db, folder / "memory-nightly.db")
    taken = time.time() - 86_400
    os.utime(backup, (taken, taken))
    (home.root / "targets.toml").write_text(f'''
[[targets]]
name = "reference"
kind = "reference"

[[targets.backups]]
folder = "{folder}"
pattern = "*.db"
retention_days = 30
''')
    assert erasure("request", "submit", str(request_file(tmp_path / "r.json", RID, THREE[0])), "--home", h).code == 0
    run = erasure("request", "run", RID, "--home", h, "--json")
    assert run.code == 0, run.out[-2000:] + run.err[-2000:]

    pack = home.evidence_dir(RID) / "proof.tar.gz"
    pred = _predicate(pack)
    expiry = (datetime.fromtimestamp(taken, UTC) + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    held = [e for e in pred["exceptions"] if e["kind"] == "held_in_backup_until"]  # type: ignore[attr-defined]
    assert len(held) == 1 and held[0]["item_key"].endswith(f":until:{expiry}"), held
    assert expiry in held[0]["ground"]
    assert pred["status"] == "erasedWithExceptions"
    assert verify_offline(pack, home).returncode == 0

    listed = json.loads(erasure("backups", "list", "--home", h, "--json").out)
    assert [b["name"] for b in listed["backups"]] == ["memory-nightly.db"]
    assert [(x["request_id"], x["expires_at"], x["ended"]) for x in listed["open"]] == [(RID, expiry, None)]
    assert listed["followups_written"] == []
    assert not (home.evidence_dir(RID) / "backups-followup.intoto.json").exists()

    backup.unlink()  # the backup is gone
    listed = json.loads(erasure("backups", "list", "--home", h, "--json").out)
    assert listed["open"] == [] and listed["followups_written"] == [RID]
    statement = home.evidence_dir(RID) / "backups-followup.intoto.json"
    ok = verify_offline(pack, home)
    assert ok.returncode == 0 and "backups-followup: OK" in ok.stdout, ok.stdout + ok.stderr

    # A forged follow-up (its expiry changed, so its signature no longer holds) fails the verifier.
    env = json.loads(statement.read_text())
    body = json.loads(base64.b64decode(env["payload"]))
    body["predicate"]["backups"][0]["expires_at"] = "2000-01-01T00:00:00Z"
    env["payload"] = base64.b64encode(json.dumps(body).encode()).decode()
    statement.write_text(json.dumps(env))
    bad = verify_offline(pack, home)
    assert bad.returncode == 1 and "FAIL: backups-followup" in bad.stdout


def test_backups_listed_by_a_command(home: Home, tmp_path: Path) -> None:
    script = "print('2026-03-01T02:00:00Z snap-0301'); print('2026-03-02T02:00:00Z snap-0302')"
    (home.root / "targets.toml").write_text(f"""
[[targets]]
name = "reference"
kind = "reference"

[[targets.backups]]
command = [{json.dumps(sys.executable)}, "-c", {json.dumps(script)}]
retention_days = 7
""")
    (target,) = load_targets(home.root, home.store_dir).targets
    got = [b.as_dict() for b in list_backups(target)]
    assert [(b["name"], b["taken_at"], b["expires_at"]) for b in got] == [
        ("snap-0301", "2026-03-01T02:00:00Z", "2026-03-08T02:00:00Z"),
        ("snap-0302", "2026-03-02T02:00:00Z", "2026-03-09T02:00:00Z"),
    ]
