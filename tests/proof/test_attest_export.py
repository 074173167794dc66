"""`erasure attest` (the DPO seals a request's pack) and `erasure export`, on a real erased store.

The pack comes from the same functions the flow's tasks run (no Prefect needed here)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from erasure.errors import Conflict, InputError, RequestBlocked
from erasure.states import RequestState
from flows.verification import probes_task
from proof.dsse import sign_envelope
from proof.errors import PackRejected, SameKeyRefused
from proof.keys import generate_keypair, keyid, load_private_key
from proof.statement import dpo_statement
from service.packs import write_engine_pack
from service.verification import take_and_seal_fingerprint
from tasks.runner import run_cascade
from tests.cascade_fixtures import SUBJECT, build_store, submit
from tests.proof_fixtures import json_edit, read_members, repack, sums_of
from wire.format import envelope_bytes

REQ = "req-ann-1"


def _state(h: Home) -> str:
    engine = open_engine(h.engine_db)
    try:
        return request_records.get(engine, REQ).state.value
    finally:
        engine.close()


def _inputs(tmp_path: Path) -> tuple[object, ...]:
    """What a build of `awaiting` depends on: the environment (ERASURE_*, PREFECT_*: a TSA, say) and
    every file already in the test's folder (what fixtures requested before it wrote)."""
    env = sorted(
        (k, v)
        for k, v in os.environ.items()
        if k.startswith(("ERASURE_", "PREFECT_")) and k not in ("ERASURE_HOME", "ERASURE_EVIDENCE")
    )
    files = sorted(
        (str(p.relative_to(tmp_path)), p.lstat().st_mode, p.read_bytes() if p.is_file() and not p.is_symlink() else b"")
        for p in tmp_path.rglob("*")
    )
    return tuple(env), tuple(files)


_BUILT: dict[tuple[object, ...], Path] = {}


