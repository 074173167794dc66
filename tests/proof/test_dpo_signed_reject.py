"""A reject needs the DPO (issue 34 finding 5), and a wrong envelope is refused naming why (issue 35).

A rejection is the DPO's signed statement (`service.dpo_answers`): a DSSE envelope of payloadType
`application/vnd.erasure.rejection+json` over the canonical JSON of request_id, pack_sha256, reason and
rejected_at, signed by the pinned DPO key. Built here with `proof.dsse`, as the DPO's signer does. Each
attack leaves the request awaiting attestation and the pack unchanged; the genuine rejection, or the
genuine attestation, still works afterwards."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from erasure.config import Home
from erasure.errors import InputError
from proof.dsse import sign_envelope
from proof.keys import generate_keypair, load_private_key
from proof.verify.signer import load_signing_key, read_signing_request, sign_request
from service import signoff
from service.dpo_answers import REJECTION_TYPE, WrongEnvelope
from tests.cli_fixtures import erasure
from tests.proof.test_attest_export import REQ, _state, awaiting  # noqa: F401  (the fixture)
from tests.proof.test_dpo_signoff import dpo_machine  # noqa: F401  (the fixture)
from wire.format import canonical_json


def _pack(h: Home) -> Path:
    return h.evidence_dir(REQ) / "proof.tar.gz"


def rejection(
    key: Path,
    request_id: str,
    pack_sha256: str,
    *,
    reason: str = "scope_wrong",
    at: datetime | None = None,
    payload_type: str = REJECTION_TYPE,
) -> str:
    """The DPO's signed rejection, one line, as `erasure-dpo-sign.pyz --reject REASON` prints it."""
    when = (at or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = {"request_id": request_id, "pack_sha256": pack_sha256, "reason": reason, "rejected_at": when}
    return json.dumps(sign_envelope(canonical_json(doc), load_private_key(key), payload_type))


def _sha(h: Home) -> str:
    return hashlib.sha256(_pack(h).read_bytes()).hexdigest()


def _unchanged(h: Home, answer: str, why: str, *, reject: bool = True) -> None:
    before = _pack(h).read_bytes()
    with pytest.raises(InputError, match=why):
        if reject:
            signoff.reject(h, REQ, answer)
        else:
            signoff.seal(h, REQ, envelope=answer)
    assert _pack(h).read_bytes() == before
    assert _state(h) == "awaiting attestation"
    assert not (h.outbox_dir / f"{REQ}.eml").exists()


def test_an_unsigned_reject_changes_nothing(awaiting: Home, dpo_machine: Path) -> None:  # noqa: F811
    """The attack: whoever holds the API credential resumes the run with {"decision": "reject"}."""
    _unchanged(awaiting, "", "not the one-line envelope")
    done = erasure("attest", REQ, "--reject", "scope_wrong", "--home", str(awaiting.root))
    assert done.code == 2 and _state(awaiting) == "awaiting attestation"


def test_a_rejection_signed_by_a_key_nobody_pinned(awaiting: Home, dpo_machine: Path, tmp_path: Path) -> None:  # noqa: F811
    generate_keypair("dpo", tmp_path / "mallory")
    _unchanged(awaiting, rejection(tmp_path / "mallory" / "dpo.pem", REQ, _sha(awaiting)), "not signed by the pinned")


def test_a_rejection_made_for_another_request(awaiting: Home, dpo_machine: Path) -> None:  # noqa: F811
    _unchanged(
        awaiting, rejection(dpo_machine / "dpo.pem", "req-other-9", _sha(awaiting)), "made for request req-other-9"
    )


def test_a_rejection_replayed_from_another_pack(awaiting: Home, dpo_machine: Path) -> None:  # noqa: F811
    _unchanged(awaiting, rejection(dpo_machine / "dpo.pem", REQ, "ab" * 32), "another pack")


def test_a_rejection_dated_in_the_future(awaiting: Home, dpo_machine: Path) -> None:  # noqa: F811
    later = datetime.now(UTC) + timedelta(days=2)
    _unchanged(awaiting, rejection(dpo_machine / "dpo.pem", REQ, _sha(awaiting), at=later), "rejected_at")


def test_an_attestation_statement_relabelled_as_a_rejection(awaiting: Home, dpo_machine: Path) -> None:  # noqa: F811
    """The DPO's genuine attestation's payload is not a rejection, whatever its envelope is called."""
    request = read_signing_request(signoff.signing_request(awaiting, REQ))
    payload = json.loads(sign_request(load_signing_key((dpo_machine / "dpo.pem").read_bytes(), None), request))
    import base64

    body = base64.b64decode(payload["payload"])
    forged = json.dumps(sign_envelope(body, load_private_key(dpo_machine / "dpo.pem"), REJECTION_TYPE))
    _unchanged(awaiting, forged, "exactly")


def test_the_signed_rejection_rejects_and_is_kept(awaiting: Home, dpo_machine: Path) -> None:  # noqa: F811
    before = _pack(awaiting).read_bytes()
    line = rejection(dpo_machine / "dpo.pem", REQ, _sha(awaiting), reason="the backups tier is missing")
    done = erasure("attest", REQ, "--reject", line, "--home", str(awaiting.root), "--json")
    assert done.code == 0, done.err
    assert json.loads(done.out)["rejected"] == "other"  # a free-text reason is logged as a code only
    assert _state(awaiting) == "rejected"
    assert _pack(awaiting).read_bytes() == before and not (awaiting.outbox_dir / f"{REQ}.eml").exists()
    kept = list(awaiting.evidence_dir(REQ).glob("dpo-rejection-*.dsse.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["payloadType"] == REJECTION_TYPE


def test_the_kit_signers_rejection_is_accepted(awaiting: Home, dpo_machine: Path, tmp_path: Path) -> None:  # noqa: F811
    """The rejection the standalone signer prints (`--reject`, run by Debian's own python3 where there is
    one) names the pack as the signer can: by its name, the sha256 of the engine's signed statement."""
    from proof.verifier_zipapp import dpo_signer_zipapp

    kit = tmp_path / "erasure-dpo-sign.pyz"
    kit.write_bytes(dpo_signer_zipapp())
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    request = signoff.signing_request(awaiting, REQ)
    done = subprocess.run(
        [python, str(kit), "--key", str(dpo_machine / "dpo.pem"), "--reject", "scope_wrong", "--yes", "-"],
        input=request,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip().splitlines()[-1]
    signoff.reject(awaiting, REQ, line)
    assert _state(awaiting) == "rejected"


def test_an_attestation_made_for_another_request_names_it(awaiting: Home, dpo_machine: Path) -> None:  # noqa: F811
    """Issue 35: another request's envelope is refused as such, not with a message about time."""
    request = read_signing_request(signoff.signing_request(awaiting, REQ))
    request["request_id"] = "req-ann-2"
    key = load_signing_key((dpo_machine / "dpo.pem").read_bytes(), None)
    _unchanged(awaiting, sign_request(key, request).decode(), "made for request req-ann-2", reject=False)


def test_an_attestation_made_for_another_pack_says_so(awaiting: Home, dpo_machine: Path) -> None:  # noqa: F811
    request = read_signing_request(signoff.signing_request(awaiting, REQ))
    request["subject"][0]["digest"]["sha256"] = "0" * 64
    key = load_signing_key((dpo_machine / "dpo.pem").read_bytes(), None)
    with pytest.raises(WrongEnvelope, match="another pack"):
        signoff.seal(awaiting, REQ, envelope=sign_request(key, request).decode())
    assert _state(awaiting) == "awaiting attestation"


def test_a_rejection_pasted_as_an_attestation(awaiting: Home, dpo_machine: Path) -> None:  # noqa: F811
    _unchanged(
        awaiting, rejection(dpo_machine / "dpo.pem", REQ, _sha(awaiting)), "choose decision reject", reject=False
    )


def test_attest_prints_the_signing_request(awaiting: Home, dpo_machine: Path) -> None:  # noqa: F811
    done = erasure("attest", REQ, "--signing-request", "--home", str(awaiting.root))
    assert done.code == 0, done.err
    assert done.out.strip() == signoff.signing_request(awaiting, REQ)
    assert read_signing_request(done.out)["request_id"] == REQ
