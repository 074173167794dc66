"""The offline verifier: API, `python -m proof.verify`, the verifier as one file (a zipapp), `erasure pack`
commands, and the audit-log check against the store's real producer (memory/audit.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.pack import app as pack_app
from erasure.config import Home
from proof import verify
from proof.errors import PackRejected
from proof.pack import attest, write_pack
from proof.review import summary
from proof.verifier_zipapp import VERIFIER_ZIPAPP, verifier_zipapp
from tests.proof_fixtures import (
    IDENTIFIERS,
    Keys,
    audit_document,
    audit_key,
    audit_log,
    evidence_files,
    evidence_of,
    json_edit,
    make_evidence,
    make_keys,
    read_members,
    repack,
    sign_checkpoint,
)

ROOT = Path(__file__).resolve().parents[2]
DEBIAN_PYTHON = Path("/usr/bin/python3")
"""A regulator's Python: the system's, with its own `cryptography` and no virtual environment."""


def _attested(tmp: Path, keys: Keys, scenario: str = "erased") -> Path:
    pack = write_pack(make_evidence(tmp, scenario=scenario), keys.engine)
    attest(pack, keys.dpo, engine_pub=keys.engine_pub, attested_at="2024-02-02T10:00:00Z")
    return pack


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return make_keys(tmp_path / "keys")


@pytest.mark.parametrize(
    ("engine_alg", "dpo_alg"), [("ecdsa-p256", "ecdsa-p256"), ("ed25519", "ed25519"), ("ecdsa-p256", "ed25519")]
)
def test_attested_pack_verifies_with_every_key_type(tmp_path: Path, engine_alg: str, dpo_alg: str) -> None:
    keys = make_keys(tmp_path / "keys", engine_alg, dpo_alg)
    result = verify.verify_pack(_attested(tmp_path, keys), keys.engine_pem, keys.dpo_pem)
    assert result.checks == (
        "archive",
        "signature",
        "statement",
        "subjects",
        "checksums",
        "distinct-keys",
        "audit-log",
        "consistency",
    )
    assert (result.request_id, result.status, result.all_clear, result.files) == ("req-0001", "erased", True, 10)
    assert result.engine_keyid == verify.keyid_of(verify.load_public_key(keys.engine_pem, "engine"))
    assert result.dpo_keyid == verify.keyid_of(verify.load_public_key(keys.dpo_pem, "DPO"))


def test_unattested_pack_passes_only_when_the_dpo_is_not_required(tmp_path: Path, keys: Keys) -> None:
    pack = write_pack(make_evidence(tmp_path), keys.engine)
    assert verify.verify_pack(pack, keys.engine_pem, None, require_dpo=False).dpo_keyid is None
    with pytest.raises(verify.ArchiveError, match=r"missing file signatures/dpo\.intoto\.json"):
        verify.verify_pack(pack, keys.engine_pem, keys.dpo_pem)


def test_key_arguments_are_checked(tmp_path: Path, keys: Keys) -> None:
    pack = _attested(tmp_path, keys)
    with pytest.raises(verify.KeyArgumentError):
        verify.verify_pack(pack, b"not a key", keys.dpo_pem)
    with pytest.raises(verify.KeyArgumentError):  # a private key is not a trusted public key
        verify.verify_pack(pack, keys.engine.read_bytes(), keys.dpo_pem)


def test_verify_contents_checks_everything_but_origin(tmp_path: Path) -> None:
    stranger = make_keys(tmp_path / "stranger")
    pack = write_pack(make_evidence(tmp_path), stranger.engine)
    result = verify.verify_contents(pack.read_bytes())
    assert not result.signatures_verified and "signature" not in result.checks and result.status == "erased"


# --- python -m proof.verify, and erasure-verify.pyz on its own ---------------------------------


def _pin(keys: Keys, engine: Path) -> list[str]:
    """The engine key and the synthetic store's audit key, pinned."""
    return ["--engine-key", str(engine), "--audit-key", str(keys.audit_pub)]