@pytest.fixture
def awaiting(home: Home, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Home:
    """A request erased, verified and packed, awaiting the DPO (about 5 s to build, 15 s on a busy
    machine). Built once per session for the same inputs, then copied into each test's folder: the
    copy is the test's own (nothing in the home names its folder)."""
    key = _inputs(tmp_path)
    template = _BUILT.get(key)
    if template is not None:
        shutil.copytree(template, tmp_path, symlinks=True, dirs_exist_ok=True)
        return home
    _build_awaiting(home, tmp_path)
    template = tmp_path_factory.mktemp("awaiting-template")
    shutil.copytree(tmp_path, template, symlinks=True, dirs_exist_ok=True)
    _BUILT[key] = template
    return home


def _build_awaiting(home: Home, tmp_path: Path) -> None:
    build_store(home, tmp_path)
    submit(home)
    generate_keypair("engine", home.keys_dir)
    generate_keypair("dpo", home.keys_dir)
    take_and_seal_fingerprint(REQ, home)
    run_cascade(REQ, home)
    assert probes_task.fn(REQ)["all_clear"]
    write_engine_pack(REQ, home)
    engine = open_engine(home.engine_db)
    request_records.set_state(engine, REQ, RequestState.awaiting_attestation)
    engine.close()


def test_attest_seals_verifies_and_notifies_the_requester(awaiting: Home) -> None:
    result = CliRunner().invoke(app, ["attest", REQ, "--dpo-key", str(awaiting.keys_dir / "dpo.pem"), "--yes"])
    assert result.exit_code == 0, result.output
    assert _state(awaiting) == "notified"
    pack = awaiting.evidence_dir(REQ) / "proof.tar.gz"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "proof.verify",
            str(pack),
            "--engine-key",
            str(awaiting.keys_dir / "engine.pub.pem"),
            "--dpo-key",
            str(awaiting.keys_dir / "dpo.pub.pem"),
            "--no-audit-key",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and out.stdout.startswith("OK"), out.stdout + out.stderr
    mail = awaiting.outbox_dir / f"{REQ}.eml"
    assert mail.stat().st_mode & 0o777 == 0o600
    text = mail.read_text()
    assert "sha256:" in text and "verified at" in text and SUBJECT.email in text  # type: ignore[operator]


def test_attest_refuses_the_engine_key_and_changes_nothing(awaiting: Home) -> None:
    pack = awaiting.evidence_dir(REQ) / "proof.tar.gz"
    before = pack.read_bytes()
    result = CliRunner().invoke(app, ["attest", REQ, "--dpo-key", str(awaiting.keys_dir / "engine.pem"), "--yes"])
    assert isinstance(result.exception, SameKeyRefused)
    assert pack.read_bytes() == before
    assert _state(awaiting) == "awaiting attestation"
    assert not (awaiting.outbox_dir / f"{REQ}.eml").exists()


def test_attest_asks_first_and_a_no_signs_nothing(awaiting: Home) -> None:
    pack = awaiting.evidence_dir(REQ) / "proof.tar.gz"
    before = pack.read_bytes()
    result = CliRunner().invoke(app, ["attest", REQ, "--dpo-key", str(awaiting.keys_dir / "dpo.pem")], input="n\n")
    assert result.exit_code != 0
    assert "erased" in result.output  # the DPO was shown the per-tier table first
    assert pack.read_bytes() == before and _state(awaiting) == "awaiting attestation"


def test_attest_refuses_a_request_that_is_not_awaiting_attestation(awaiting: Home) -> None:
    engine = open_engine(awaiting.engine_db)
    request_records.set_state(engine, REQ, RequestState.exception)
    engine.close()
    result = CliRunner().invoke(app, ["attest", REQ, "--dpo-key", str(awaiting.keys_dir / "dpo.pem"), "--yes"])
    assert isinstance(result.exception, RequestBlocked)


def test_export_writes_a_pack_the_regulator_verifies_with_the_exported_keys(awaiting: Home, tmp_path: Path) -> None:
    runner = CliRunner()
    early = runner.invoke(app, ["export", REQ, "--to", str(tmp_path / "early")])
    assert isinstance(early.exception, RequestBlocked)  # not sealed yet
    assert runner.invoke(app, ["attest", REQ, "--dpo-key", str(awaiting.keys_dir / "dpo.pem"), "--yes"]).exit_code == 0
    out = tmp_path / "for-regulator"
    assert runner.invoke(app, ["export", REQ, "--to", str(out)]).exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["VERIFY.md", "audit.pub.pem", "dpo.pub.pem", "engine.pub.pem", "erasure-verify.pyz", f"{REQ}-proof.tar.gz"]
    )
    verify = subprocess.run(
        [
            sys.executable,
            "-m",
            "proof.verify",
            str(out / f"{REQ}-proof.tar.gz"),
            "--engine-key",
            str(out / "engine.pub.pem"),
            "--dpo-key",
            str(out / "dpo.pub.pem"),
            "--audit-key",
            str(out / "audit.pub.pem"),
        ],
        capture_output=True,
        text=True,
    )
    # The OK line names the status and explains the pack's one exception (the model trained on the subject).
    said = "OK: status erasedWithExceptions, 1 exception(s): fine_tune: model_trained_on_subject"
    assert verify.stdout.startswith(said)
    assert "must be retrained" in verify.stdout
    note = (out / "VERIFY.md").read_text()
    for needle in SUBJECT.identifiers():
        assert needle not in note


def test_export_ships_the_verifier_that_verify_md_tells_the_regulator_to_run(awaiting: Home, tmp_path: Path) -> None:
    """Step 2 of VERIFY.md, literally, in the exported folder: an isolated interpreter, nothing of the
    project imported from outside erasure-verify.pyz."""
    _sealed(awaiting)
    out = tmp_path / "for-regulator"
    assert CliRunner().invoke(app, ["export", REQ, "--to", str(out)]).exit_code == 0
    step = re.search(r"^ +(python3 erasure-verify\.pyz .*)$", (out / "VERIFY.md").read_text(), re.M)
    assert step is not None
    run = subprocess.run(
        [sys.executable, "-I", *step.group(1).split()[1:]], cwd=out, capture_output=True, text=True, timeout=120
    )
    assert (run.returncode, run.stdout.split(":")[0], run.stderr) == (0, "OK", "")


