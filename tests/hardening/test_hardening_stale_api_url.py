"""Issue 34, finding 2: the CLI handed the home's Prefect credential to whoever listened. With
`PREFECT_API_URL` naming a local port the home's server is not on (a stale export, a stopped server),
or a state file whose server is gone, another local user who bound that port and answered `/health`
and 401 collected the credential from the CLI's "is this server ours?" probe.

The attack, as it happened: a listener run as the OS user `nobody` (the system's Python) answers
`/health` with `true` and everything else with 401, and writes down every Authorization header it gets.
Then, as root, the ordinary commands: `erasure request run`, `erasure server automation` with the stale
export, and `erasure server status` / `request run` with a state file naming that port and a live
process that merely looks like Prefect. The listener must receive no credential. `--api-url` is the
user's explicit word: then it is sent (checked last, so the listener does see it).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cli.prefect_auth import home_secret
from erasure.config import Home
from tests.process_fixtures import clean_env, erasure, free_port

pytestmark = pytest.mark.prefect  # `request run` starts a temporary Prefect server when it finds none

SYSTEM_PYTHON = "/usr/bin/python3"

LISTENER = r"""
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class H(BaseHTTPRequestHandler):
    def _answer(self):
        sys.stdout.write("AUTH " + str(self.headers.get("Authorization")) + "\n")
        sys.stdout.flush()
        if self.path.rstrip("/").endswith("/health"):
            body, code = b"true", 200
        else:
            body, code = b'{"exception_message": "Unauthorized"}', 401
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer
    def log_message(self, *a):
        pass

HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


@dataclass
class Squatter:
    port: int
    proc: subprocess.Popen[str]

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def received(self) -> str:
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=30)
        return out


@pytest.fixture
def squatter() -> Iterator[Squatter]:
    if os.geteuid() != 0 or shutil.which("runuser") is None or not Path(SYSTEM_PYTHON).exists():
        pytest.skip("needs root, runuser and /usr/bin/python3 to act as the user nobody")
    port = free_port()
    proc = subprocess.Popen(
        ["runuser", "-u", "nobody", "--", SYSTEM_PYTHON, "-c", LISTENER, str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd="/",
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    s = Squatter(port, proc)
    try:
        yield s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


@pytest.fixture
def home() -> Iterator[Home]:
    from proof.keys import generate_keypair

    root = Path(tempfile.mkdtemp(prefix="erasure-h34-stale-", dir="/tmp"))
    h = Home.resolve(root / "home", root / "evidence").ensure()
    generate_keypair("engine", h.keys_dir)
    home_secret(h)
    try:
        yield h
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _leaked(received: str, secret: str) -> bool:
    return secret in received or base64.b64encode(secret.encode()).decode() in received


def _env(h: Home, **extra: str) -> dict[str, str]:
    return clean_env(ERASURE_HOME=str(h.root), ERASURE_EVIDENCE=str(h.evidence_root), **extra)


def test_a_listener_on_a_stale_prefect_api_url_receives_no_credential(squatter: Squatter, home: Home) -> None:
    env = _env(home, PREFECT_API_URL=squatter.api)
    erasure(env, "request", "run", "req-stale-0001", timeout=120)
    erasure(env, "server", "automation", "--webhook", "http://127.0.0.1:9/hook", timeout=120)
    received = squatter.received()
    assert "AUTH" in received  # the commands did talk to it
    assert not _leaked(received, home_secret(home))


def test_a_listener_on_a_stopped_servers_port_receives_no_credential(squatter: Squatter, home: Home) -> None:
    """The state file names the port, and a live process whose command line says `prefect` (a recycled
    pid, say) stands for the server: still, the listener there is not that process's."""
    decoy = subprocess.Popen(["sh", "-c", "sleep 120", "prefect-server"], start_new_session=True)
    try:
        state = {"host": "127.0.0.1", "port": squatter.port, "server_pid": decoy.pid, "worker_pids": []}
        (home.root / "server").mkdir(exist_ok=True)
        (home.root / "server" / "state.json").write_text(json.dumps(state))
        env = _env(home)
        erasure(env, "server", "status", "--json", timeout=120)
        erasure(env, "request", "run", "req-stale-0001", timeout=120)
    finally:
        decoy.kill()
        decoy.wait()
    assert not _leaked(squatter.received(), home_secret(home))


def test_a_url_named_with_api_url_is_trusted_with_the_credential(squatter: Squatter, home: Home) -> None:
    env = _env(home)
    erasure(env, "--api-url", squatter.api, "server", "automation", "--webhook", "http://127.0.0.1:9/h", timeout=120)
    assert _leaked(squatter.received(), home_secret(home))
