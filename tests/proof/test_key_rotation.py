"""Issue 27, key rotation, through the real CLI: the engine's and the DPO's keys are rotated twice
(`erasure keys rotate`) between three real requests (`erasure request run`, `erasure attest`), so each
pack is signed in its own key period. Every export ships the keyring, and each of the three packs
verifies with it: with the shipped zipapp (`--keyring`) and with VERIFY.md's openssl recipe, run
literally. A pack forged after the rotations with copies of the first period's keys
(`forged_by_retired_keys_after_retirement`) passes every single-key check and is refused by both
with the keyring; the signers refuse those copies too."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from erasure.config import Home
from service import signoff
from tests.backup_fixtures import THREE, reference_items, request_file
from tests.cli_fixtures import erasure
from tests.keyring_fixtures import forged_by_retired_keys_after_retirement
from tests.proof.test_attest_export import REQ, _state, awaiting  # noqa: F401  (the fixture)
from tests.proof.test_dpo_signoff import dpo_machine, signer  # noqa: F401  (the fixture)
from tests.proof_fixtures import read_members

RIDS = ("req-rot-p1", "req-rot-p2", "req-rot-p3")
TOOLS = all(shutil.which(t) for t in ("jq", "openssl", "sha256sum", "tar", "bash"))


def _ok(*args: str) -> dict[str, Any]:
    res = erasure(*args, "--json")
    assert res.code == 0, res.out[-2000:] + res.err[-2000:]
    doc = json.loads(res.out)
    assert isinstance(doc, dict)
    return doc


def _zipapp(out: Path, pack: str, *keys: str) -> subprocess.CompletedProcess[str]:
    """The exported verifier, as VERIFY.md tells the regulator to run it: an isolated interpreter."""
    return subprocess.run(
        [sys.executable, "-I", "erasure-verify.pyz", pack, *keys, "--audit-key", "audit.pub.pem"],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _recipe(out: Path, name: str | None = None) -> subprocess.CompletedProcess[str]:
    """VERIFY.md's shell recipe, run literally in the export folder (with the pack name `name`, for a
    forger who writes their own VERIFY.md)."""
    blocks = re.findall(r"```sh\n(.*?)```", (out / "VERIFY.md").read_text(), re.S)
    assert len(blocks) == 1
    script = blocks[0] if name is None else re.sub(r"\bNAME=[0-9a-f]{64}", f"NAME={name}", blocks[0])
    (out / "recipe.sh").write_text(script)
    return subprocess.run(["bash", "recipe.sh"], cwd=out, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def three_periods(tmp_path_factory: pytest.TempPathFactory, prefect_harness: None) -> dict[str, Any]:
    """A home whose engine and DPO keys were rotated twice, one sealed request per key period, the
    exports of all three, and copies of the first period's private keys (kept by an insider)."""
    tmp = tmp_path_factory.mktemp("rotation")
    mp = pytest.MonkeyPatch()
    home = Home.resolve(tmp / "home", tmp / "evidence").ensure()
    mp.setenv("ERASURE_HOME", str(home.root))
    mp.setenv("ERASURE_EVIDENCE", str(home.evidence_root))
    h = str(home.root)
    try:
        assert erasure("store", "init", "--home", h).code == 0
        assert erasure("ingest", str(reference_items(tmp / "items.jsonl")), "--home", h).code == 0
        engine_ids = [_ok("keys", "generate", "--role", "engine", "--home", h)["keyid"]]
        dpo_ids = [_ok("keys", "generate", "--role", "dpo", "--home", h)["keyid"]]
        kept = tmp / "kept"
        kept.mkdir()
        shutil.copy(home.keys_dir / "engine.pem", kept / "engine.pem")
        shutil.copy(home.keys_dir / "dpo.pem", kept / "dpo.pem")
        rotations: list[str] = []
        for period, (rid, subject) in enumerate(zip(RIDS, THREE, strict=True)):
            if period:
                e = _ok("keys", "rotate", "--role", "engine", "--home", h)
                d = _ok("keys", "rotate", "--role", "dpo", "--home", h)
                assert (e["retired_keyid"], d["retired_keyid"]) == (engine_ids[-1], dpo_ids[-1])
                engine_ids.append(e["keyid"])
                dpo_ids.append(d["keyid"])
                rotations.append(e["rotated_at"])
            assert (
                erasure("request", "submit", str(request_file(tmp / f"{rid}.json", rid, subject)), "--home", h).code
                == 0
            )
            run = erasure("request", "run", rid, "--home", h, "--json")
            assert run.code == 0, run.out[-2000:] + run.err[-2000:]
            if period == 2:  # the kept copy of the first DPO key is refused: the keyring retired it
                refused = erasure("attest", rid, "--dpo-key", str(kept / "dpo.pem"), "--yes", "--home", h)
                assert refused.code == 5 and "was retired at" in refused.err, refused.out + refused.err
            _ok("attest", rid, "--dpo-key", str(home.keys_dir / "dpo.pem"), "--yes", "--home", h)
        exports = {}
        for rid in RIDS:
            out = tmp / f"export-{rid}"
            _ok("export", rid, "--to", str(out), "--home", h)
            exports[rid] = out
        return {
            "home": home,
            "engine_ids": engine_ids,
            "dpo_ids": dpo_ids,
            "rotations": rotations,
            "kept": kept,
            "exports": exports,
        }
    finally:
        mp.undo()


