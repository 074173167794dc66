"""Trusted time, end to end on a real erased store: with `ERASURE_TSA_URL` set, the engine's pack and
the DPO's `erasure attest` get RFC 3161 tokens from a real TSA (tests/tsa_fixtures.py); `erasure
export` ships the TSA root, and VERIFY.md's verifier line and its shell recipe (`openssl ts -verify`),
run literally, pass, and refuse a token over another digest."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from erasure.config import Home
from erasure.errors import ConfigError
from proof.tsa import TimestampAuthority
from tests.proof.test_attest_export import REQ, awaiting  # noqa: F401  (the fixture)
from tests.proof_fixtures import read_members, repack
from tests.tsa_fixtures import TestTsa

TOOLS = ("jq", "openssl", "sha256sum", "tar", "base64")


@pytest.fixture
def tsa(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestTsa]:
    t = TestTsa.start(tmp_path / "tsa", "export")
    monkeypatch.setenv("ERASURE_TSA_URL", t.url)
    monkeypatch.setenv("ERASURE_TSA_ROOT", str(t.root))
    yield t
    t.stop()


@pytest.fixture
def sealed(tsa: TestTsa, awaiting: Home) -> Home:  # noqa: F811  (the TSA first: the engine's pack is stamped)
    home = awaiting
    done = CliRunner().invoke(app, ["attest", REQ, "--dpo-key", str(home.keys_dir / "dpo.pem"), "--yes"])
    assert done.exit_code == 0, done.output
    return home


def _recipe(note: str) -> str:
    blocks: list[str] = re.findall(r"```sh\n(.*?)```", note, re.S)
    assert len(blocks) == 1
    return blocks[0]


def test_export_ships_the_tsa_root_and_the_verifier_line_checks_the_tokens(
    sealed: Home, tsa: TestTsa, tmp_path: Path
) -> None:
    out = tmp_path / "for-regulator"
    done = CliRunner().invoke(app, ["export", REQ, "--to", str(out)])
    assert done.exit_code == 0, done.output
    assert (out / "tsa-root.pem").read_bytes() == tsa.root.read_bytes()
    note = (out / "VERIFY.md").read_text()
    assert "--tsa-root tsa-root.pem" in note and "openssl ts -verify -in" in note
    assert "Times: RFC 3161 timestamps from the TSA" in note
    step = re.search(r"^ +(python3 erasure-verify\.pyz .*)$", note, re.M)
    assert step is not None
    run = subprocess.run(
        [sys.executable, "-I", *step.group(1).split()[1:], "--json"],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=120,
    )
    result = json.loads(run.stdout)
    assert result["ok"] and result["timestamps"] == "verified" and "timestamp" in result["checks"], run.stdout


def test_export_needs_the_tsa_root_for_a_pack_of_trusted_time(
    sealed: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ERASURE_TSA_ROOT")
    done = CliRunner().invoke(app, ["export", REQ, "--to", str(tmp_path / "out")])
    assert isinstance(done.exception, ConfigError) and "--tsa-root" in str(done.exception)


@pytest.mark.skipif(not all(shutil.which(t) for t in TOOLS), reason="the recipe needs " + ", ".join(TOOLS))
def test_verify_md_recipe_checks_the_tokens_with_openssl_ts_verify(sealed: Home, tsa: TestTsa, tmp_path: Path) -> None:
    out = tmp_path / "for-regulator"
    assert CliRunner().invoke(app, ["export", REQ, "--to", str(out)]).exit_code == 0
    script = out / "recipe.sh"
    script.write_text(_recipe((out / "VERIFY.md").read_text()))
    ok = subprocess.run(["bash", str(script)], cwd=out, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "ALL CHECKS PASSED" in ok.stdout, ok.stdout + ok.stderr
    assert ok.stdout.count("signature timestamped by the TSA at") == 2

    # token over another digest: a real token of the pinned TSA, over bytes the engine never signed
    name = f"{REQ}-proof.tar.gz"
    top, files = read_members(out / name)
    forged = tsa.reply_for(b"not the engine's signature", tmp_path / "forged.tsr")
    (out / name).write_bytes(repack(top, {**files, "signatures/engine.tsr": forged}))
    bad = subprocess.run(["bash", str(script)], cwd=out, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "ALL CHECKS PASSED" not in bad.stdout
    assert "FAILED: signatures/engine.tsr:" in bad.stderr, bad.stderr

    # the same signature stamped by another TSA: openssl refuses it against the pinned root
    rogue = TestTsa.start(tmp_path / "rogue", "rogue")
    try:
        sig = base64.b64decode(json.loads(files["signatures/dpo.intoto.json"])["signatures"][0]["sig"])
        token = TimestampAuthority(rogue.url).timestamp(sig)
    finally:
        rogue.stop()
    (out / name).write_bytes(repack(top, {**files, "signatures/dpo.tsr": token}))
    unpinned = subprocess.run(["bash", str(script)], cwd=out, capture_output=True, text=True, timeout=120)
    assert unpinned.returncode != 0 and "FAILED: signatures/dpo.tsr:" in unpinned.stderr, unpinned.stderr
