"""Issue 23 item 7: the audit checkpoint key was never pinned in practice. No command printed the
store's audit key, `export` did not ship it, VERIFY.md never used `--audit-key`. Without it,
checkpoints re-signed by another key and a fabricated two-entry log were accepted; with it, hiding one
redacted entry passed (the evidence listed fewer items than the log's own redaction entry counts) and
an `after` checkpoint dated 1970 was accepted.

Now: `erasure keys audit` prints the key, `export` ships it as audit.pub.pem, VERIFY.md passes it,
the verifier requires it (or an explicit --no-audit-key, which its OK line reports), compares the
redacted-item count with the log's redaction entry, and bounds the checkpoint times by the run
(received_at <= before <= after <= verified_at).

Each attack is a forged audit-log-redaction.json re-sealed with the real engine key (an insider
with the engine key but not the store's audit key)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from erasure.config import Home
from proof import verify
from proof.pack import write_pack
from proof.tarball import tar_gz_bytes
from tests.cli_fixtures import erasure
from tests.proof.test_attest_export import REQ, awaiting  # noqa: F401 (the fixture)
from tests.proof_fixtures import (
    Keys,
    audit_key,
    audit_log,
    evidence_files,
    evidence_of,
    leaf_hash,
    make_evidence,
    make_keys,
    multiproof,
    reseal,
    sign_checkpoint,
)

STORE_KEY = audit_key(0)
"""The store's checkpoint key in the synthetic evidence (tests.proof_fixtures)."""


def pem(key: Any) -> bytes:
    return bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return make_keys(tmp_path / "keys")


def forged(keys: Keys, doc: dict[str, Any]) -> bytes:
    """A pack whose audit evidence is `doc`, signed with the real engine key."""
    files = evidence_files()
    files["audit-log-redaction.json"] = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
    return tar_gz_bytes("req-0001", reseal(files, keys.engine))


def verdict(data: bytes, keys: Keys, audit: bytes | None) -> str:
    try:
        verify.verify_bytes(data, keys.engine_pem, None, require_dpo=False, audit_pub_pem=audit)
    except verify.PackError as exc:
        return f"FAIL: {exc.check}: {exc}"
    return "OK"


# --- the attacks -------------------------------------------------------------------------------------


def resigned_checkpoints() -> dict[str, Any]:
    """The genuine log, its checkpoints signed (and the key named) by a key the attacker made."""
    return evidence_of(audit_log(20), key=audit_key(666))


def fabricated_two_entry_log() -> dict[str, Any]:
    """A whole log made up: one entry holding a commitment, one redaction entry; a fresh key."""
    log = audit_log(4)
    two = [copy.deepcopy(log[0]), copy.deepcopy(log[3])]
    two[0]["fields"] = {"email": {"commit": "ab" * 32}}
    two[1]["fields"] = {"request_id": "req-0001", "redacted": 1}
    for i, e in enumerate(two, 1):
        e["seq"] = i
    from tests.proof_fixtures import rehash_log

    rehash_log(two)
    return evidence_of(two, key=audit_key(667), before=1, after=2)


def hidden_redacted_entry() -> dict[str, Any]:
    """The genuine evidence with one redacted entry (seq 10) and its item left out, the multiproof
    recomputed: every signature still holds, and the log's redaction entry still says 3."""
    log = audit_log(20)
    doc = evidence_of(log)
    doc["entries"] = [e for e in doc["entries"] if e["seq"] != 10]
    doc["redacted"] = [r for r in doc["redacted"] if r["seq"] != 10]
    leaves = [leaf_hash(bytes.fromhex(e["entry_hash"])) for e in log]
    doc["multiproof"] = [h.hex() for h in multiproof(leaves, {e["seq"] - 1 for e in doc["entries"]})]
    return doc


def checkpoint_dated_1970() -> dict[str, Any]:
    """The after checkpoint re-dated to 1970 and re-signed with the store's own key."""
    doc = evidence_of(audit_log(20))
    doc["after"]["at"] = "1970-01-01T00:00:00.000000Z"
    sign_checkpoint(doc, "after", STORE_KEY)
    return doc