def test_the_keyring_holds_three_periods_per_role(three_periods: dict[str, Any]) -> None:
    home: Home = three_periods["home"]
    ring = json.loads((home.keys_dir / "keyring.json").read_bytes())
    for role, ids in (("engine", three_periods["engine_ids"]), ("dpo", three_periods["dpo_ids"])):
        mine = [k for k in ring["keys"] if k["role"] == role]
        assert [k["keyid"] for k in mine] == ids and len(set(ids)) == 3
        assert [k["valid_until"] for k in mine[:2]] == [k["valid_from"] for k in mine[1:]]
        assert mine[2]["valid_until"] is None
    # The retired private keys are gone from the home; only the current ones are there.
    assert sorted(p.name for p in home.keys_dir.glob("*.pem")) == [
        "dpo.pem",
        "dpo.pub.pem",
        "engine.pem",
        "engine.pub.pem",
    ]


def test_packs_from_all_three_periods_verify_with_the_keyring(three_periods: dict[str, Any]) -> None:
    home: Home = three_periods["home"]
    ring = (home.keys_dir / "keyring.json").read_bytes()
    for period, rid in enumerate(RIDS):
        out: Path = three_periods["exports"][rid]
        assert (out / "keyring.json").read_bytes() == ring  # every export ships the whole keyring
        assert f"`{hashlib.sha256(ring).hexdigest()}`" in (out / "VERIFY.md").read_text()  # the pin to confirm
        ok = _zipapp(out, f"{rid}-proof.tar.gz", "--keyring", "keyring.json", "--json")
        assert ok.returncode == 0, ok.stdout + ok.stderr
        result = json.loads(ok.stdout)
        assert result["ok"] and "key-validity" in result["checks"]
        assert result["engine_keyid"] == three_periods["engine_ids"][period]
        assert result["dpo_keyid"] == three_periods["dpo_ids"][period]
        # VERIFY.md step 2 names the keyring; its shipped single keys are the ones that signed this pack.
        assert "erasure-verify.pyz " + f"{rid}-proof.tar.gz --keyring keyring.json" in (out / "VERIFY.md").read_text()
        if period < 2:  # without the keyring, today's keys alone cannot verify an older pack
            today = _zipapp(
                out,
                f"{rid}-proof.tar.gz",
                "--engine-key",
                str(home.keys_dir / "engine.pub.pem"),
                "--dpo-key",
                str(home.keys_dir / "dpo.pub.pem"),
            )
            assert today.returncode == 1 and today.stdout.startswith("FAIL: signature:"), today.stdout


