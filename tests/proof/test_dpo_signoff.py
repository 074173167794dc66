"""The DPO signs on their own machine with the standalone signer (`erasure-dpo-sign.pyz` from `erasure
export --dpo-kit`), and only their signature comes back: `erasure attest --envelope` (and the run's
sign-off form, tests/flows/test_dpo_signoff_flow.py) checks it against the pinned keys/dpo.pub.pem, seals,
notifies; a rejection must be signed too (tests/proof/test_dpo_signed_reject.py). Attacks on the
envelope are refused and change nothing: each is a fixture named after it."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure.config import PROJECT_ROOT, Home
from erasure.errors import InputError
from proof.errors import PackRejected
from proof.keys import generate_keypair
from proof.pack import attach_attestation
from proof.verify.signer import load_signing_key, read_signing_request, sign_request
from service import signoff
from tests import budget
from tests.cli_fixtures import erasure
from tests.proof.test_attest_export import REQ, _state, awaiting  # noqa: F401  (the fixture)

Envelope = Callable[..., str]


@pytest.fixture
def dpo_machine(awaiting: Home, tmp_path: Path) -> Path:  # noqa: F811
    """The DPO's own folder: their key pair and the kit; only dpo.pub.pem is pinned in the home."""
    (awaiting.keys_dir / "dpo.pem").unlink()
    (awaiting.keys_dir / "dpo.pub.pem").unlink()
    machine = tmp_path / "dpo-machine"
    generate_keypair("dpo", machine)
    shutil.copyfile(machine / "dpo.pub.pem", awaiting.keys_dir / "dpo.pub.pem")
    done = erasure("export", "--dpo-kit", "--to", str(machine / "kit"), "--home", str(awaiting.root), "--json")
    assert done.code == 0, done.err
    return machine