def checkpoint_after_the_verification() -> dict[str, Any]:
    """A before checkpoint dated after the verification it precedes (verified 2024-02-01T09:30)."""
    doc = evidence_of(audit_log(20))
    doc["before"]["at"] = doc["after"]["at"] = "2024-03-01T00:00:00.000000Z"
    sign_checkpoint(doc, "before", STORE_KEY)
    sign_checkpoint(doc, "after", STORE_KEY)
    return doc


NEEDS_THE_PIN = {f.__name__: f for f in (resigned_checkpoints, fabricated_two_entry_log)}
REFUSED_ANYWAY = {
    f.__name__: f for f in (hidden_redacted_entry, checkpoint_dated_1970, checkpoint_after_the_verification)
}


def test_the_genuine_pack_passes_pinned(keys: Keys) -> None:
    assert verdict(forged(keys, evidence_of(audit_log(20))), keys, pem(STORE_KEY)) == "OK"


@pytest.mark.parametrize("attack", NEEDS_THE_PIN.values(), ids=NEEDS_THE_PIN.keys())
def test_a_forged_log_under_another_key_is_refused_when_the_key_is_pinned(
    keys: Keys, attack: Callable[[], dict[str, Any]]
) -> None:
    data = forged(keys, attack())
    got = verdict(data, keys, pem(STORE_KEY))
    assert got.startswith("FAIL: audit-log: ") and "another key" in got, got


@pytest.mark.parametrize("attack", REFUSED_ANYWAY.values(), ids=REFUSED_ANYWAY.keys())
def test_a_forged_log_under_the_store_key_is_refused(keys: Keys, attack: Callable[[], dict[str, Any]]) -> None:
    data = forged(keys, attack())
    for audit in (pem(STORE_KEY), None):
        got = verdict(data, keys, audit)
        assert got.startswith("FAIL: "), got


def test_the_command_line_verifier_requires_the_audit_key_or_says_it_was_not_pinned(keys: Keys, tmp_path: Path) -> None:
    pack = write_pack(make_evidence(tmp_path), keys.engine)
    audit_pub = tmp_path / "audit.pub.pem"
    audit_pub.write_bytes(pem(STORE_KEY))
    base = [sys.executable, "-m", "proof.verify", str(pack), "--engine-key", str(keys.engine_pub), "--no-dpo"]
    usage = subprocess.run(base, capture_output=True, text=True)
    assert usage.returncode == 2 and "--audit-key" in usage.stderr, usage
    pinned = subprocess.run([*base, "--audit-key", str(audit_pub)], capture_output=True, text=True)
    assert pinned.returncode == 0 and pinned.stdout.strip() == "OK", pinned
    loose = subprocess.run([*base, "--no-audit-key"], capture_output=True, text=True)
    assert loose.returncode == 0 and "NOT pinned" in loose.stdout, loose
    other = tmp_path / "other.pub.pem"
    other.write_bytes(pem(audit_key(5)))
    wrong = subprocess.run([*base, "--audit-key", str(other)], capture_output=True, text=True)
    assert wrong.returncode == 1 and wrong.stdout.startswith("FAIL: audit-log:"), wrong


def test_keys_audit_prints_the_store_key_and_export_ships_it_and_verify_md_pins_it(
    awaiting: Home,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    h = str(awaiting.root)
    shown = erasure("keys", "audit", "--home", h, "--json")
    assert shown.code == 0, shown
    key = json.loads(shown.out)
    store_pem = key["public_key_pem"].encode()
    doc = json.loads((awaiting.evidence_dir(REQ) / "audit-log-redaction.json").read_text())
    assert key["keyid"] == doc["checkpoint_key"]["key_id"]
    assert erasure("attest", REQ, "--dpo-key", str(awaiting.keys_dir / "dpo.pem"), "--yes", "--home", h).code == 0
    out = tmp_path / "for-regulator"
    assert erasure("export", REQ, "--to", str(out), "--home", h).code == 0
    assert (out / "audit.pub.pem").read_bytes() == store_pem
    note = (out / "VERIFY.md").read_text()
    assert "--audit-key audit.pub.pem" in note and key["keyid"] in note
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "proof.verify",
            str(out / f"{REQ}-proof.tar.gz"),
            "--engine-key",
            str(out / "engine.pub.pem"),
            "--dpo-key",
            str(out / "dpo.pub.pem"),
            "--audit-key",
            str(out / "audit.pub.pem"),
        ],
        capture_output=True,
        text=True,
    )
    assert res.stdout.split(":")[0].strip() == "OK", res