def test_erasure_pack_verify_takes_the_keyring(three_periods: dict[str, Any]) -> None:
    home: Home = three_periods["home"]
    ring = str(home.keys_dir / "keyring.json")
    for rid in RIDS:
        pack = str(three_periods["exports"][rid] / f"{rid}-proof.tar.gz")
        res = erasure("pack", "verify", pack, "--keyring", ring, "--no-audit-key", "--json")
        assert res.code == 0 and json.loads(res.out)["ok"] is True, res.out + res.err
    both = erasure("pack", "verify", pack, "--keyring", ring, "--engine-key", ring, "--no-audit-key")
    assert both.code == 2 and "not both" in both.err


@pytest.mark.skipif(not TOOLS, reason="the recipe needs jq, openssl, sha256sum, tar and bash")
def test_verify_md_recipe_passes_for_all_three_periods(three_periods: dict[str, Any]) -> None:
    for rid in RIDS:
        done = _recipe(three_periods["exports"][rid])
        assert done.returncode == 0 and "ALL CHECKS PASSED" in done.stdout, done.stdout + done.stderr
        assert "keyring sha256" in done.stdout


def test_a_pack_forged_with_retired_keys_after_their_retirement_is_refused(
    three_periods: dict[str, Any], tmp_path: Path
) -> None:
    first = three_periods["exports"][RIDS[0]]
    kept: Path = three_periods["kept"]
    forged = forged_by_retired_keys_after_retirement(
        first / f"{RIDS[0]}-proof.tar.gz", kept / "engine.pem", kept / "dpo.pem", datetime.now(UTC)
    )
    out = tmp_path / "forged-export"
    shutil.copytree(first, out)
    (out / f"{RIDS[0]}-proof.tar.gz").write_bytes(forged)
    # Pinned as single keys (the first period's, which the export ships), the forgery passes.
    single = _zipapp(out, f"{RIDS[0]}-proof.tar.gz", "--engine-key", "engine.pub.pem", "--dpo-key", "dpo.pub.pem")
    assert single.returncode == 0 and single.stdout.startswith("OK"), single.stdout
    # With the keyring it is refused: the engine key was retired at the first rotation.
    refused = _zipapp(out, f"{RIDS[0]}-proof.tar.gz", "--keyring", "keyring.json")
    assert refused.returncode == 1, refused.stdout
    line = refused.stdout.strip()
    assert line.startswith("FAIL: signature: signatures/engine.intoto.json was signed at verified_at"), line
    assert "after the key was retired" in line and f"until {three_periods['rotations'][0]}" in line
    if TOOLS:
        _, files = read_members(forged)
        statement = base64.b64decode(json.loads(files["signatures/engine.intoto.json"])["payload"])
        recipe = _recipe(out, hashlib.sha256(statement).hexdigest())
        assert recipe.returncode != 0 and "ALL CHECKS PASSED" not in recipe.stdout
        assert "FAILED: the engine key was not valid when it signed (verified_at)" in recipe.stderr, recipe.stderr


def test_the_engine_refuses_to_sign_with_a_retired_key(three_periods: dict[str, Any], tmp_path: Path) -> None:
    home: Home = three_periods["home"]
    kept: Path = three_periods["kept"]
    res = erasure(
        "pack",
        "build",
        str(home.evidence_dir(RIDS[2])),
        "--key",
        str(kept / "engine.pem"),
        "--out",
        str(tmp_path / "x.tar.gz"),
        "--home",
        str(home.root),
    )
    assert res.code == 5 and "was retired at" in res.err and "signs nothing new" in res.err, res.out + res.err
    assert not (tmp_path / "x.tar.gz").exists()


# --- a rotation while a request waits for the DPO, who signs on their own machine --------------------


