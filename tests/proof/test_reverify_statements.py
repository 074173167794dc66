"""The offline verifier's check 9 (`--reverify FILE...`) against named attacks, on a real pack: a real
store erased by the real cascade, probed, and packed by the same functions the flows run (no Prefect
needed), and statements signed by `proof.reverification` as a re-verification signs them.

Each attack is a statement a forger or a careless operator could hand a regulator beside the pack:
one for another pack, one signed by a key that is not the pinned engine key, one whose verdict was
edited after signing, one that found the subject again, two with the same number.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from erasure.config import PROJECT_ROOT, Home
from proof.dsse import sign_envelope
from proof.keys import keyid, load_private_key
from proof.reverification import reverification_statement, write_reverification
from tests.cascade_fixtures import SUBJECT
from tests.proof.test_attest_export import REQ, awaiting  # noqa: F401  (the fixture)
from wire.format import envelope_bytes


@pytest.fixture
def packed(awaiting: Home) -> tuple[Home, Path, str]:  # noqa: F811
    """An erased request's engine-signed pack, and its name (from the verifier's own --json)."""
    home = awaiting
    pack = home.evidence_dir(REQ) / "proof.tar.gz"
    out = _verify(home, pack, "--json")
    assert out.returncode == 0, out.stdout
    return home, pack, json.loads(out.stdout)["pack_name"]


def _verify(home: Home, pack: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "proof.verify", str(pack), "--engine-key", str(home.keys_dir / "engine.pub.pem")]
    return subprocess.run(
        [*cmd, "--no-dpo", "--no-audit-key", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _predicate(pack_name: str, **changes: Any) -> dict[str, Any]:
    return {
        "request_id": REQ,
        "pack_name": pack_name,
        "reverified_at": "2026-12-01T00:00:00Z",
        "all_clear": True,
        "residue": {"bytes": 0},
        "residue_tiers": [],
        "changed_files": {"compared": True, "added": [], "removed": [], "modified": ["store/memory.db"]},
        **changes,
    }


def _sign(home: Home, pack_name: str, **changes: Any) -> Path:
    return write_reverification(
        home.evidence_dir(REQ), home.keys_dir / "engine.pem", _predicate(pack_name, **changes), SUBJECT.identifiers()
    )


def test_a_statement_signed_by_the_engine_over_this_pack_verifies(packed: tuple[Home, Path, str]) -> None:
    home, pack, name = packed
    got = _verify(home, pack, "--reverify", str(_sign(home, name)), str(_sign(home, name)))
    assert got.returncode == 0, got.stdout
    assert "re-verification 1 at 2026-12-01T00:00:00Z: all clear (0 added, 0 removed, 1 modified" in got.stdout
    assert "re-verification 2 at" in got.stdout
    js = _verify(home, pack, "--json", "--reverify", str(home.evidence_dir(REQ) / "reverify-1.intoto.json"))
    assert [r["sequence"] for r in json.loads(js.stdout)["reverifications"]] == [1]


def test_a_statement_for_another_pack_is_refused(packed: tuple[Home, Path, str]) -> None:
    home, pack, _name = packed
    got = _verify(home, pack, "--reverify", str(_sign(home, "0" * 64)))
    assert got.returncode == 1 and got.stdout.startswith("FAIL: reverify:") and "not this pack" in got.stdout


def test_a_statement_for_another_request_is_refused(packed: tuple[Home, Path, str]) -> None:
    home, pack, name = packed
    got = _verify(home, pack, "--reverify", str(_sign(home, name, request_id="req-someone-else")))
    assert got.returncode == 1 and "for another pack or request" in got.stdout


def test_a_statement_signed_by_another_key_is_refused(packed: tuple[Home, Path, str], tmp_path: Path) -> None:
    home, pack, name = packed
    dpo = load_private_key(home.keys_dir / "dpo.pem")
    forged = tmp_path / "reverify-1.intoto.json"
    payload = reverification_statement(name, {**_predicate(name), "sequence": 1, "engine_keyid": keyid(dpo)})
    forged.write_bytes(envelope_bytes(sign_envelope(payload, dpo)))
    got = _verify(home, pack, "--reverify", str(forged))
    assert got.returncode == 1 and "no signature by the given engine key" in got.stdout


def test_a_verdict_edited_after_signing_is_refused(packed: tuple[Home, Path, str]) -> None:
    home, pack, name = packed
    path = _sign(home, name, all_clear=False, residue={"episodic": 2}, residue_tiers=["episodic"])
    env = json.loads(path.read_bytes())
    body = json.loads(base64.b64decode(env["payload"]))
    body["predicate"].update(all_clear=True, residue={}, residue_tiers=[])  # "it was clear after all"
    env["payload"] = base64.b64encode(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).decode()
    path.write_bytes(envelope_bytes(env))
    got = _verify(home, pack, "--reverify", str(path))
    assert got.returncode == 1 and "FAIL: reverify:" in got.stdout and "signature does not verify" in got.stdout


def test_a_statement_that_found_the_subject_again_fails_the_pack(packed: tuple[Home, Path, str]) -> None:
    home, pack, name = packed
    clean = _sign(home, name)
    found = _sign(home, name, all_clear=False, residue={"episodic": 2}, residue_tiers=["episodic"])
    got = _verify(home, pack, "--reverify", str(clean), str(found))
    assert got.returncode == 1
    assert "re-verification 2 at 2026-12-01T00:00:00Z found the subject again (residue in: episodic)" in got.stdout


def test_two_statements_with_one_number_are_refused(packed: tuple[Home, Path, str]) -> None:
    home, pack, name = packed
    one = _sign(home, name)
    got = _verify(home, pack, "--reverify", str(one), str(one))
    assert got.returncode == 1 and "same sequence number" in got.stdout


def test_a_statement_that_would_name_the_subject_is_never_written(packed: tuple[Home, Path, str]) -> None:
    from proof.errors import IdentifierInPack

    home, _pack, name = packed
    with pytest.raises(IdentifierInPack):
        _sign(home, name, changed_files={"compared": False, "reason": f"note about {SUBJECT.email}"})
    assert not list(home.evidence_dir(REQ).glob("reverify-*"))


# --- the chain (issue 34, finding 10) -------------------------------------------------------------


def test_leaving_out_the_statement_that_found_the_subject_again_is_refused(packed: tuple[Home, Path, str]) -> None:
    """Pack + statements 1 and 3, while statement 2 found the subject again: a gap, refused."""
    home, pack, name = packed
    first = _sign(home, name)
    _found = _sign(home, name, all_clear=False, residue={"episodic": 2}, residue_tiers=["episodic"])
    third = _sign(home, name)
    got = _verify(home, pack, "--reverify", str(first), str(third))
    assert got.returncode == 1 and got.stdout.count("\n") == 1, got.stdout
    assert got.stdout.startswith("FAIL: reverify: the chain of re-verifications has a gap: statement 2 is missing")


def test_a_chain_given_without_its_first_statement_is_refused(packed: tuple[Home, Path, str]) -> None:
    home, pack, name = packed
    _sign(home, name)
    second = _sign(home, name)
    got = _verify(home, pack, "--reverify", str(second))
    assert got.returncode == 1 and "statement 1 is missing" in got.stdout


def test_a_statement_swapped_for_another_signed_one_breaks_the_chain(
    packed: tuple[Home, Path, str], tmp_path: Path
) -> None:
    """Statement 2 found the subject; a second, clean statement 2 is signed in a copy of the folder (the
    engine key's holder re-running a re-verification until it comes out clear): it names the same
    statement 1, but statement 3 names the real statement 2, so the swap is seen."""
    home, pack, name = packed
    first = _sign(home, name)
    found = _sign(home, name, all_clear=False, residue={"episodic": 2}, residue_tiers=["episodic"])
    third = _sign(home, name)
    aside = third.rename(tmp_path / third.name)
    found.unlink()  # a clean one in its place
    clean_second = _sign(home, name)
    assert clean_second.name == found.name
    got = _verify(home, pack, "--reverify", str(first), str(clean_second), str(aside))
    assert got.returncode == 1 and "re-verification 3 does not name the statement before it" in got.stdout


def test_the_verifier_reports_the_chain_length_and_its_latest_statement(packed: tuple[Home, Path, str]) -> None:
    home, pack, name = packed
    paths = [str(_sign(home, name, reverified_at=f"2026-12-0{i}T00:00:00Z")) for i in (1, 2, 3)]
    got = _verify(home, pack, "--reverify", *reversed(paths))  # any order on the command line
    assert got.returncode == 0, got.stdout
    assert (
        got.stdout.startswith("OK (") and "re-verification chain of 3, latest 3 at 2026-12-03T00:00:00Z" in got.stdout
    )
    js = json.loads(_verify(home, pack, "--json", "--reverify", *paths).stdout)
    assert js["reverification_chain"] == {"length": 3, "latest": 3, "latest_at": "2026-12-03T00:00:00Z"}
