"""Re-verification (issue 27) through the real CLI, the real flows on the session's Prefect test server,
a real store built by the real ingest, and the offline verifier as a regulator runs it.

Two requests are erased as one window and sealed by the DPO. A clean re-verification writes a signed
statement beside the pack (the pack's bytes unchanged) that the verifier checks with `--reverify`.
Then the subject comes back through another source: a CRM sync's item, first held by the ingest guard
(an erased identity), is let in by a re-consent and ingested; the next re-verification finds the
subject, reopens the request with an exception and a Prefect event, reports which scanned files
changed since the pack's scan manifest, and the verifier refuses the pack with that statement.
The other request's vault entry is removed: its re-verification says it cannot be done, and writes
nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from erasure import request_records
from erasure.config import PROJECT_ROOT, Home
from erasure.engine import open_engine
from service.reverification import due_requests
from tests.backup_fixtures import STAYS, THREE, reference_items, request_file
from tests.cli_fixtures import erasure
from tests.engine_of import EngineOf
from tests.flows.test_erasure_flow import _prefect_files
from tests.flows.test_run_report import events_of

RID, OTHER = "req-rv-1", "req-rv-2"
WHO = THREE[0]


def _verify(pack: Path, home: Home, *statements: Path, dpo: bool = True) -> subprocess.CompletedProcess[str]:
    """`python -m proof.verify PACK --reverify ...` with the pinned engine key (and DPO key, unless
    the pack is not attested yet)."""
    rv = ["--reverify", *map(str, statements)] if statements else []
    keys = ["--dpo-key", str(home.keys_dir / "dpo.pub.pem")] if dpo else ["--no-dpo"]
    return subprocess.run(
        [*_verifier(pack, home), *keys, "--no-audit-key", *rv],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _verifier(pack: Path, home: Home) -> list[str]:
    return [sys.executable, "-m", "proof.verify", str(pack), "--engine-key", str(home.keys_dir / "engine.pub.pem")]


def _predicate(statement: Path) -> dict[str, Any]:
    pred = json.loads(base64.b64decode(json.loads(statement.read_bytes())["payload"]))["predicate"]
    assert isinstance(pred, dict)
    return pred


def _state(home: Home, rid: str) -> str:
    engine = open_engine(home.engine_db)
    try:
        return request_records.get(engine, rid).state.value
    finally:
        engine.close()


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _crm_item(path: Path) -> Path:
    """The subject again, through another source: a CRM sync's contact note."""
    item = {
        "source": "crm-sync",
        "source_ref": "contact-55012",
        "subject": WHO.model_dump(exclude_none=True),
        "content": f"Contact note: {WHO.name} ({WHO.email}) asked about the kiln rental invoice again.",
    }
    path.write_text(json.dumps(item) + "\n")
    return path


