"""Every command DPO-SIGN.md, VERIFY.md and attestation.txt print works as printed (issue 35): taken
from the generated files (never retyped), run in a clean folder holding only what the export wrote,
with `env -i PATH=/usr/bin:/bin`, so Debian's own /usr/bin/python3 (cryptography 38, no
`deterministic_signing`) and /usr/bin/openssl run them. Commands for the privacy team (`erasure ...`)
run on the engine's side, with the CLI on PATH.

A printed command is a line of an indented code block, an inline code span that starts with a program
the reader runs (python3, openssl, sha256sum, bash), or the recipe block (copied into recipe.sh as
VERIFY.md says). Installation hints (`apt-get install`, `pip install`) are prerequisites, not steps."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from erasure.config import Home
from proof.verify.signer import REJECTION_PAYLOAD_TYPE
from tests.proof.test_attest_export import REQ, awaiting  # noqa: F401  (the fixture)
from wire.format import pae

DEBIAN = ("/usr/bin/python3", "/usr/bin/openssl", "/usr/bin/jq", "/usr/bin/sha256sum")
RUNS = ("python3 ", "openssl ", "sha256sum ", "bash ")
TEAM = "erasure "


def commands(markdown: str) -> list[str]:
    """The commands a reader of `markdown` runs, in order (see the module docstring)."""
    text = re.sub(r"```sh\n.*?```", "", markdown, flags=re.S)
    found: list[tuple[int, str]] = []
    for m in re.finditer(r"(?m)^ {4,}(\S.*)$", text):
        line = m.group(1).strip()
        assert line.startswith(RUNS) or line.startswith(TEAM), f"a printed command no test runs: {line}"
        found.append((m.start(), line))
    for m in re.finditer(r"`([^`\n]+)`", text):
        if m.group(1).startswith(RUNS) or m.group(1).startswith(TEAM):
            found.append((m.start(), m.group(1)))
    return [c for _at, c in sorted(found)]


def debian(cmd: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`cmd` as a user types it, with Debian's tools only: `env -i PATH=/usr/bin:/bin bash -c CMD`."""
    return subprocess.run(
        ["/usr/bin/env", "-i", "PATH=/usr/bin:/bin", "/bin/bash", "-c", cmd],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def team(cmd: str, cwd: Path, h: Home) -> subprocess.CompletedProcess[str]:
    """A command DPO-SIGN.md gives the privacy team, run where the `erasure` CLI is installed."""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "ERASURE_HOME": str(h.root)}
    env["ERASURE_EVIDENCE"] = str(h.evidence_root)
    return subprocess.run(["/bin/bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, check=False)


def clean_copy(src: Path, dst: Path) -> Path:
    """A fresh folder holding exactly what the export wrote, as the reader receives it."""
    shutil.copytree(src, dst)
    return dst


def cli(h: Home, *args: str) -> subprocess.CompletedProcess[str]:
    return team(" ".join(["erasure", *args]), h.root, h)


def test_every_command_dpo_sign_verify_and_attestation_print_runs_on_debian(awaiting: Home, tmp_path: Path) -> None:  # noqa: F811
    missing = [p for p in DEBIAN if not Path(p).exists()]
    assert not missing, f"{missing} missing: `make tools` installs Debian's jq and openssl"
    h = awaiting
    for made_on_the_dpos_machine in ("dpo.pem", "dpo.pub.pem"):  # below, and trusted by the team
        (h.keys_dir / made_on_the_dpos_machine).unlink()  # the DPO's key is made on their machine, below
    kit = cli(h, "export", REQ, "--dpo-kit", "--to", str(tmp_path / "kit"))
    assert kit.returncode == 0, kit.stderr
    dpo = clean_copy(tmp_path / "kit", tmp_path / "dpo-machine")
    note = (dpo / "DPO-SIGN.md").read_text()
    steps = commands(note)
    assert any("erasure-dpo-sign.pyz" in c and "--reject" in c for c in steps), steps
    envelope = rejection = printed_keyid = ""
    assert any(c.startswith(TEAM + "keys trust") for c in steps), steps
    for cmd in steps:
        if "KEYID" in cmd:  # the key id the DPO read out: the team types what they heard
            cmd = cmd.replace("KEYID", printed_keyid)
        run = team(cmd, dpo, h) if cmd.startswith(TEAM) else debian(cmd, dpo, stdin="y\n")
        assert run.returncode == 0, f"{cmd}\n{run.stdout}\n{run.stderr}"
        if "erasure-verify.pyz" in cmd:
            assert run.stdout.startswith("OK"), run.stdout
        if "erasure-dpo-sign.pyz" in cmd:  # it showed the tier table before asking
            assert "tier" in run.stderr and "residue" in run.stderr and "Exceptions" in run.stderr, run.stderr
            if "--reject" in cmd:
                rejection = run.stdout.strip()
            else:
                envelope = run.stdout.strip()
        if cmd.startswith("sha256sum dpo.pub.der"):
            printed_keyid = run.stdout.split()[0]
        if cmd.startswith(TEAM + "keys trust"):
            assert printed_keyid in run.stdout, run.stdout  # the key id the DPO confirms
    assert envelope and rejection

    # The refusal verifies with the DPO's public key and says what was refused.
    doc = json.loads(rejection)
    payload = base64.b64decode(doc["payload"])
    pub = serialization.load_pem_public_key((dpo / "dpo.pub.pem").read_bytes())
    assert isinstance(pub, ec.EllipticCurvePublicKey)
    pub.verify(
        base64.b64decode(doc["signatures"][0]["sig"]), pae(REJECTION_PAYLOAD_TYPE, payload), ec.ECDSA(hashes.SHA256())
    )
    refusal = json.loads(payload)
    assert doc["payloadType"] == REJECTION_PAYLOAD_TYPE and refusal["request_id"] == REQ
    assert sorted(refusal) == ["pack_sha256", "reason", "rejected_at", "request_id"]
    assert refusal["reason"] == "evidence_incomplete"

    # The team seals with the DPO's envelope (signed by Debian's cryptography 38), then exports.
    sealed = team(f"erasure attest {REQ} --envelope '{envelope}' --yes", h.root, h)
    assert sealed.returncode == 0, sealed.stdout + sealed.stderr
    assert cli(h, "export", REQ, "--to", str(tmp_path / "export")).returncode == 0
    reg = clean_copy(tmp_path / "export", tmp_path / "regulator")
    verify_md = (reg / "VERIFY.md").read_text()
    (reg / "recipe.sh").write_text(re.findall(r"```sh\n(.*?)```", verify_md, re.S)[0])  # as VERIFY.md says
    with tarfile.open(reg / f"{REQ}-proof.tar.gz") as tar:
        member = tar.extractfile(f"{REQ}/attestation.txt")
        assert member is not None
        certificate = member.read().decode()
    assert "docs/" not in certificate  # the regulator has no checkout
    cert_line = [ln.strip() for ln in certificate.splitlines() if ln.strip().startswith("python3 ")]
    assert len(cert_line) == 1, certificate
    ran = []
    for cmd in [*commands(verify_md), *cert_line]:
        run = debian(cmd, reg)
        assert run.returncode == 0, f"{cmd}\n{run.stdout}\n{run.stderr}"
        ran.append(cmd)
        if "erasure-verify.pyz" in cmd and "zipfile" not in cmd:
            assert run.stdout.startswith("OK"), run.stdout
        if cmd == "bash recipe.sh":
            assert "ALL CHECKS PASSED" in run.stdout, run.stdout
    assert "bash recipe.sh" in ran and sum("erasure-verify.pyz" in c for c in ran) >= 2, ran
