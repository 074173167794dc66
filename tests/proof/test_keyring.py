"""The keyring, piece by piece: the verifier accepts a signature only by a key of the right role that
was valid at the statement's signing time (a property test draws validity windows around the signing
times, judged by an oracle of plain integer arithmetic); the keyring file is strict; a rotation
closes the old key's window and opens the new one at the same whole second; signers refuse a key the
keyring retired. The end-to-end rotation through the real CLI is `test_key_rotation.py`."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure.errors import ConfigError
from proof import verify
from proof.keyring import RetiredKey, enroll, rotate
from proof.keys import generate_keypair, keyid, load_public_key
from proof.pack import attest, write_pack
from proof.verify.keyring import parse_keyring
from tests import budget
from tests.keyring_fixtures import entry, iso, keyring_file
from tests.proof_fixtures import Keys, make_evidence, make_keys

ROOT = Path(__file__).resolve().parents[2]
VERIFIED_AT = datetime(2024, 2, 1, 9, 30, tzinfo=UTC)  # the synthetic evidence's verified_at
ATTESTED_AT = datetime(2024, 2, 2, 10, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def attested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Keys, bytes]:
    """One real pack (engine-signed, DPO-attested at ATTESTED_AT) and its keys."""
    tmp = tmp_path_factory.mktemp("attested")
    keys = make_keys(tmp / "keys", dpo_algorithm="ed25519")
    pack = write_pack(make_evidence(tmp), keys.engine)
    attest(pack, keys.dpo, engine_pub=keys.engine_pub, attested_at=iso(ATTESTED_AT))
    return keys, pack.read_bytes()


def _window(base: datetime, start: int, length: int | None) -> tuple[str, str | None]:
    return iso(base + timedelta(seconds=start)), None if length is None else iso(
        base + timedelta(seconds=start + length)
    )


# --- the validity check, drawn around the boundaries -----------------------------------------------

offsets = st.integers(-3, 3)
lengths = st.one_of(st.none(), st.integers(1, 6))


@settings(max_examples=budget.examples(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(e_start=offsets, e_len=lengths, d_start=offsets, d_len=lengths, predecessor=st.booleans())
def test_a_signature_is_accepted_only_inside_its_keys_validity(
    attested: tuple[Keys, bytes],
    tmp_path_factory: pytest.TempPathFactory,
    e_start: int,
    e_len: int | None,
    d_start: int,
    d_len: int | None,
    predecessor: bool,
) -> None:
    keys, pack = attested
    entries = [
        entry("engine", keys.engine_pub, *_window(VERIFIED_AT, e_start, e_len)),
        entry("dpo", keys.dpo_pub, *_window(ATTESTED_AT, d_start, d_len)),
    ]
    if predecessor:  # an older engine key whose window ends where this one's begins
        old = generate_keypair("engine", tmp_path_factory.mktemp("old"))
        entries.append(entry("engine", old.public, iso(VERIFIED_AT - timedelta(days=30)), entries[0]["valid_from"]))
    # The oracle: the window [start, start + len) around a signing time at offset 0 holds it.
    engine_ok = e_start <= 0 and (e_len is None or e_start + e_len > 0)
    dpo_ok = d_start <= 0 and (d_len is None or d_start + d_len > 0)
    ring = keyring_file(entries)
    if engine_ok and dpo_ok:
        result = verify.verify_bytes(pack, None, None, keyring=ring, audit_pub_pem=keys.audit_pub.read_bytes())
        assert result.checks[-1] == "key-validity" and result.dpo_attestation == "verified"
    else:
        with pytest.raises(verify.SignatureError) as err:
            verify.verify_bytes(pack, None, None, keyring=ring, audit_pub_pem=keys.audit_pub.read_bytes())
        who = "engine.intoto.json" if not engine_ok else "dpo.intoto.json"
        assert who in str(err.value) and "is valid from" in str(err.value)


def test_a_key_outside_the_keyring_or_of_the_other_role_is_a_signature_failure(attested: tuple[Keys, bytes]) -> None:
    keys, pack = attested
    dpo = entry("dpo", keys.dpo_pub, "2024-01-01T00:00:00Z", None)
    with pytest.raises(verify.SignatureError, match=r"engine\.intoto\.json is signed by key .* the keyring does not"):
        verify.verify_bytes(pack, None, None, keyring=keyring_file([dpo]))
    swapped = [
        entry("dpo", keys.engine_pub, "2024-01-01T00:00:00Z", None),
        entry("engine", keys.dpo_pub, "2024-01-01T00:00:00Z", None),
    ]
    with pytest.raises(verify.SignatureError, match="the keyring's dpo key, not a engine key"):
        verify.verify_bytes(pack, None, None, keyring=keyring_file(swapped))


def test_the_keyring_file_is_strict(attested: tuple[Keys, bytes], tmp_path: Path) -> None:
    keys, pack = attested
    good = [
        entry("engine", keys.engine_pub, "2024-01-01T00:00:00Z", None),
        entry("dpo", keys.dpo_pub, "2024-01-01T00:00:00Z", None),
    ]
    assert parse_keyring(keyring_file(good)).current("engine") is not None
    other = generate_keypair("engine", tmp_path)

    def refused(data: bytes, why: str) -> None:
        with pytest.raises(verify.KeyArgumentError, match=why):
            verify.verify_bytes(pack, None, None, keyring=data)

    doc = json.loads(keyring_file(good))
    refused(json.dumps(doc).encode(), "canonical")  # the same content, not in canonical form
    refused(keyring_file([{**good[0], "keyid": "0" * 64}, good[1]]), "keyid is not the sha256")
    refused(keyring_file([{**good[0], "valid_from": "2024-01-01T00:00:00.5Z"}, good[1]]), "whole seconds")
    refused(keyring_file([{**good[0], "valid_until": "2023-01-01T00:00:00Z"}, good[1]]), "not after valid_from")
    refused(keyring_file([{**good[0], "role": "auditor"}, good[1]]), "role")
    refused(keyring_file([{**good[0], "algorithm": "ed25519"}, good[1]]), "not a ed25519 key")
    refused(keyring_file([{**good[0], "extra": 1}, good[1]]), "exactly the fields")
    refused(keyring_file([*good, entry("engine", other.public, "2024-06-01T00:00:00Z", None)]), "more than one")
    closed = {**good[0], "valid_until": "2024-07-01T00:00:00Z"}
    refused(keyring_file([good[1], closed, entry("engine", other.public, "2024-06-01T00:00:00Z", None)]), "overlap")
    earlier = {**good[0], "valid_from": "2023-01-01T00:00:00Z", "valid_until": "2023-06-01T00:00:00Z"}
    refused(keyring_file([earlier, good[0], good[1]]), "twice")
    refused(b'{"format": "erasure-keyring/v1", "keys": [], "keys": []}', "keyring")
    refused(b"\xff" * 10, "keyring")
    with pytest.raises(verify.KeyArgumentError, match="either a keyring or single"):
        verify.verify_bytes(pack, keys.engine_pem, None, keyring=keyring_file(good))


# --- the writer side --------------------------------------------------------------------------------


def test_rotation_closes_the_old_window_where_the_new_one_opens(tmp_path: Path) -> None:
    keys_dir = tmp_path / "keys"
    first = generate_keypair("engine", keys_dir)
    old_priv = (keys_dir / "engine.pem").read_bytes()
    made = datetime.fromtimestamp(int((keys_dir / "engine.pub.pem").stat().st_mtime), UTC)
    r = rotate(keys_dir, "engine")  # a key made before any keyring is adopted, valid from its file's time
    ring = parse_keyring((keys_dir / "keyring.json").read_bytes())
    old, new = ring.by_keyid(first.keyid), ring.by_keyid(r.keyid)
    assert old is not None and new is not None and r.retired_keyid == first.keyid
    assert old.valid_from == made and old.valid_until == new.valid_from and new.valid_until is None
    assert iso(new.valid_from) == r.at and new.valid_from.microsecond == 0
    assert keyid(load_public_key(keys_dir / "engine.pub.pem")) == r.keyid
    assert (keys_dir / "engine.pem").read_bytes() != old_priv  # the retired private key is gone
    assert stat.S_IMODE((keys_dir / "engine.pem").stat().st_mode) == 0o600
    assert sorted(p.name for p in keys_dir.iterdir() if not p.name.startswith(".")) == [
        "engine.pem",
        "engine.pub.pem",
        "engine.rotation.json",  # the hand-over, signed by the retired key and the new one
        "keyring.json",
    ]
    again = rotate(keys_dir, "engine", algorithm="ed25519")
    ring = parse_keyring((keys_dir / "keyring.json").read_bytes())
    assert [e.keyid for e in ring.entries] == [first.keyid, r.keyid, again.keyid]
    assert again.algorithm == "ed25519" and ring.current("engine") == ring.by_keyid(again.keyid)


def test_rotation_needs_a_key_and_refuses_a_folder_whose_key_the_keyring_retired(tmp_path: Path) -> None:
    keys_dir = tmp_path / "keys"
    with pytest.raises(ConfigError, match="no dpo key"):
        rotate(keys_dir, "dpo")
    generate_keypair("dpo", keys_dir)
    stolen = tmp_path / "copy"
    shutil.copytree(keys_dir, stolen)
    rotate(keys_dir, "dpo")
    shutil.copy(keys_dir / "keyring.json", stolen / "keyring.json")  # a folder still holding the old key
    with pytest.raises(RetiredKey, match="retired"):
        rotate(stolen, "dpo")


def test_signers_refuse_a_retired_key(tmp_path: Path) -> None:
    """The engine's writer and the DPO's attest check their key against the keyring before signing."""
    keys_dir = tmp_path / "keys"
    keys = make_keys(keys_dir)
    # Enrol both keys from before the synthetic evidence's times, then rotate them: the copies kept
    # of the old private keys are retired.
    os.utime(keys.engine_pub, (1_700_000_000, 1_700_000_000))
    os.utime(keys.dpo_pub, (1_700_000_000, 1_700_000_000))
    kept = tmp_path / "kept"
    kept.mkdir()
    shutil.copy(keys.engine, kept / "engine.pem")
    shutil.copy(keys.dpo, kept / "dpo.pem")
    rotate(keys_dir, "engine")
    rotate(keys_dir, "dpo")
    ring = (keys_dir / "keyring.json").read_bytes()
    evidence = make_evidence(tmp_path / "a")
    with pytest.raises(RetiredKey, match="was retired at"):
        write_pack(evidence, kept / "engine.pem", keyring=ring)
    # The current engine key cannot sign evidence verified before its validity began either.
    with pytest.raises(RetiredKey, match="cannot sign a statement dated 2024-02-01T09:30:00Z"):
        write_pack(evidence, keys_dir / "engine.pem")
    # A pack signed by the old key while it was valid: the retired DPO key may not attest it now.
    pack = write_pack(make_evidence(tmp_path / "b"), kept / "engine.pem")  # (no keyring beside the copy)
    with pytest.raises(RetiredKey, match="was retired at"):
        attest(pack, kept / "dpo.pem", keyring=ring)
    attest(pack, keys_dir / "dpo.pem", keyring=ring)  # the current DPO key attests it, at now
    assert verify.verify_bytes(pack.read_bytes(), None, None, keyring=ring).dpo_attestation == "verified"


def test_enrol_refuses_a_key_twice_and_an_unusable_keyring(tmp_path: Path) -> None:
    keys_dir = tmp_path / "keys"
    files = generate_keypair("engine", keys_dir)
    enroll(keys_dir, "engine", load_public_key(files.public))
    with pytest.raises(Exception, match="already holds"):
        enroll(keys_dir, "engine", load_public_key(files.public))
    (keys_dir / "keyring.json").write_text("{}")
    with pytest.raises(ConfigError, match="unusable"):
        rotate(keys_dir, "engine")


def test_the_command_line_takes_a_keyring_or_single_keys_never_both(
    attested: tuple[Keys, bytes], tmp_path: Path
) -> None:
    keys, pack = attested
    (tmp_path / "p.tar.gz").write_bytes(pack)
    ring = tmp_path / "keyring.json"
    ring.write_bytes(
        keyring_file(
            [
                entry("engine", keys.engine_pub, "2024-01-01T00:00:00Z", None),
                entry("dpo", keys.dpo_pub, "2024-01-01T00:00:00Z", None),
            ]
        )
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "proof.verify", str(tmp_path / "p.tar.gz"), *args, "--no-audit-key"],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )

    ok = run("--keyring", str(ring))
    assert ok.returncode == 0 and ok.stdout.startswith("OK"), ok.stdout + ok.stderr
    both = run("--keyring", str(ring), "--engine-key", str(keys.engine_pub))
    assert both.returncode == 2 and "not both" in both.stderr
    assert run().returncode == 2  # neither
    endless = run("--keyring", "/dev/zero")
    assert endless.returncode == 1
    assert endless.stdout.startswith("FAIL: keys: the keyring /dev/zero is not a regular file")
    missing = run("--keyring", str(tmp_path / "nope.json"))
    assert missing.returncode == 1 and missing.stdout.startswith("FAIL: keys: cannot read the keyring")


def test_a_backups_followup_signed_after_a_rotation_is_checked_with_the_key_that_signed_it(tmp_path: Path) -> None:
    """A follow-up statement is signed long after its pack, possibly by a later engine key: with the
    keyring it is checked against the key its envelope names, valid at its stated_at."""
    from proof.backups_followup import write_followup

    keys = make_keys(tmp_path / "keys")
    for pub in (keys.engine_pub, keys.dpo_pub):  # keys adopted by the keyring, valid since Nov 2023
        os.utime(pub, (1_700_000_000, 1_700_000_000))
    kept = tmp_path / "kept-engine.pem"
    shutil.copy(keys.engine, kept)
    evidence = make_evidence(tmp_path)
    pack = write_pack(evidence, kept)  # signed by the old key (nothing beside the copy to refuse it)
    attest(pack, keys.dpo, engine_pub=keys.engine_pub, attested_at=iso(ATTESTED_AT))
    rotated = rotate(keys.engine.parent, "engine")
    ring = keys.engine.parent / "keyring.json"

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "proof.verify", str(pack), "--keyring", str(ring), "--no-audit-key"],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )

    now = datetime.now(UTC) + timedelta(seconds=1)
    write_followup(evidence, keys.engine, "req-0001", [], iso(now))  # the new engine key signs it
    ok = run()
    assert ok.returncode == 0 and "backups-followup: OK" in ok.stdout, ok.stdout + ok.stderr
    shutil.copy(kept, keys.engine.parent / "old-engine.pem")  # beside the keyring, the engine refuses it
    with pytest.raises(RetiredKey, match="was retired at"):
        write_followup(evidence, keys.engine.parent / "old-engine.pem", "req-0001", [], iso(now))
    # A copy elsewhere, after its retirement: the product writes a follow-up once, so whoever holds the copy
    # puts theirs in its place.
    (evidence / "backups-followup.intoto.json").unlink()
    write_followup(evidence, kept, "req-0001", [], iso(now))
    late = run()
    assert late.returncode == 1, late.stdout
    assert late.stdout.startswith("FAIL: signature: backups-followup.intoto.json was signed at stated_at")
    assert f"until {rotated.at}" in late.stdout


@settings(max_examples=budget.examples(400), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    start=st.integers(-5, 5),
    length=st.one_of(st.none(), st.integers(1, 5)),
    second=st.integers(-6, 6),
    fraction=st.one_of(st.just(0), st.just(1), st.just(999_999), st.integers(0, 999_999)),
)
def test_validity_to_the_microsecond_agrees_with_the_recipes_whole_seconds(
    attested: tuple[Keys, bytes], start: int, length: int | None, second: int, fraction: int
) -> None:
    """Signing times carry microseconds (verified_at), windows are whole seconds: the verifier compares
    exact instants, VERIFY.md's jq drops the fraction first. Both agree with an oracle in integer
    microseconds, for times drawn around both ends of a window."""
    base = datetime(2026, 1, 1, tzinfo=UTC)
    micros = second * 1_000_000 + fraction
    parsed = parse_keyring(
        keyring_file(
            [entry("engine", attested[0].engine_pub, *_window(base, start, length))]  # [start, start + length) s
        )
    )
    (key,) = parsed.entries
    when = base + timedelta(microseconds=micros)
    oracle = start * 1_000_000 <= micros and (length is None or micros < (start + length) * 1_000_000)
    assert key.valid_at(when) == oracle
    floor = micros // 1_000_000  # the recipe: sub("\\.[0-9]+Z$"; "Z") | fromdate
    assert (start <= floor and (length is None or floor < start + length)) == oracle


def test_generate_force_keeps_the_replaced_key_in_the_keyring(tmp_path: Path) -> None:
    """`erasure keys generate --force` over a key the keyring does not hold yet: it is adopted first,
    so the replacement closes its window instead of losing it (packs it signed keep verifying)."""
    from tests.cli_fixtures import erasure

    keys_dir = tmp_path / "keys"
    assert erasure("keys", "generate", "--role", "dpo", "--out", str(keys_dir)).code == 0
    before = generate_keypair("engine", keys_dir)  # made without the CLI: not in the keyring
    res = erasure("keys", "generate", "--role", "engine", "--out", str(keys_dir), "--force", "--json")
    assert res.code == 0, res.err
    ring = parse_keyring((keys_dir / "keyring.json").read_bytes())
    old, new = ring.by_keyid(before.keyid), ring.current("engine")
    assert old is not None and new is not None and new.keyid == json.loads(res.out)["keyid"]
    assert old.valid_until == new.valid_from and iso(new.valid_from) == json.loads(res.out)["valid_from"]
