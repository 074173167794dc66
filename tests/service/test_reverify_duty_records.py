"""The product's own records are not residue (docs/matching.md 7.3, issue 33 item 7).

On the README's own path, with no SMTP configured, sealing a request leaves the requester's notice in
`outbox/<request id>.eml`, and that notice names the requester. A re-verification right after sealing
must be clean: the notice is the controller's duty record, like the request vault, listed as such in
the signed statement. Anything else in the outbox is scanned like every other folder of the home: a
copy of the subject's words dropped there is found, and the request reopens.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from erasure.config import Home
from tests.backup_fixtures import THREE, reference_items, request_file
from tests.cli_fixtures import erasure

RID = "req-duty-1"
WHO = THREE[0]


def _predicate(statement: Path) -> dict[str, Any]:
    pred = json.loads(base64.b64decode(json.loads(statement.read_bytes())["payload"]))["predicate"]
    assert isinstance(pred, dict)
    return pred


def test_a_reverification_right_after_sealing_without_smtp_is_clean_and_lists_the_notice(
    home: Home, tmp_path: Path, prefect_harness: None, monkeypatch: Any
) -> None:
    monkeypatch.delenv("ERASURE_SMTP_HOST", raising=False)
    h = str(home.root)
    assert erasure("store", "init", "--home", h).code == 0
    assert erasure("ingest", str(reference_items(tmp_path / "items.jsonl")), "--home", h).code == 0
    for role in ("engine", "dpo"):
        assert erasure("keys", "generate", "--role", role, "--home", h).code == 0
    assert erasure("request", "submit", str(request_file(tmp_path / "r.json", RID, WHO)), "--home", h).code == 0
    run = erasure("request", "run", RID, "--home", h, "--json")
    assert run.code == 0, run.out[-2000:] + run.err[-2000:]
    attest = erasure("attest", RID, "--dpo-key", str(home.keys_dir / "dpo.pem"), "--yes", "--home", h)
    assert attest.code == 0, attest.out[-2000:] + attest.err[-2000:]
    notice = home.outbox_dir / f"{RID}.eml"
    assert notice.is_file() and (WHO.email or "") in notice.read_text()  # it names the requester

    clean = erasure("request", "reverify", RID, "--home", h, "--json")
    assert clean.code == 0, clean.out[-2000:] + clean.err[-2000:]
    doc = json.loads(clean.out)
    assert doc["all_clear"] is True and doc["reopened"] is False
    pred = _predicate(home.evidence_dir(RID) / doc["statement"])
    assert pred["duty_records"] == [f"outbox/{RID}.eml"]

    # A copy of the subject's words beside the notice is not a duty record: the outbox is read again.
    (home.outbox_dir / "forwarded.txt").write_text(f"fwd: {WHO.name} <{WHO.email}> asked for a refund\n")
    again = erasure("request", "reverify", RID, "--home", h, "--json")
    assert again.code != 0 or json.loads(again.out)["reopened"] is True, again.out[-2000:] + again.err[-2000:]
