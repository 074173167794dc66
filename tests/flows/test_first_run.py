"""The first erasure in a brand-new home works, even on a busy machine (service-mode issue, item 1).

A temporary Prefect server migrates a new database inside its 20 s start-up window; on a busy 2-core
machine it missed that window and the first `erasure request run` failed. These tests start from an
empty home and a Prefect home that has never been used, with real subprocesses."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from erasure.config import PROJECT_ROOT, Home

pytestmark = pytest.mark.prefect  # a new home's first run migrates Prefect's database, in subprocesses


def _cli_env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ERASURE_"))}
    env.update(
        ERASURE_HOME=str(root / "home"),
        ERASURE_EVIDENCE=str(root / "evidence"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        **extra,
    )
    return env


def _erasure(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=PROJECT_ROOT,
        env=env,
        text=True,
        capture_output=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def busy_core() -> Iterator[None]:
    """Keep one core busy, as another job on the machine would."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def test_prepare_migrates_a_new_prefect_home_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cli import prefect_api

    h = Home.resolve(tmp_path / "home", tmp_path / "ev").ensure()
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    for var in ("PREFECT_API_AUTH_STRING", "PREFECT_SERVER_API_AUTH_STRING"):  # prepare() sets them
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(h.prefect_home))
    assert not (h.prefect_home / "prefect.db").exists()

    assert prefect_api.prepare(h) is None
    db = sqlite3.connect(h.prefect_home / "prefect.db")
    try:
        (revision,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        db.close()
    assert revision and {"flow_run", "task_run", "deployment"} <= tables
    # A second command finds the database ready and does not migrate again.
    assert prefect_api.migrate_database(h, say=False) is False


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_prefect_api_is_one_line_and_exit_3(tmp_path: Path) -> None:
    env = _cli_env(tmp_path, PREFECT_API_URL=f"http://127.0.0.1:{_closed_port()}/api")
    assert _erasure(env, "keys", "generate", "--role", "engine").returncode == 0
    res = _erasure(env, "request", "run", "req-any-0001")
    assert res.returncode == 3, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not answer" in lines[0], res.stderr
    assert "Traceback" not in res.stderr + res.stdout


def test_first_request_run_in_a_brand_new_home_on_a_busy_machine(tmp_path: Path, busy_core: None) -> None:
    """Fresh ERASURE_HOME, never-used Prefect home, no PREFECT_API_URL, one core spinning."""
    env = _cli_env(tmp_path)
    init = _erasure(env, "store", "init", "--demo", "--frames", "1000", "--subjects", "2", "--json")
    assert init.returncode == 0, init.stderr
    assert _erasure(env, "keys", "generate", "--role", "engine").returncode == 0
    subjects = json.loads((tmp_path / "home" / "demo-subjects.json").read_text())["subjects"]
    envelope = {
        "request_id": "req-first-0001",
        "tenant_id": "default",
        "subject": subjects[0],
        "legal_basis": "GDPR",
        "received_at": (datetime.now(UTC) - timedelta(days=1)).isoformat(),
        "requester_identity_proof_ref": "idv/first-run",
        "reason": "Art.17 request",
    }
    req = tmp_path / "request.json"
    req.write_text(json.dumps(envelope))
    assert _erasure(env, "request", "submit", str(req)).returncode == 0

    run = _erasure(env, "request", "run", "req-first-0001", "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out["probes_all_clear"] is True and out["state"] == "awaiting attestation"
    # Prefect's database lives in this home, not in a warm home elsewhere.
    assert (tmp_path / "home" / "prefect" / "prefect.db").exists()