def test_a_pack_signed_before_a_rotation_is_signed_off_after_it_by_the_dpos_new_key(
    awaiting: Home,  # noqa: F811
    dpo_machine: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The engine key is rotated in the home and the DPO rotates theirs on their own machine while the
    request waits; the controller enrols the DPO's new public key. The kit's signer with a kept copy of
    the DPO's old key is refused; with the new key the sign-off seals, and the export verifies with the
    keyring: the old engine key (valid when it signed) and the new DPO key."""
    h = str(awaiting.root)
    old_engine = _ok("keys", "fingerprint", str(awaiting.keys_dir / "engine.pub.pem"))["keyid"]
    _ok("keys", "rotate", "--role", "engine", "--home", h)
    shutil.copy(dpo_machine / "dpo.pem", tmp_path / "kept-dpo.pem")
    new_dpo = _ok("keys", "rotate", "--role", "dpo", "--keys-dir", str(dpo_machine))["keyid"]
    enrolled = _ok("keys", "enrol", "--role", "dpo", str(dpo_machine / "dpo.pub.pem"), "--home", h)
    assert enrolled["keyid"] == new_dpo
    assert (awaiting.keys_dir / "dpo.pub.pem").read_bytes() == (dpo_machine / "dpo.pub.pem").read_bytes()
    kit = tmp_path / "kit"
    _ok("export", "--dpo-kit", "--to", str(kit), "--home", h)
    assert (kit / "keyring.json").read_bytes() == (awaiting.keys_dir / "keyring.json").read_bytes()

    request = signoff.signing_request(awaiting, REQ)  # the old pack verifies against the keyring
    stale = signer(dpo_machine, request, key=tmp_path / "kept-dpo.pem")
    assert stale.returncode == 0, stale.stderr
    refused = erasure("attest", REQ, "--envelope", stale.stdout.strip(), "--yes", "--home", h)
    assert refused.code != 0 and _state(awaiting) == "awaiting attestation", refused.err
    assert "not signed by the pinned DPO key" in refused.err  # the pinned DPO key is the new one
    line = signer(dpo_machine, request)
    done = erasure("attest", REQ, "--envelope", line.stdout.strip(), "--yes", "--home", h)
    assert done.code == 0, done.err
    assert _state(awaiting) == "notified"

    out = tmp_path / "for-regulator"
    _ok("export", REQ, "--to", str(out), "--home", h)
    ok = _zipapp(out, f"{REQ}-proof.tar.gz", "--keyring", "keyring.json", "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    result = json.loads(ok.stdout)
    assert (result["engine_keyid"], result["dpo_keyid"]) == (old_engine, new_dpo)
    if TOOLS:
        recipe = _recipe(out)
        assert recipe.returncode == 0 and "ALL CHECKS PASSED" in recipe.stdout, recipe.stdout + recipe.stderr


def test_the_dpo_attests_a_pack_file_with_the_keyring_after_an_engine_rotation(awaiting: Home) -> None:  # noqa: F811
    """`erasure pack attest` on the DPO's own machine, with only the pack file: after the engine key was
    rotated, the current engine key no longer verifies the pack; the keyring does."""
    h = str(awaiting.root)
    _ok("keys", "rotate", "--role", "engine", "--home", h)
    pack = str(awaiting.evidence_dir(REQ) / "proof.tar.gz")
    dpo = str(awaiting.keys_dir / "dpo.pem")
    ring = str(awaiting.keys_dir / "keyring.json")
    today = erasure("pack", "attest", pack, "--key", dpo, "--engine-key", str(awaiting.keys_dir / "engine.pub.pem"))
    assert today.code != 0 and "signature" in today.err, today.err
    assert erasure("pack", "attest", pack, "--key", dpo, "--yes").code == 2  # neither
    done = _ok("pack", "attest", pack, "--key", dpo, "--keyring", ring, "--yes")
    assert done["dpo_keyid"] == _ok("keys", "fingerprint", dpo)["keyid"]
    res = erasure("pack", "verify", pack, "--keyring", ring, "--no-audit-key", "--json")
    assert res.code == 0 and json.loads(res.out)["dpo_attestation"] == "verified", res.out + res.err