def signer(machine: Path, request: str, *, key: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The kit's signer, as the DPO runs it: `python erasure-dpo-sign.pyz --key dpo.pem REQUEST --yes`."""
    return subprocess.run(
        [
            sys.executable,
            str(machine / "kit" / "erasure-dpo-sign.pyz"),
            "--key",
            str(key or machine / "dpo.pem"),
            "--yes",
            request,
        ],
        cwd=machine,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def kit_verify(h: Home, machine: Path, rid: str) -> subprocess.CompletedProcess[str]:
    """The kit's verifier over the request's pack, with the engine's and the DPO's public keys."""
    return subprocess.run(
        [
            sys.executable,
            str(machine / "kit" / "erasure-verify.pyz"),
            str(h.evidence_dir(rid) / "proof.tar.gz"),
            "--engine-key",
            str(h.keys_dir / "engine.pub.pem"),
            "--dpo-key",
            str(machine / "dpo.pub.pem"),
            "--no-audit-key",
        ],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        check=False,
    )


def _pack(h: Home) -> Path:
    return h.evidence_dir(REQ) / "proof.tar.gz"


def test_the_kit_signs_and_attest_seals_with_only_the_signature(awaiting: Home, dpo_machine: Path) -> None:  # noqa: F811
    assert sorted(p.name for p in (dpo_machine / "kit").iterdir()) == [
        "DPO-SIGN.md",
        "audit.pub.pem",
        "engine.pub.pem",
        "erasure-dpo-sign.pyz",
        "erasure-verify.pyz",
    ]
    line = signer(dpo_machine, signoff.signing_request(awaiting, REQ))
    assert line.returncode == 0, line.stderr
    assert REQ in line.stderr and "PRIVATE" not in line.stdout
    done = erasure("attest", REQ, "--envelope", line.stdout.strip(), "--yes", "--home", str(awaiting.root))
    assert done.code == 0, done.err
    assert _state(awaiting) == "notified"
    verified = kit_verify(awaiting, dpo_machine, REQ)
    assert verified.returncode == 0 and verified.stdout.startswith("OK"), verified.stdout + verified.stderr


# --- attacks on the envelope: each refused, the pack and the request unchanged ---------------------


def _refused(h: Home, envelope: str) -> None:
    before = _pack(h).read_bytes()
    with pytest.raises((PackRejected, InputError)):
        signoff.seal(h, REQ, envelope=envelope)
    assert _pack(h).read_bytes() == before
    assert _state(h) == "awaiting attestation"
    assert not (h.outbox_dir / f"{REQ}.eml").exists()


def test_an_envelope_signed_by_a_key_nobody_pinned(awaiting: Home, dpo_machine: Path, tmp_path: Path) -> None:  # noqa: F811
    generate_keypair("dpo", tmp_path / "mallory")
    line = signer(dpo_machine, signoff.signing_request(awaiting, REQ), key=tmp_path / "mallory" / "dpo.pem")
    assert line.returncode == 0, line.stderr
    _refused(awaiting, line.stdout)


def test_an_envelope_signed_for_another_status(awaiting: Home, dpo_machine: Path) -> None:  # noqa: F811
    request = read_signing_request(signoff.signing_request(awaiting, REQ))
    request["status"] = "erasedWithExceptions" if request["status"] == "erased" else "erased"
    key = load_signing_key((dpo_machine / "dpo.pem").read_bytes(), None)
    _refused(awaiting, sign_request(key, request).decode())


def test_an_envelope_antedated_before_the_verification(awaiting: Home, dpo_machine: Path) -> None:  # noqa: F811
    request = read_signing_request(signoff.signing_request(awaiting, REQ))
    key = load_signing_key((dpo_machine / "dpo.pem").read_bytes(), None)
    _refused(awaiting, sign_request(key, request, attested_at="2001-01-01T00:00:00Z").decode())


def test_an_envelope_replayed_from_another_pack(awaiting: Home, dpo_machine: Path) -> None:  # noqa: F811
    request = read_signing_request(signoff.signing_request(awaiting, REQ))
    request["subject"][0]["digest"]["sha256"] = "0" * 64  # the same request id, a pack with other bytes
    key = load_signing_key((dpo_machine / "dpo.pem").read_bytes(), None)
    _refused(awaiting, sign_request(key, request).decode())


def test_an_envelope_that_is_not_one(awaiting: Home, dpo_machine: Path) -> None:  # noqa: F811
    _refused(awaiting, "I, the DPO, approve.")


@settings(max_examples=budget.examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_change_to_a_genuine_envelope_is_refused(awaiting: Home, dpo_machine: Path, data: st.DataObject) -> None:  # noqa: F811
    """One byte of the signed statement or of the signature changed, anywhere: never attached. The
    oracle: the envelope differs from the genuine one (compared as bytes, apart from the code)."""
    request = read_signing_request(signoff.signing_request(awaiting, REQ))
    key = load_signing_key((dpo_machine / "dpo.pem").read_bytes(), None)
    genuine = json.loads(sign_request(key, request))
    field = data.draw(st.sampled_from(["payload", "sig"]))
    raw = bytearray(base64.b64decode(genuine["payload"] if field == "payload" else genuine["signatures"][0]["sig"]))
    at = data.draw(st.integers(0, 10**6)) % len(raw)  # sizes vary (DER signatures, the signing time)
    raw[at] ^= data.draw(st.integers(1, 255))
    forged = json.loads(json.dumps(genuine))
    if field == "payload":
        forged["payload"] = base64.b64encode(bytes(raw)).decode()
    else:
        forged["signatures"][0]["sig"] = base64.b64encode(bytes(raw)).decode()
    assert forged != genuine
    before = _pack(awaiting).read_bytes()
    with pytest.raises((PackRejected, InputError)):
        attach_attestation(
            _pack(awaiting),
            json.dumps(forged),
            engine_pub=awaiting.keys_dir / "engine.pub.pem",
            dpo_pub=awaiting.keys_dir / "dpo.pub.pem",
        )
    assert _pack(awaiting).read_bytes() == before
