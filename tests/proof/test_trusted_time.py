"""Trusted time (issue 27): with a timestamp authority, the engine's and the DPO's envelopes carry RFC
3161 tokens over their signatures; the offline verifier checks them against a pinned TSA root, and so
does `openssl ts -verify`. The TSA is real: OpenSSL's own behind a local HTTP endpoint
(tests/tsa_fixtures.py). Tamper fixtures are named after the attack."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from erasure.errors import ConfigError
from proof.errors import PackRejected
from proof.pack import attach_attestation, attest, signing_request_of, write_pack
from proof.tsa import TimestampAuthority, TimestampFailed
from proof.verify import ArchiveError, VerifyResult, verify_bytes, verify_pack
from proof.verify.errors import TimestampError
from proof.verify.signer import load_signing_key, read_signing_request, sign_request
from proof.verify.timestamp import check_timestamps, check_token, load_roots
from tests.proof_fixtures import Keys, json_edit, make_evidence, make_keys, read_members, repack
from tests.tsa_fixtures import TestTsa, openssl_ts_verify


@pytest.fixture(scope="module")
def tsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestTsa]:
    """The TSA the regulator pins."""
    t = TestTsa.start(tmp_path_factory.mktemp("tsa"), "pinned")
    yield t
    t.stop()


@pytest.fixture(scope="module")
def rogue_tsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestTsa]:
    """A TSA of another root: nobody pinned it."""
    t = TestTsa.start(tmp_path_factory.mktemp("rogue"), "rogue")
    yield t
    t.stop()


def _authority(t: TestTsa) -> TimestampAuthority:
    return TimestampAuthority(t.url, t.root.read_bytes())


def _sig(envelope: bytes) -> bytes:
    return base64.b64decode(json.loads(envelope)["signatures"][0]["sig"])


def _sealed(tmp_path: Path, t: TestTsa, engine_alg: str = "ecdsa-p256") -> tuple[Path, Keys]:
    keys = make_keys(tmp_path / "keys", engine_alg, "ed25519" if engine_alg == "ecdsa-p256" else "ecdsa-p256")
    pack = write_pack(make_evidence(tmp_path), keys.engine, tsa=_authority(t))
    attest(pack, keys.dpo, engine_pub=keys.engine_pub, tsa=_authority(t))
    return pack, keys


def _verify(data: bytes, keys: Keys, root: Path | None) -> VerifyResult:
    return verify_bytes(
        data,
        keys.engine_pem,
        keys.dpo_pub.read_bytes(),
        audit_pub_pem=keys.audit_pub.read_bytes(),
        tsa_root_pem=root.read_bytes() if root else None,
    )


# --- a pack with trusted time verifies, with our verifier and with openssl ------------------------


@pytest.mark.parametrize("engine_alg", ["ecdsa-p256", "ed25519"])
def test_tokens_verify_offline_with_our_verifier_and_with_openssl_ts_verify(
    tmp_path: Path, tsa: TestTsa, engine_alg: str
) -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    pack, keys = _sealed(tmp_path, tsa, engine_alg)
    result = verify_pack(
        pack,
        keys.engine_pem,
        keys.dpo_pub.read_bytes(),
        audit_pub_pem=keys.audit_pub.read_bytes(),
        tsa_root_pem=tsa.root.read_bytes(),
    )
    assert result.timestamps == "verified" and result.checks[-1] == "timestamp"
    assert result.engine_timestamp and result.dpo_timestamp
    engine_at = dt.datetime.fromisoformat(result.engine_timestamp.replace("Z", "+00:00"))
    assert before - dt.timedelta(seconds=2) <= engine_at <= dt.datetime.now(dt.UTC)
    assert result.dpo_timestamp >= result.engine_timestamp

    _, files = read_members(pack)
    manifest = json.loads(files["manifest.json"])
    assert manifest["time_source"] == "rfc3161"
    assert manifest["timestamps"] == {"engine": "signatures/engine.tsr", "dpo": "signatures/dpo.tsr"}
    assert "timestamped by a timestamp authority (RFC 3161" in files["attestation.txt"].decode()
    for role in ("engine", "dpo"):
        token, sig = files[f"signatures/{role}.tsr"], _sig(files[f"signatures/{role}.intoto.json"])
        assert openssl_ts_verify(token, sig, tsa.root, tmp_path / "oracle"), role
        assert not openssl_ts_verify(token, sig + b"x", tsa.root, tmp_path / "oracle"), role
    # the evidence dir holds the tokens beside the envelopes
    assert (pack.parent / "signatures" / "engine.tsr").read_bytes() == files["signatures/engine.tsr"]
    assert (pack.parent / "signatures" / "dpo.tsr").read_bytes() == files["signatures/dpo.tsr"]


def test_the_command_line_pins_the_tsa_root(tmp_path: Path, tsa: TestTsa, rogue_tsa: TestTsa) -> None:
    pack, keys = _sealed(tmp_path, tsa)
    base = [
        sys.executable,
        "-m",
        "proof.verify",
        str(pack),
        "--engine-key",
        str(keys.engine_pub),
        "--dpo-key",
        str(keys.dpo_pub),
        "--audit-key",
        str(keys.audit_pub),
    ]
    ok = subprocess.run([*base, "--tsa-root", str(tsa.root)], capture_output=True, text=True, timeout=60)
    assert (ok.returncode, ok.stdout.strip()) == (0, "OK"), ok.stdout + ok.stderr
    unchecked = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert unchecked.returncode == 0 and "timestamps were NOT checked: give --tsa-root" in unchecked.stdout
    other = subprocess.run([*base, "--tsa-root", str(rogue_tsa.root)], capture_output=True, text=True, timeout=60)
    assert other.returncode == 1
    assert other.stdout.startswith("FAIL: timestamp: signatures/engine.tsr:") and "unpinned TSA" in other.stdout


def test_the_tsa_is_taken_from_the_environment(tmp_path: Path, tsa: TestTsa, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ERASURE_TSA_URL", tsa.url)
    monkeypatch.setenv("ERASURE_TSA_ROOT", str(tsa.root))
    keys = make_keys(tmp_path / "keys")
    served = tsa.requests
    pack = write_pack(make_evidence(tmp_path), keys.engine)
    attest(pack, keys.dpo, engine_pub=keys.engine_pub)
    assert tsa.requests == served + 2
    assert _verify(pack.read_bytes(), keys, tsa.root).timestamps == "verified"


def test_a_rerun_keeps_the_earlier_tokens_of_identical_signatures(
    tmp_path: Path, tsa: TestTsa, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic signatures: a rerun signs the same bytes, so the earlier time is kept (no new request)."""
    pack, keys = _sealed(tmp_path, tsa)
    _, first = read_members(pack)
    served = tsa.requests
    again = write_pack(pack.parent, keys.engine, tsa=_authority(tsa))
    _, second = read_members(again)
    assert tsa.requests == served
    assert second["signatures/engine.tsr"] == first["signatures/engine.tsr"]
    assert second["signatures/dpo.tsr"] == first["signatures/dpo.tsr"]
    assert _verify(again.read_bytes(), keys, tsa.root).timestamps == "verified"