def test_with_smtp_configured_the_requester_is_mailed_and_no_outbox_file_is_kept(
    awaiting: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real SMTP server on 127.0.0.1 (the stdlib's, in Python 3.11) receives the notification."""
    import asyncore
    import smtpd
    import threading

    received: list[tuple[list[str], bytes]] = []

    class Sink(smtpd.SMTPServer):
        def process_message(self, peer, mailfrom, rcpttos, data, **kwargs):  # type: ignore[no-untyped-def]
            received.append((rcpttos, data))

    server = Sink(("127.0.0.1", 0), None)  # type: ignore[arg-type]  # no relay address: process_message keeps it all
    loop = threading.Thread(target=asyncore.loop, kwargs={"timeout": 0.05}, daemon=True)
    loop.start()
    try:
        monkeypatch.setenv("ERASURE_SMTP_HOST", "127.0.0.1")
        assert server.socket is not None
        monkeypatch.setenv("ERASURE_SMTP_PORT", str(server.socket.getsockname()[1]))
        result = CliRunner().invoke(app, ["attest", REQ, "--dpo-key", str(awaiting.keys_dir / "dpo.pem"), "--yes"])
        assert result.exit_code == 0, result.output
    finally:
        server.close()
        loop.join(timeout=5)
    assert len(received) == 1
    rcpt, data = received[0]
    assert rcpt == [SUBJECT.email] and b"sha256:" in data
    assert not (awaiting.outbox_dir / f"{REQ}.eml").exists()
    assert _state(awaiting) == "notified"


# --- export: what the regulator receives ----------------------------------------------------------


def _sealed(h: Home) -> Path:
    result = CliRunner().invoke(app, ["attest", REQ, "--dpo-key", str(h.keys_dir / "dpo.pem"), "--yes"])
    assert result.exit_code == 0, result.output
    return h.evidence_dir(REQ) / "proof.tar.gz"


def _forge_dpo(pack: Path, tmp: Path) -> None:
    """Replace the DPO's envelope with one signed by someone else, naming their own key."""
    mallory = generate_keypair("dpo", tmp / "mallory")
    key = load_private_key(mallory.private)
    top, files = read_members(pack)
    env = json.loads(files["signatures/engine.intoto.json"])
    engine_keyid = env["signatures"][0]["keyid"]
    status = json.loads(base64.b64decode(env["payload"]))["predicate"]["status"]
    covered = {k: v for k, v in files.items() if k != "signatures/dpo.intoto.json"}
    statement = dpo_statement(
        covered,
        request_id=top,
        attested_at="2099-01-01T00:00:00Z",
        dpo_keyid=keyid(key),
        engine_keyid=engine_keyid,
        status=status,
    )
    files["signatures/dpo.intoto.json"] = envelope_bytes(sign_envelope(statement, key))
    pack.write_bytes(repack(top, files))


def test_export_refuses_a_pack_whose_dpo_envelope_is_forged(awaiting: Home, tmp_path: Path) -> None:
    pack = _sealed(awaiting)
    _forge_dpo(pack, tmp_path)
    out = tmp_path / "for-regulator"
    result = CliRunner().invoke(app, ["export", REQ, "--to", str(out)])
    assert result.exit_code != 0
    assert isinstance(result.exception, PackRejected) and result.exception.check == "signature"
    assert not out.exists() or not any(out.iterdir())


def test_pack_show_does_not_call_a_forged_attestation_attested(awaiting: Home, tmp_path: Path) -> None:
    pack = _sealed(awaiting)
    _forge_dpo(pack, tmp_path)
    engine_pub = str(awaiting.keys_dir / "engine.pub.pem")
    shown = CliRunner().invoke(app, ["pack", "show", str(pack), "--engine-key", engine_pub, "--json"])
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.output)
    assert doc["attested"] is False and doc["dpo_keyid"] is None and doc["dpo_attestation"] == "not checked"
    text = CliRunner().invoke(app, ["pack", "show", str(pack), "--engine-key", engine_pub])
    assert "DPO attestation: present, NOT verified" in text.output
    checked = CliRunner().invoke(
        app,
        ["pack", "show", str(pack), "--engine-key", engine_pub, "--dpo-key", str(awaiting.keys_dir / "dpo.pub.pem")],
    )
    assert isinstance(checked.exception, PackRejected) and checked.exception.check == "signature"


def test_pack_show_says_attested_only_when_the_dpo_key_verifies_it(awaiting: Home) -> None:
    pack = _sealed(awaiting)
    keys = awaiting.keys_dir
    shown = CliRunner().invoke(
        app,
        [
            "pack",
            "show",
            str(pack),
            "--engine-key",
            str(keys / "engine.pub.pem"),
            "--dpo-key",
            str(keys / "dpo.pub.pem"),
            "--json",
        ],
    )
    doc = json.loads(shown.output)
    assert doc["attested"] is True and doc["dpo_attestation"] == "verified" and doc["attested_at"]


def _recipe(note: str) -> str:
    blocks: list[str] = re.findall(r"```sh\n(.*?)```", note, re.S)
    assert len(blocks) == 1, "VERIFY.md holds one shell recipe"
    return blocks[0]


@pytest.mark.skipif(
    not all(shutil.which(t) for t in ("jq", "openssl", "sha256sum", "tar")),
    reason="the recipe needs jq, openssl, sha256sum and tar",
)
def test_verify_md_recipe_run_literally_catches_a_tampered_pack_with_fixed_sums(awaiting: Home, tmp_path: Path) -> None:
    _sealed(awaiting)
    out = tmp_path / "for-regulator"
    assert CliRunner().invoke(app, ["export", REQ, "--to", str(out)]).exit_code == 0
    script = out / "recipe.sh"
    script.write_text(_recipe((out / "VERIFY.md").read_text()))
    ok = subprocess.run(["bash", str(script)], cwd=out, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "ALL CHECKS PASSED" in ok.stdout, ok.stdout + ok.stderr

    # The tamperer changes the verification, then fixes manifest.json and SHA256SUMS to match.
    name = f"{REQ}-proof.tar.gz"
    top, files = read_members(out / name)
    files["verification.json"] = json_edit(files["verification.json"], lambda d: d.update(all_clear=False))
    files["manifest.json"] = json_edit(
        files["manifest.json"],
        lambda m: [
            e.update(size=len(files[e["path"]]), sha256=hashlib.sha256(files[e["path"]]).hexdigest())
            for e in m["files"]
        ],
    )
    files["SHA256SUMS"] = sums_of(files)
    (out / name).write_bytes(repack(top, files))
    tampered = subprocess.run(["bash", str(script)], cwd=out, capture_output=True, text=True, timeout=120)
    assert tampered.returncode != 0 and "ALL CHECKS PASSED" not in tampered.stdout, tampered.stdout
    assert "FAILED: signatures/engine.intoto.json: a file differs from what the signer signed" in tampered.stderr


# --- export: where it writes ----------------------------------------------------------------------


def test_export_refuses_a_request_id_that_leaves_the_target(awaiting: Home, tmp_path: Path) -> None:
    pack = _sealed(awaiting)
    escape = awaiting.evidence_root / "escape"  # what evidence/erasure/../escape names
    escape.mkdir(parents=True)
    shutil.copy(pack, escape / "proof.tar.gz")
    out = tmp_path / "nest" / "for-regulator"
    out.parent.mkdir()
    result = CliRunner().invoke(app, ["export", "../escape", "--to", str(out)])
    assert isinstance(result.exception, InputError) and result.exception.exit_code == 2
    assert sorted(p.name for p in out.parent.iterdir()) in ([], ["for-regulator"])
    assert not out.exists() or not any(out.iterdir())


def test_export_refuses_a_non_empty_target_without_force(awaiting: Home, tmp_path: Path) -> None:
    _sealed(awaiting)
    out = tmp_path / "for-regulator"
    out.mkdir()
    (out / "VERIFY.md").write_text("the regulator's own notes\n")
    result = CliRunner().invoke(app, ["export", REQ, "--to", str(out)])
    assert isinstance(result.exception, Conflict) and result.exception.exit_code == 5
    assert (out / "VERIFY.md").read_text() == "the regulator's own notes\n"
    assert sorted(p.name for p in out.iterdir()) == ["VERIFY.md"]
    forced = CliRunner().invoke(app, ["export", REQ, "--to", str(out), "--force"])
    assert forced.exit_code == 0, forced.output
    assert "# Verifying erasure proof pack" in (out / "VERIFY.md").read_text()


def test_export_never_writes_through_a_symlink(awaiting: Home, tmp_path: Path) -> None:
    _sealed(awaiting)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "for-regulator"
    out.mkdir()
    (out / "VERIFY.md").symlink_to(victim)
    (out / f"{REQ}-proof.tar.gz").symlink_to(victim)
    forced = CliRunner().invoke(app, ["export", REQ, "--to", str(out), "--force"])
    assert forced.exit_code == 0, forced.output
    assert victim.read_text() == "precious\n"
    assert not (out / "VERIFY.md").is_symlink() and not (out / f"{REQ}-proof.tar.gz").is_symlink()


def test_export_refuses_a_target_that_is_a_symlink(awaiting: Home, tmp_path: Path) -> None:
    _sealed(awaiting)
    real = tmp_path / "elsewhere"
    real.mkdir()
    link = tmp_path / "for-regulator"
    link.symlink_to(real)
    result = CliRunner().invoke(app, ["export", REQ, "--to", str(link)])
    assert isinstance(result.exception, InputError)
    assert not any(real.iterdir())
