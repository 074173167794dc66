"""`erasure attest` (the DPO seals a request's pack) and `erasure export`, on a real erased store.

The pack comes from the same functions the flow's tasks run (no Prefect needed here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from erasure import requests
from erasure.config import Home
from erasure.engine import open_engine
from erasure.errors import RequestBlocked
from erasure.states import RequestState
from flows.pack_writer import write_engine_pack
from flows.verification import probes_task, take_and_seal_fingerprint
from proof.errors import SameKeyRefused
from proof.keys import generate_keypair
from tasks.runner import run_cascade
from tests.cascade_fixtures import SUBJECT, build_store, submit

REQ = "req-ann-1"


def _state(h: Home) -> str:
    engine = open_engine(h.engine_db)
    try:
        return requests.get(engine, REQ).state.value
    finally:
        engine.close()


@pytest.fixture
def awaiting(home: Home, tmp_path: Path) -> Home:
    build_store(home, tmp_path)
    submit(home)
    generate_keypair("engine", home.keys_dir)
    generate_keypair("dpo", home.keys_dir)
    take_and_seal_fingerprint(REQ, home)
    run_cascade(REQ, home)
    assert probes_task.fn(REQ)["all_clear"]
    write_engine_pack(REQ, home)
    engine = open_engine(home.engine_db)
    requests.set_state(engine, REQ, RequestState.awaiting_attestation)
    engine.close()
    return home


def test_attest_seals_verifies_and_notifies_the_requester(awaiting: Home) -> None:
    result = CliRunner().invoke(app, ["attest", REQ, "--dpo-key", str(awaiting.keys_dir / "dpo.pem"), "--yes"])
    assert result.exit_code == 0, result.output
    assert _state(awaiting) == "notified"
    pack = awaiting.evidence_dir(REQ) / "proof.tar.gz"
    out = subprocess.run([sys.executable, "-m", "proof.verify", str(pack),
                          "--engine-key", str(awaiting.keys_dir / "engine.pub.pem"),
                          "--dpo-key", str(awaiting.keys_dir / "dpo.pub.pem")], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "OK", out.stdout + out.stderr
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
    requests.set_state(engine, REQ, RequestState.exception)
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
        ["VERIFY.md", "dpo.pub.pem", "engine.pub.pem", f"{REQ}-proof.tar.gz"])
    verify = subprocess.run([sys.executable, "-m", "proof.verify", str(out / f"{REQ}-proof.tar.gz"),
                             "--engine-key", str(out / "engine.pub.pem"), "--dpo-key", str(out / "dpo.pub.pem")],
                            capture_output=True, text=True)
    assert verify.stdout.strip() == "OK"
    note = (out / "VERIFY.md").read_text()
    for needle in SUBJECT.identifiers():
        assert needle not in note


def test_with_smtp_configured_the_requester_is_mailed_and_no_outbox_file_is_kept(
        awaiting: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real SMTP server on 127.0.0.1 (the stdlib's, in Python 3.11) receives the notification."""
    import asyncore
    import smtpd
    import threading

    received: list[tuple[list[str], bytes]] = []

    class Sink(smtpd.SMTPServer):
        def process_message(self, peer, mailfrom, rcpttos, data, **kwargs):  # type: ignore[no-untyped-def]
            received.append((rcpttos, data))

    server = Sink(("127.0.0.1", 0), None)
    loop = threading.Thread(target=asyncore.loop, kwargs={"timeout": 0.05}, daemon=True)
    loop.start()
    try:
        monkeypatch.setenv("ERASURE_SMTP_HOST", "127.0.0.1")
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