# --- without a TSA --------------------------------------------------------------------------------


def _engine_clock_pack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Keys, Path]:
    """An attested pack written with no TSA configured."""
    monkeypatch.delenv("ERASURE_TSA_URL", raising=False)
    keys = make_keys(tmp_path / "keys")
    pack = write_pack(make_evidence(tmp_path), keys.engine)
    attest(pack, keys.dpo, engine_pub=keys.engine_pub)
    return keys, pack


def test_without_a_tsa_the_pack_says_its_times_are_the_engines_own(
    tmp_path: Path, tsa: TestTsa, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys, pack = _engine_clock_pack(tmp_path, monkeypatch)
    _, files = read_members(pack)
    assert json.loads(files["manifest.json"])["time_source"] == "engine-clock"
    assert "every time in this pack is the engine's own clock" in files["attestation.txt"].decode()
    assert not [n for n in files if n.endswith(".tsr")]
    result = _verify(pack.read_bytes(), keys, None)
    assert result.timestamps == "engine clock" and result.line() == "OK"
    with pytest.raises(TimestampError, match="no timestamp token: its times are the engine's own"):
        _verify(pack.read_bytes(), keys, tsa.root)


def test_a_pack_of_trusted_time_is_not_attested_without_a_tsa(
    tmp_path: Path, tsa: TestTsa, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ERASURE_TSA_URL", raising=False)
    keys = make_keys(tmp_path / "keys")
    pack = write_pack(make_evidence(tmp_path), keys.engine, tsa=_authority(tsa))
    before = pack.read_bytes()
    with pytest.raises(ConfigError, match="ERASURE_TSA_URL"):
        attest(pack, keys.dpo, engine_pub=keys.engine_pub)
    assert pack.read_bytes() == before


def test_an_unreachable_tsa_writes_no_pack(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys")
    evidence = make_evidence(tmp_path)
    with pytest.raises(TimestampFailed, match="cannot be reached"):
        write_pack(evidence, keys.engine, tsa=TimestampAuthority("http://127.0.0.1:9/tsa", timeout=2))
    assert not (evidence / "proof.tar.gz").exists()


def test_a_url_that_is_no_tsa_writes_no_pack(tmp_path: Path) -> None:
    """An HTTP server that does not speak RFC 3161 (here: no POST at all) is refused, not trusted."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        keys = make_keys(tmp_path / "keys")
        evidence = make_evidence(tmp_path)
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        with pytest.raises(TimestampFailed, match="answered HTTP 501"):
            write_pack(evidence, keys.engine, tsa=TimestampAuthority(url, timeout=5))
        assert not (evidence / "proof.tar.gz").exists()
    finally:
        server.shutdown()
        server.server_close()


# --- attacks --------------------------------------------------------------------------------------


def _swap(pack: Path, change: dict[str, bytes]) -> bytes:
    top, files = read_members(pack)
    files.update(change)
    return repack(top, files)


def test_token_over_another_digest_is_refused(tmp_path: Path, tsa: TestTsa) -> None:
    pack, keys = _sealed(tmp_path, tsa)
    forged = tsa.reply_for(b"a signature the engine never made", tmp_path / "forged.tsr")
    with pytest.raises(TimestampError, match=r"engine\.tsr: the token covers another digest than its signature"):
        _verify(_swap(pack, {"signatures/engine.tsr": forged}), keys, tsa.root)
    _, files = read_members(pack)
    assert not openssl_ts_verify(forged, _sig(files["signatures/engine.intoto.json"]), tsa.root, tmp_path / "o")


def test_token_from_an_unpinned_tsa_is_refused(tmp_path: Path, tsa: TestTsa, rogue_tsa: TestTsa) -> None:
    pack, keys = _sealed(tmp_path, tsa)
    _, files = read_members(pack)
    sig = _sig(files["signatures/dpo.intoto.json"])
    rogue = _authority(rogue_tsa).timestamp(sig)  # a real token over the right signature, wrong TSA
    with pytest.raises(TimestampError, match=r"dpo\.tsr: .*does not chain to the pinned TSA root"):
        _verify(_swap(pack, {"signatures/dpo.tsr": rogue}), keys, tsa.root)
    assert not openssl_ts_verify(rogue, sig, tsa.root, tmp_path / "o")
    assert openssl_ts_verify(rogue, sig, rogue_tsa.root, tmp_path / "o")  # it is a good token of ITS root


def test_tokens_swapped_between_engine_and_dpo_are_refused(tmp_path: Path, tsa: TestTsa) -> None:
    pack, keys = _sealed(tmp_path, tsa)
    _, files = read_members(pack)
    engine_token, dpo_token = files["signatures/engine.tsr"], files["signatures/dpo.tsr"]
    swapped = {"signatures/engine.tsr": dpo_token, "signatures/dpo.tsr": engine_token}
    with pytest.raises(TimestampError, match=r"engine\.tsr: the token covers the OTHER envelope's signature"):
        _verify(_swap(pack, swapped), keys, tsa.root)


def test_a_stripped_token_is_refused_even_without_a_tsa_root(tmp_path: Path, tsa: TestTsa) -> None:
    """The signed manifest says the times are RFC 3161: dropping a token (to hide a late signature)
    is a missing file, whatever the verifier pins."""
    pack, keys = _sealed(tmp_path, tsa)
    top, files = read_members(pack)
    for name in ("signatures/engine.tsr", "signatures/dpo.tsr"):
        stripped = {n: b for n, b in files.items() if n != name}
        with pytest.raises(ArchiveError, match=f"missing file {name}"):
            _verify(repack(top, stripped), keys, None)


def test_a_token_added_to_a_pack_of_the_engine_clock_is_refused(
    tmp_path: Path, tsa: TestTsa, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys, pack = _engine_clock_pack(tmp_path, monkeypatch)
    _, files = read_members(pack)
    token = _authority(tsa).timestamp(_sig(files["signatures/engine.intoto.json"]))
    with pytest.raises(ArchiveError, match=r"unexpected file signatures/engine\.tsr"):
        _verify(_swap(pack, {"signatures/engine.tsr": token}), keys, tsa.root)


def test_a_signature_timestamped_before_the_verification_it_claims_is_refused(tmp_path: Path, tsa: TestTsa) -> None:
    """An engine whose clock runs a day fast claims a verification after the TSA saw its signature:
    the pack is never written (its own check runs the verifier with the TSA root)."""
    keys = make_keys(tmp_path / "keys")
    evidence = make_evidence(tmp_path)
    tomorrow = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    path = evidence / "verification.json"
    path.write_bytes(json_edit(path.read_bytes(), lambda d: d.update(verified_at=tomorrow)))
    with pytest.raises(PackRejected, match="before the verification it signs"):
        write_pack(evidence, keys.engine, tsa=_authority(tsa))


def test_a_token_from_the_future_is_refused(tmp_path: Path, tsa: TestTsa) -> None:
    pack, _ = _sealed(tmp_path, tsa)
    _, files = read_members(pack)
    manifest = json.loads(files["manifest.json"])
    engine = json.loads(base64.b64decode(json.loads(files["signatures/engine.intoto.json"])["payload"]))
    yesterday = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    with pytest.raises(TimestampError, match="is in the future"):
        check_timestamps(files, manifest, load_roots(tsa.root.read_bytes()), engine["predicate"], None, now=yesterday)


def test_the_client_refuses_a_reply_from_an_unpinned_tsa(tmp_path: Path, tsa: TestTsa, rogue_tsa: TestTsa) -> None:
    """ERASURE_TSA_ROOT pins the TSA for the writer too: a TSA URL pointing elsewhere writes nothing."""
    wrong = TimestampAuthority(rogue_tsa.url, tsa.root.read_bytes())
    with pytest.raises(TimestampFailed, match="does not chain to the pinned TSA root"):
        wrong.timestamp(b"signature")


def test_tsa_roots_of_a_bundle_and_an_intermediate_ca(tmp_path: Path, tsa: TestTsa) -> None:
    """A TSA under an intermediate CA (carried in the token) verifies against its root, in a bundle."""
    deep = TestTsa.start(tmp_path / "deep", "deep", intermediate=True, rsa_key=True)
    try:
        token = _authority(deep).timestamp(b"sig")
        bundle = tsa.root.read_bytes() + deep.root.read_bytes()
        assert check_token(token, b"sig", load_roots(bundle), "t").tsa.endswith("CN=deep TSA")
        with pytest.raises(TimestampError, match="unpinned TSA"):
            check_token(token, b"sig", load_roots(tsa.root.read_bytes()), "t")
        assert openssl_ts_verify(token, b"sig", deep.root, tmp_path / "o")
    finally:
        deep.stop()


def test_the_token_file_digest_is_not_what_is_stamped(tmp_path: Path, tsa: TestTsa) -> None:
    """The imprint is sha256 of the raw signature bytes, not of the envelope file or of its base64."""
    pack, keys = _sealed(tmp_path, tsa)
    _, files = read_members(pack)
    env = files["signatures/engine.intoto.json"]
    wrong = _authority(tsa).timestamp(json.loads(env)["signatures"][0]["sig"].encode())
    with pytest.raises(TimestampError, match="another digest"):
        _verify(_swap(pack, {"signatures/engine.tsr": wrong}), keys, tsa.root)
    assert hashlib.sha256(_sig(env)).hexdigest() != hashlib.sha256(env).hexdigest()


def test_erasure_pack_verify_takes_the_tsa_root(tmp_path: Path, tsa: TestTsa, rogue_tsa: TestTsa) -> None:
    pack, keys = _sealed(tmp_path, tsa)
    args = ["pack", "verify", str(pack), "--engine-key", str(keys.engine_pub), "--dpo-key", str(keys.dpo_pub)]
    args += ["--audit-key", str(keys.audit_pub), "--json"]
    ok = CliRunner().invoke(app, [*args, "--tsa-root", str(tsa.root)])
    assert ok.exit_code == 0 and json.loads(ok.output)["timestamps"] == "verified", ok.output
    bad = CliRunner().invoke(app, [*args, "--tsa-root", str(rogue_tsa.root)])
    assert bad.exit_code == 1 and json.loads(bad.output)["check"] == "timestamp", bad.output


def test_an_envelope_signed_on_the_dpos_machine_is_timestamped_when_attached(
    tmp_path: Path, tsa: TestTsa, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The standalone signer never talks to a TSA: the run (or `erasure attest --envelope`) stamps the
    DPO's signature when it attaches it, so the token's time bounds when it was accepted."""
    monkeypatch.delenv("ERASURE_TSA_URL", raising=False)
    keys = make_keys(tmp_path / "keys")
    pack = write_pack(make_evidence(tmp_path), keys.engine, tsa=_authority(tsa))
    request = read_signing_request(signing_request_of(pack, keys.engine_pub))
    envelope = sign_request(load_signing_key(keys.dpo.read_bytes(), None), request).decode()
    with pytest.raises(ConfigError, match="ERASURE_TSA_URL"):
        attach_attestation(pack, envelope, engine_pub=keys.engine_pub, dpo_pub=keys.dpo_pub)
    attach_attestation(pack, envelope, engine_pub=keys.engine_pub, dpo_pub=keys.dpo_pub, tsa=_authority(tsa))
    result = _verify(pack.read_bytes(), keys, tsa.root)
    assert result.timestamps == "verified" and result.dpo_timestamp is not None
    assert (pack.parent / "signatures" / "dpo.tsr").is_file()