@contextmanager
def smtp_sink(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """A real SMTP server on 127.0.0.1 (the stdlib's) as the requester's mail transport: a notification
    is delivered, not left in the outbox folder (where it would name the subject, and a
    re-verification would rightly find it). Yields the recipients of each message received."""
    import asyncore
    import smtpd
    import threading

    received: list[list[str]] = []

    class Sink(smtpd.SMTPServer):
        def process_message(self, peer, mailfrom, rcpttos, data, **kwargs):  # type: ignore[no-untyped-def]
            received.append(list(rcpttos))

    server = Sink(("127.0.0.1", 0), None)  # type: ignore[arg-type]
    loop = threading.Thread(target=asyncore.loop, kwargs={"timeout": 0.05}, daemon=True)
    loop.start()
    try:
        assert server.socket is not None
        monkeypatch.setenv("ERASURE_SMTP_HOST", "127.0.0.1")
        monkeypatch.setenv("ERASURE_SMTP_PORT", str(server.socket.getsockname()[1]))
        yield received
    finally:
        server.close()
        loop.join(timeout=5)


def test_reverification_clean_then_the_subject_is_back_and_the_request_reopens(
    home: Home,
    tmp_path: Path,
    prefect_harness: None,
    monkeypatch: pytest.MonkeyPatch,
    engine_of: EngineOf,
) -> None:
    h = str(home.root)
    assert erasure("store", "init", "--home", h).code == 0
    assert erasure("ingest", str(reference_items(tmp_path / "items.jsonl")), "--home", h).code == 0
    for role in ("engine", "dpo"):
        assert erasure("keys", "generate", "--role", role, "--home", h).code == 0
    for rid, who in ((RID, WHO), (OTHER, THREE[1])):
        assert (
            erasure("request", "submit", str(request_file(tmp_path / f"{rid}.json", rid, who)), "--home", h).code == 0
        )
    run = erasure("request", "run", RID, OTHER, "--home", h, "--json")
    assert run.code == 0, run.out[-2000:] + run.err[-2000:]

    # The scan manifest: every file the byte scan read, with its size and digest; no path names anyone.
    ver_text = (home.evidence_dir(RID) / "verification.json").read_text()
    scan = json.loads(ver_text)["scan_manifest"]
    files = {f["path"]: f for f in scan["files"]}
    assert scan["file_count"] == len(files) > 3 and scan["inline"] is True
    assert scan["sha256"] == _sha(home.evidence_dir(RID) / "scan-manifest.json")  # the whole one, beside the pack
    db = files["store/memory.db"]
    assert (db["size"], db["sha256"]) == (home.store_db.stat().st_size, _sha(home.store_db))  # the store is at rest
    for ident in [*WHO.identifiers(), STAYS.email or ""]:
        assert ident.lower() not in ver_text.lower()

    # Only a sealed request is re-verified.
    early = erasure("request", "reverify", RID, "--home", h)
    assert early.code == 6 and "only a sealed request" in early.err, early.out + early.err
    with smtp_sink(monkeypatch) as mailed:
        for rid in (RID, OTHER):
            assert erasure("attest", rid, "--dpo-key", str(home.keys_dir / "dpo.pem"), "--yes", "--home", h).code == 0
    assert len(mailed) == 2 and not list(home.outbox_dir.glob("*.eml"))
    assert _state(home, RID) == "notified"
    pack = home.evidence_dir(RID) / "proof.tar.gz"
    pack_bytes = pack.read_bytes()

    # A clean re-verification: a signed statement the offline verifier checks.
    clean = erasure("request", "reverify", RID, "--home", h, "--json")
    assert clean.code == 0, clean.out[-2000:] + clean.err[-2000:]
    doc = json.loads(clean.out)
    assert doc["all_clear"] is True and doc["sequence"] == 1 and doc["reopened"] is False
    assert doc["changed_files"]["compared"] is True
    assert "store/memory.db" not in doc["changed_files"]["modified"]  # nothing wrote the store since
    first = home.evidence_dir(RID) / "reverify-1.intoto.json"
    assert _predicate(first)["all_clear"] is True
    # This scan's whole manifest beside the statement, named by the signed digest (for the next comparison).
    assert (
        _sha(home.evidence_dir(RID) / "reverify-1.scan-manifest.json") == _predicate(first)["scan_manifest"]["sha256"]
    )
    assert pack.read_bytes() == pack_bytes  # the pack itself is never rewritten
    ok = _verify(pack, home, first)
    assert ok.returncode == 0 and "re-verification 1 at" in ok.stdout, ok.stdout + ok.stderr
    assert _state(home, RID) == "notified"
    # The export carries the statement, and VERIFY.md's verifier line checks it.
    out = tmp_path / "export"
    assert erasure("export", RID, "--to", str(out), "--home", h).code == 0
    assert (out / first.name).read_bytes() == first.read_bytes()
    line = next(
        x.strip() for x in (out / "VERIFY.md").read_text().splitlines() if "erasure-verify.pyz" in x and "--" in x
    )
    assert line.startswith("python3 erasure-verify.pyz") and line.endswith(f"--reverify {first.name}"), line
    shipped = subprocess.run([sys.executable, *line.split()[1:]], cwd=out, capture_output=True, text=True, check=False)
    assert shipped.returncode == 0 and "re-verification 1 at" in shipped.stdout, shipped.stdout + shipped.stderr

    # Due every 30 days from the last (re-)verification.
    now = datetime.now(UTC)
    assert RID not in due_requests(engine_of(home), home, 30, now=now)
    assert RID in due_requests(engine_of(home), home, 30, now=now + timedelta(days=31))

    # The daily deployment's flow: the other request, last verified 40 days ago (its verification.json
    # in the evidence folder dated back; the pack's own copy is untouched), is re-verified; this one,
    # re-verified a moment ago, is not due.
    from flows.reverification import reverify_due

    other_ver = home.evidence_dir(OTHER) / "verification.json"
    dated = json.loads(other_ver.read_text())
    dated["verified_at"] = (now - timedelta(days=40)).strftime("%Y-%m-%dT%H:%M:%SZ")
    other_ver.write_text(json.dumps(dated))
    assert due_requests(engine_of(home), home, 30) == [OTHER]
    assert reverify_due(days=30) == {"all_clear": [OTHER], "reopened": [], "not_reverified": []}
    assert _predicate(home.evidence_dir(OTHER) / "reverify-1.intoto.json")["all_clear"] is True
    assert due_requests(engine_of(home), home, 30) == []

    # The subject comes back through another source: held by the guard, let in by a re-consent.
    crm = _crm_item(tmp_path / "crm.jsonl")
    held = erasure("ingest", str(crm), "--home", h)
    assert "held_erased_identity" in held.out + held.err, held.out + held.err
    allow = erasure(
        "suppression", "allow", "--identity-of", f"{crm}:1", "--reason", "CRM sync re-consent, ticket 4471", "--home", h
    )
    assert allow.code == 0, allow.out + allow.err
    assert erasure("ingest", str(crm), "--home", h).code == 0

    since = datetime.now(UTC)
    back = erasure("request", "reverify", RID, "--home", h, "--json")
    assert back.code == 7, back.out[-2000:] + back.err[-2000:]
    doc = json.loads(back.out)
    assert doc["all_clear"] is False and doc["reopened"] is True and doc["sequence"] == 2
    assert doc["residue_tiers"] and all(doc["residue"][t] > 0 for t in doc["residue_tiers"])
    changed = doc["changed_files"]
    assert changed["modified_count"] == len(changed["modified"]) and changed["added_count"] == len(changed["added"])
    assert {"store/memory.db", "store/memory.db-wal"} & {*changed["modified"], *changed["added"]}, changed
    assert _state(home, RID) == "reopened"
    engine = open_engine(home.engine_db)
    try:
        opened = [
            e for e in request_records.exceptions(engine, RID, open_only=True) if e.item_key == "reverification-2"
        ]
    finally:
        engine.close()
    assert sorted(e.tier for e in opened) == sorted(doc["residue_tiers"])
    (event,) = events_of(f"erasure.request.{RID}", {"erasure.request.reopened"}, since)
    assert event.payload["residue_tiers"] == doc["residue_tiers"]
    second = home.evidence_dir(RID) / "reverify-2.intoto.json"
    for statement in (first, second):
        text = statement.read_text().lower() + base64.b64decode(json.loads(statement.read_bytes())["payload"]).decode()
        for ident in WHO.identifiers():
            assert ident.lower() not in text.lower()
    assert pack.read_bytes() == pack_bytes
    bad = _verify(pack, home, first, second)
    assert bad.returncode == 1 and "FAIL: reverify" in bad.stdout and "found the subject again" in bad.stdout
    assert _verify(pack, home, first).returncode == 0  # the first statement still stands on its own
    blob = b"".join(p.read_bytes() for p in _prefect_files())
    assert RID.encode() in blob  # the check can fail: Prefect recorded these runs
    for ident in WHO.identifiers():
        assert ident.encode() not in blob, "an identifier reached Prefect's storage"

    # A reopened request is erased again like any open one: a new run, all clear, a new pack to attest.
    again = erasure("request", "run", RID, "--home", h, "--json")
    assert again.code == 0, again.out[-2000:] + again.err[-2000:]
    assert _state(home, RID) == "awaiting attestation"
    with smtp_sink(monkeypatch):
        _a_reopened_requests_rerun_leaves_the_first_pack_beside_the_new_one(
            home, tmp_path, pack, pack_bytes, first, second
        )

    # The other request's vault entry is gone: nothing to probe with, said plainly, nothing written.
    engine = open_engine(home.engine_db)
    try:
        engine.execute("DELETE FROM vault_store_ids WHERE request_id = ?", (OTHER,))
        engine.execute("DELETE FROM vault WHERE request_id = ?", (OTHER,))
    finally:
        engine.close()
    gone = erasure("request", "reverify", OTHER, "--home", h)
    assert gone.code == 4 and "vault no longer holds its subject" in gone.err, gone.out + gone.err
    assert [p.name for p in home.evidence_dir(OTHER).glob("reverify-*.intoto.json")] == ["reverify-1.intoto.json"]


def test_the_reverify_due_deployment_runs_daily_with_a_30_day_default() -> None:
    doc = yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text())
    deps = {d["name"]: d for d in doc["deployments"]}
    due = deps["reverify-due"]
    assert due["entrypoint"] == "flows.reverification:reverify_due"
    assert due["parameters"] == {"days": 30}
    assert [s.get("interval") for s in due["schedules"]] == [86400]
    assert deps["reverification"]["entrypoint"] == "flows.reverification:reverification"


