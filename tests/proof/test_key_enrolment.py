"""Key enrolment is proven (issue 34, finding 8): `erasure keys enrol` takes a new key only with a
rotation statement signed by the role's current key (the hand-over) and by the new key (proof of
possession); the first key of a role is trusted by a separate command, `erasure keys trust`, with its
fingerprint typed in. Through the real CLI, on real key folders: the DPO's machine and the home."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from erasure.config import Home
from proof.keys import generate_keypair, keyid, load_private_key, load_public_key
from proof.rotation import rotation_statement
from tests.cli_fixtures import erasure


def _json(*args: str) -> dict[str, object]:
    res = erasure(*args, "--json")
    assert res.code == 0, res.out + res.err
    doc = json.loads(res.out)
    assert isinstance(doc, dict)
    return doc


def _pinned(home: Home) -> tuple[bytes, bytes]:
    return (home.keys_dir / "dpo.pub.pem").read_bytes(), (home.keys_dir / "keyring.json").read_bytes()


@pytest.fixture
def dpo(home: Home, tmp_path: Path) -> Path:
    """The DPO's own machine, whose first key the home trusted by its fingerprint."""
    machine = tmp_path / "dpo-machine"
    made = _json("keys", "generate", "--role", "dpo", "--out", str(machine))
    _json("keys", "generate", "--role", "engine", "--home", str(home.root))
    trusted = _json(
        "keys", "trust", "--role", "dpo", str(machine / "dpo.pub.pem"), "--fingerprint", str(made["keyid"]),
        "--home", str(home.root),
    )  # fmt: skip
    assert trusted["keyid"] == made["keyid"] and "no earlier key vouches" in str(trusted["trusted"])
    return machine


def test_a_genuine_rotation_is_enrolled(home: Home, dpo: Path) -> None:
    rotated = _json("keys", "rotate", "--role", "dpo", "--keys-dir", str(dpo))
    enrolled = _json("keys", "enrol", "--role", "dpo", str(dpo / "dpo.pub.pem"), "--home", str(home.root))
    assert enrolled["keyid"] == rotated["keyid"]
    assert (home.keys_dir / "dpo.pub.pem").read_bytes() == (dpo / "dpo.pub.pem").read_bytes()


def test_a_spoofed_my_new_key_message_is_refused(home: Home, dpo: Path, tmp_path: Path) -> None:
    """An attacker's public key, sent as "my new key" with no rotation statement."""
    before = _pinned(home)
    spoof = generate_keypair("dpo", tmp_path / "attacker")
    res = erasure("keys", "enrol", "--role", "dpo", str(spoof.public), "--home", str(home.root))
    assert res.code != 0 and "no rotation statement" in res.err, res.err
    assert _pinned(home) == before


def test_a_rotation_statement_the_attacker_signed_with_their_own_keys_is_refused(
    home: Home, dpo: Path, tmp_path: Path
) -> None:
    before = _pinned(home)
    old, new = generate_keypair("dpo", tmp_path / "a1"), generate_keypair("dpo", tmp_path / "a2")
    forged = rotation_statement(
        "dpo", load_private_key(old.private), load_private_key(new.private), "2026-01-01T00:00:00Z"
    )
    (tmp_path / "a2" / "dpo.rotation.json").write_bytes(forged)
    res = erasure("keys", "enrol", "--role", "dpo", str(new.public), "--home", str(home.root))
    assert res.code != 0 and "no signature by the given current dpo key" in res.err, res.err
    assert _pinned(home) == before


def test_a_hand_over_to_a_key_nobody_proved_to_hold_is_refused(home: Home, dpo: Path, tmp_path: Path) -> None:
    """The DPO's key signed a hand-over to the attacker's PUBLIC key (tricked into it), but the new key's
    own signature is by another key: no proof of possession."""
    before = _pinned(home)
    victim = generate_keypair("dpo", tmp_path / "victim-new")
    other = generate_keypair("dpo", tmp_path / "other")
    statement = json.loads(
        rotation_statement(
            "dpo", load_private_key(dpo / "dpo.pem"), load_private_key(victim.private), "2026-01-01T00:00:00Z"
        )
    )
    wrong = json.loads(
        rotation_statement(
            "dpo", load_private_key(dpo / "dpo.pem"), load_private_key(other.private), "2026-01-01T00:00:00Z"
        )
    )
    statement["by_new_key"] = wrong["by_new_key"]
    proof = tmp_path / "proof.json"
    proof.write_text(json.dumps(statement))
    res = erasure(
        "keys", "enrol", "--role", "dpo", str(victim.public), "--rotation", str(proof), "--home", str(home.root)
    )
    assert res.code != 0 and "no signature by the given new key" in res.err, res.err
    assert _pinned(home) == before


def test_an_engine_rotation_statement_does_not_enrol_a_dpo_key(home: Home, dpo: Path, tmp_path: Path) -> None:
    before = _pinned(home)
    engine_new = generate_keypair("engine", tmp_path / "e")
    statement = rotation_statement(
        "engine", load_private_key(dpo / "dpo.pem"), load_private_key(engine_new.private), "2026-01-01T00:00:00Z"
    )
    (tmp_path / "e" / "dpo.rotation.json").write_bytes(statement)
    res = erasure("keys", "enrol", "--role", "dpo", str(engine_new.public), "--home", str(home.root))
    assert res.code != 0 and "for the 'engine' role" in res.err, res.err
    assert _pinned(home) == before


def test_trust_needs_the_right_fingerprint_and_no_current_key(home: Home, dpo: Path, tmp_path: Path) -> None:
    before = _pinned(home)
    spoof = generate_keypair("dpo", tmp_path / "attacker")
    wrong = erasure(
        "keys", "trust", "--role", "dpo", str(spoof.public), "--fingerprint", "0" * 64, "--home", str(home.root)
    )
    assert wrong.code != 0 and "not the fingerprint given" in wrong.err, wrong.err
    again = erasure(
        "keys", "trust", "--role", "dpo", str(spoof.public), "--fingerprint", keyid(load_public_key(spoof.public)),
        "--home", str(home.root),
    )  # fmt: skip
    assert again.code != 0 and "already has a current key" in again.err, again.err
    assert _pinned(home) == before


def test_a_rotation_statement_copied_from_an_earlier_rotation_is_refused(home: Home, dpo: Path, tmp_path: Path) -> None:
    """The DPO rotated twice; the first rotation's statement does not enrol a key the current one never
    handed over to (a replay of an old hand-over)."""
    _json("keys", "rotate", "--role", "dpo", "--keys-dir", str(dpo))
    first = tmp_path / "first"
    shutil.copytree(dpo, first)
    _json("keys", "enrol", "--role", "dpo", str(dpo / "dpo.pub.pem"), "--home", str(home.root))
    _json("keys", "rotate", "--role", "dpo", "--keys-dir", str(dpo))
    before = _pinned(home)
    res = erasure(
        "keys", "enrol", "--role", "dpo", str(dpo / "dpo.pub.pem"), "--rotation", str(first / "dpo.rotation.json"),
        "--home", str(home.root),
    )  # fmt: skip
    assert res.code != 0 and "not proven" in res.err, res.err
    assert _pinned(home) == before
