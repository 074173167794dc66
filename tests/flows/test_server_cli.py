"""`erasure server` without a running server, and commands that talk to Prefect pointed at nothing: one
line and exit 3 (service-mode issue). Real subprocesses; no Prefect server is started here."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from erasure.config import PROJECT_ROOT, Home


def _env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ERASURE_"))}
    env.update(
        ERASURE_HOME=str(root / "home"),
        ERASURE_EVIDENCE=str(root / "evidence"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        **extra,
    )
    return env


def _erasure(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=PROJECT_ROOT,
        env=env,
        text=True,
        capture_output=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_status_and_stop_without_a_server(tmp_path: Path) -> None:
    env = _env(tmp_path)
    res = _erasure(env, "server", "status")
    assert res.returncode == 1 and "not running" in res.stdout
    res = _erasure(env, "server", "status", "--json")
    assert res.returncode == 1 and json.loads(res.stdout)["running"] is False
    res = _erasure(env, "server", "stop")
    assert res.returncode == 0 and "not running" in res.stdout


def test_automation_with_prefect_api_url_at_nothing_is_one_line_and_exit_3(tmp_path: Path) -> None:
    env = _env(tmp_path, PREFECT_API_URL=f"http://127.0.0.1:{_closed_port()}/api")
    res = _erasure(env, "server", "automation", "--webhook", "http://127.0.0.1:9/dpo")
    assert res.returncode == 3, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not answer" in lines[0], res.stderr
    assert "Traceback" not in res.stderr + res.stdout


def test_automation_without_any_server_is_one_line_and_exit_3(tmp_path: Path) -> None:
    res = _erasure(_env(tmp_path), "server", "automation", "--webhook", "http://127.0.0.1:9/dpo")
    assert res.returncode == 3 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "erasure server start" in res.stderr


def test_a_stale_state_file_is_not_a_server(tmp_path: Path) -> None:
    """A state file left by a server that died (its pid gone or recycled) is ignored: commands fall back
    to a temporary server, and `start` starts afresh."""
    from cli import prefect_api
    from cli.server_state import ServerState, read_state, running_api
    from cli.server_state import write_state as _write_state

    h = Home.resolve(tmp_path / "home", tmp_path / "ev").ensure()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _write_state(h, ServerState(host="127.0.0.1", port=_closed_port(), server_pid=dead.pid))
    assert read_state(h) is not None
    assert running_api(h) is None and prefect_api.home_server(h) is None
    # A live process that is not Prefect (a recycled pid) is not the server either.
    _write_state(h, ServerState(host="127.0.0.1", port=_closed_port(), server_pid=os.getpid()))
    assert running_api(h) is None
    res = _erasure(_env(tmp_path), "server", "status")
    assert res.returncode == 1 and "DOWN" in res.stdout