def _a_reopened_requests_rerun_leaves_the_first_pack_beside_the_new_one(
    home: Home, tmp_path: Path, pack: Path, pack_bytes: bytes, first: Path, second: Path
) -> None:
    """Evidence is append-only (issue 34, finding 11): the rerun of the reopened request wrote its pack
    beside the sealed one, which stays byte for byte with its statements; the new pack names it, is
    signed off and re-verified in a chain of its own, and the export ships the whole history."""
    h = str(home.root)
    newer = home.evidence_dir(RID) / "proof-2.tar.gz"
    assert pack.read_bytes() == pack_bytes and newer.is_file()
    earlier = _verify(pack, home, first)
    assert earlier.returncode == 0, earlier.stdout  # the first pack still verifies as the regulator holds it
    shown = subprocess.run(
        [sys.executable, "-m", "proof.verify", str(newer), "--engine-key", str(home.keys_dir / "engine.pub.pem"),
         "--no-dpo", "--no-audit-key", "--json"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stdout
    first_name = json.loads(
        subprocess.run(
            [sys.executable, "-m", "proof.verify", str(pack), "--engine-key", str(home.keys_dir / "engine.pub.pem"),
             "--no-dpo", "--no-audit-key", "--json"],
            cwd=PROJECT_ROOT, capture_output=True, text=True, check=False,
        ).stdout
    )["pack_name"]  # fmt: skip
    assert json.loads(shown.stdout)["previous_pack"] == first_name
    assert erasure("attest", RID, "--dpo-key", str(home.keys_dir / "dpo.pem"), "--yes", "--home", h).code == 0
    assert pack.read_bytes() == pack_bytes
    clean = erasure("request", "reverify", RID, "--home", h, "--json")
    assert clean.code in (0, 7), clean.out[-2000:] + clean.err[-2000:]
    own = home.evidence_dir(RID) / "proof-2.reverify-1.intoto.json"
    assert json.loads(clean.out)["statement"] == own.name and json.loads(clean.out)["sequence"] == 1
    out = tmp_path / "export-history"
    assert erasure("export", RID, "--to", str(out), "--home", h).code == 0
    assert (out / f"{RID}-proof.tar.gz").read_bytes() == pack_bytes
    assert (out / f"{RID}-proof-2.tar.gz").read_bytes() == newer.read_bytes()
    for statement in (first, second, own):
        assert (out / statement.name).read_bytes() == statement.read_bytes()