def _run(args: list[str], cwd: Path = ROOT, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([python, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def test_module_cli_prints_ok_or_fail_with_exit_codes(tmp_path: Path, keys: Keys) -> None:
    pack = _attested(tmp_path, keys)
    ok = _run(["-m", "proof.verify", str(pack), *_pin(keys, keys.engine_pub), "--dpo-key", str(keys.dpo_pub)])
    assert (ok.returncode, ok.stdout) == (0, "OK\n")
    as_json = _run(
        ["-m", "proof.verify", str(pack), *_pin(keys, keys.engine_pub), "--dpo-key", str(keys.dpo_pub), "--json"]
    )
    doc = json.loads(as_json.stdout)
    assert as_json.returncode == 0 and doc["ok"] is True and doc["status"] == "erased"
    swapped = _run(["-m", "proof.verify", str(pack), *_pin(keys, keys.dpo_pub), "--dpo-key", str(keys.engine_pub)])
    assert swapped.returncode == 1 and swapped.stdout.startswith("FAIL: signature: ")
    bad = _run(
        ["-m", "proof.verify", str(pack), *_pin(keys, keys.dpo_pub), "--dpo-key", str(keys.engine_pub), "--json"]
    )
    assert bad.returncode == 1 and json.loads(bad.stdout)["check"] == "signature"
    usage = _run(["-m", "proof.verify", str(pack), "--engine-key", str(keys.engine_pub)])
    assert usage.returncode == 2 and "--dpo-key is required" in usage.stderr
    missing_key = _run(
        ["-m", "proof.verify", str(pack), *_pin(keys, tmp_path / "nope.pem"), "--dpo-key", str(keys.dpo_pub)]
    )
    assert missing_key.returncode == 1 and missing_key.stdout.startswith("FAIL: keys: ")


def test_module_cli_no_dpo_for_a_pack_awaiting_attestation(tmp_path: Path, keys: Keys) -> None:
    pack = write_pack(make_evidence(tmp_path), keys.engine)
    res = _run(["-m", "proof.verify", str(pack), *_pin(keys, keys.engine_pub), "--no-dpo"])
    assert (res.returncode, res.stdout) == (0, "OK\n")


@pytest.mark.parametrize(
    "python",
    [
        pytest.param(sys.executable, id="venv"),
        pytest.param(
            str(DEBIAN_PYTHON),
            id="debian",
            marks=pytest.mark.skipif(not DEBIAN_PYTHON.exists(), reason="no /usr/bin/python3 on this machine"),
        ),
    ],
)
def test_the_verifier_as_one_file_runs_alone_with_only_the_stdlib_and_cryptography(
    tmp_path: Path, keys: Keys, python: str
) -> None:
    """erasure-verify.pyz, built as `make verifier` and `erasure export` build it, copied where no
    project is on sys.path and run by an isolated interpreter (the venv's, and Debian's own with no
    venv): OK on a real pack, FAIL on a tampered one; it loads nothing of the project from outside
    itself, and carries the wire format (`wire/`) it reads."""
    built = tmp_path / "dist" / VERIFIER_ZIPAPP
    assert _run(["-m", "proof.verifier_zipapp", str(built)]).returncode == 0
    assert built.read_bytes() == verifier_zipapp()  # the same sources give the same bytes
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(built, alone / VERIFIER_ZIPAPP)
    pack = shutil.copy(_attested(tmp_path, keys), alone / "pack.tar.gz")
    args = ["-I", VERIFIER_ZIPAPP, "pack.tar.gz", *_pin(keys, keys.engine_pub), "--dpo-key", str(keys.dpo_pub)]
    res = _run(args, cwd=alone, python=python)
    assert (res.returncode, res.stdout, res.stderr) == (0, "OK\n", "")
    top, files = read_members(Path(pack))
    files["verification.json"] = json_edit(files["verification.json"], lambda d: d.update(all_clear=False))
    Path(pack).write_bytes(repack(top, files))
    res = _run(args, cwd=alone, python=python)
    assert (res.returncode, res.stdout) == (
        1,
        "FAIL: subjects: verification.json does not match its digest in signatures/engine.intoto.json\n",
    ), res.stderr
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import proof.verify; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('erasure', 'memory', 'pydantic', 'apsw', 'typer', 'rich', 'prefect') or "
        "(m.split('.')[0] in ('proof', 'wire') and "
        "not getattr(sys.modules[m], '__file__', '').startswith(sys.argv[1]))), "
        "'wire.format' in sys.modules)"
    )
    res = _run(["-I", "-c", probe, str(alone / VERIFIER_ZIPAPP)], cwd=alone, python=python)
    assert res.stdout.strip() == "[] True", res.stderr


# --- erasure pack ... -----------------------------------------------------------------------------


def test_pack_verify_command(tmp_path: Path, keys: Keys) -> None:
    pack = _attested(tmp_path, keys)
    runner = CliRunner()
    ok = runner.invoke(pack_app, ["verify", str(pack), *_pin(keys, keys.engine_pub), "--dpo-key", str(keys.dpo_pub)])
    assert (ok.exit_code, ok.output) == (0, "OK\n")
    ok_dir = runner.invoke(
        pack_app, ["verify", str(pack.parent), *_pin(keys, keys.engine_pub), "--dpo-key", str(keys.dpo_pub), "--json"]
    )
    assert ok_dir.exit_code == 0 and json.loads(ok_dir.output)["ok"] is True
    fail = runner.invoke(
        pack_app, ["verify", str(pack), *_pin(keys, keys.engine_pub), "--dpo-key", str(keys.engine_pub)]
    )
    assert fail.exit_code == 1 and fail.output.startswith("FAIL: distinct-keys: ")
    usage = runner.invoke(pack_app, ["verify", str(pack), "--engine-key", str(keys.engine_pub)])
    assert usage.exit_code == 2


def test_pack_show_command_names_no_identifier(tmp_path: Path, keys: Keys) -> None:
    pack = write_pack(make_evidence(tmp_path, scenario="exceptions"), keys.engine, forbidden=IDENTIFIERS)
    res = CliRunner().invoke(pack_app, ["show", str(pack), "--engine-key", str(keys.engine_pub)])
    assert res.exit_code == 0, res.output
    assert "erasedWithExceptions" in res.output and "fine_tune" in res.output and "model_trained" in res.output
    assert "NOT checked" not in res.output and "DPO attestation: not signed yet" in res.output
    unchecked = CliRunner().invoke(pack_app, ["show", str(pack)])
    assert "signature NOT checked" in unchecked.output
    as_json = CliRunner().invoke(pack_app, ["show", str(pack), "--json"])
    doc = json.loads(as_json.output)
    assert doc["status"] == "erasedWithExceptions" and doc["receipts"] == {"done": 3}
    assert doc["verification"]["probes"] == 17 and doc["verification"]["bystanders_after"] == 17 * 40
    for text in (res.output, as_json.output):
        assert all(ident.casefold() not in text.casefold() for ident in IDENTIFIERS)


def test_pack_build_and_attest_commands(home: Home, keys: Keys, monkeypatch: pytest.MonkeyPatch) -> None:
    evidence = home.evidence_dir("req-0001")
    evidence.mkdir(parents=True)
    for name, data in evidence_files().items():
        (evidence / name).write_bytes(data)
    home.keys_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(keys.engine, home.keys_dir / "engine.pem")
    runner = CliRunner()
    built = runner.invoke(pack_app, ["build", "req-0001", "--json"])
    assert built.exit_code == 0, built.output
    assert Path(json.loads(built.output)["pack"]) == evidence / "proof.tar.gz"
    before = (evidence / "proof.tar.gz").read_bytes()
    declined = runner.invoke(
        pack_app, ["attest", str(evidence), "--key", str(keys.dpo), "--engine-key", str(keys.engine_pub)], input="n\n"
    )
    assert declined.exit_code != 0 and (evidence / "proof.tar.gz").read_bytes() == before
    refused = runner.invoke(
        pack_app, ["attest", str(evidence), "--key", str(keys.engine), "--engine-key", str(keys.engine_pub), "--yes"]
    )
    assert refused.exit_code != 0 and "DPO must attest" in str(refused.exception)
    done = runner.invoke(
        pack_app, ["attest", str(evidence), "--key", str(keys.dpo), "--engine-key", str(keys.engine_pub)], input="y\n"
    )
    assert done.exit_code == 0, done.output
    verify.verify_pack(evidence / "proof.tar.gz", keys.engine_pem, keys.dpo_pem)


def test_summary_of_a_tampered_pack_is_refused(tmp_path: Path, keys: Keys) -> None:
    pack = write_pack(make_evidence(tmp_path), keys.engine)
    other = make_keys(tmp_path / "other")
    with pytest.raises(PackRejected, match="signature"):
        summary(pack, engine_pub=other.engine_pem)


# --- check 7 in detail, and against the store's own producer --------------------------------------


def _audit(doc: dict[str, Any]) -> verify.AuditSummary:
    return verify.check_audit_log(json.dumps(doc).encode())


def test_audit_evidence_holds_only_the_subjects_entries_and_the_redaction() -> None:
    doc = audit_document(30)
    assert [e["seq"] for e in doc["entries"]] == [5, 10, 15, 20, 25, 30]
    assert _audit(doc).redaction_request == "req-0001"
    earlier = audit_document(30, v2=True)  # the v2 format: a path of up to ceil(log2(30)) hashes in each
    assert _audit(earlier).redaction_request == "req-0001"
    assert len(doc["multiproof"]) < sum(len(e["inclusion"]) for e in earlier["entries"])
    assert len(json.dumps(doc)) < len(json.dumps(earlier)) * 0.7


def test_audit_before_and_after_at_the_same_size() -> None:
    """Nothing appended between the checkpoints: an empty consistency proof and equal roots."""
    doc = evidence_of(audit_log(12), before=12, after=12)
    assert doc["consistency"] == [] and doc["before"]["root_hash"] == doc["after"]["root_hash"]
    assert _audit(doc).redaction_request is None  # the redaction entry (12) is not after `before`
    doc["consistency"] = [doc["after"]["root_hash"]]
    with pytest.raises(verify.AuditLogError, match="consistency proof does not verify"):
        _audit(doc)


def test_audit_of_an_empty_log_verifies() -> None:
    doc = evidence_of(audit_log(4), before=0, after=0)
    doc["redacted"] = []
    assert doc["before"]["root_hash"] == hashlib.sha256(b"").hexdigest() and doc["entries"] == []
    _audit(doc)


def test_audit_from_the_empty_log_needs_no_consistency_proof() -> None:
    doc = evidence_of(audit_log(12), before=0)
    assert doc["consistency"] == []
    _audit(doc)
    doc["consistency"] = [doc["after"]["root_hash"]]
    with pytest.raises(verify.AuditLogError, match="consistency proof does not verify"):
        _audit(doc)


def test_audit_evidence_of_the_real_store_verifies(home: Home) -> None:
    from erasure.sqlite import transaction
    from memory import audit, schema

    conn = schema.create(home.store_dir)
    try:
        with transaction(conn):
            audit.append(conn, "store.created", "system", {"tenant": "default"})
            audit.append(
                conn,
                "ingest",
                "ingest-worker",
                {"items": 3},
                {"email": ("subj-alice-7731", IDENTIFIERS[1]), "name": ("subj-alice-7731", IDENTIFIERS[2])},
            )
            audit.append(conn, "ingest", "ingest-worker", {"items": 1}, {"email": ("subj-bob", "bob@example.net")})
        with transaction(conn):
            before = audit.checkpoint(conn, home.store_dir)
            result = audit.redact_subject(conn, "subj-alice-7731")
            audit.append(conn, "erasure.audit_redaction", "engine", {"request_id": "req-7", "redacted": result.count})
            after = audit.checkpoint(conn, home.store_dir)
        doc = audit.redaction_evidence(
            conn, home.store_dir, before, after, result, request_id="req-7", subject_id="subj-alice-7731"
        )
    finally:
        conn.close()
    data = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
    assert verify.check_audit_log(data).redaction_request == "req-7"
    assert [e["seq"] for e in doc["entries"]] == [2, 4]
    assert all(ident.encode() not in data for ident in IDENTIFIERS)
    doc["entries"][0]["fields"]["name"] = {"commit": "f" * 64}
    with pytest.raises(verify.AuditLogError):
        _audit(doc)


def test_audit_tree_larger_than_any_log_is_refused_by_name() -> None:
    """A self-signed checkpoint pair claiming a tree of 2**1200 leaves (equal before and after: the
    consistency proof is empty) with its one entry somewhere inside: no audit log has more than 2**63 - 1
    entries (a 64-bit seq), and a multiproof over such a tree would recurse 1,200 levels deep."""
    doc = evidence_of(audit_log(12), before=12, after=12)
    huge = 2**1200
    for which in ("before", "after"):
        doc[which].update(seq=huge, tree_size=huge)
        sign_checkpoint(doc, which, audit_key())
    doc["entries"] = doc["entries"][:1]
    doc["redacted"] = doc["redacted"][:1]
    with pytest.raises(verify.AuditLogError, match="64-bit"):
        _audit(doc)
