"""Issue 23, service mode, item 2: `erasure serve` / `make serve` adopted whatever answered on the port.

Another user's Prefect server on 127.0.0.1 got our deployments and our worker. Now only the home's own
server is reused (its state file names a live Prefect process, and the server there requires the
home's credential and takes it); anything else on the port is refused with one line, before anything
is deployed or started.

Two foreign servers, both real: a bare `prefect server start` with a Prefect home of its own and no
credential (another user's; this project's interpreter lives under /root, which `nobody` cannot run, so
it runs as this user), and a small HTTP server that answers Prefect's health check and says
yes to everything (it would take any credential).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from erasure.config import PROJECT_ROOT, Home
from tests.process_fixtures import clean_env, free_port

pytestmark = pytest.mark.prefect  # real Prefect servers and `erasure serve`, in subprocesses

SERVE_TIMEOUT = 300.0


def serve(h: Home, port: int, out: Path) -> subprocess.Popen[bytes]:
    env = clean_env(ERASURE_HOME=str(h.root), ERASURE_EVIDENCE=str(h.evidence_root))
    with open(out, "wb") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "cli.serve", "--home", str(h.root), "--port", str(port), "--no-sla-now"],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def finish(proc: subprocess.Popen[bytes], out: Path) -> int:
    """Wait until serve exits by itself or says ready (then stop it, as Ctrl-C would); its exit code."""
    deadline = time.monotonic() + SERVE_TIMEOUT
    while proc.poll() is None and "ready:" not in out.read_text() and time.monotonic() < deadline:
        time.sleep(0.5)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return int(proc.returncode)


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home.resolve(tmp_path / "home", tmp_path / "evidence").ensure()


@pytest.fixture(scope="module")
def other_users_prefect_server() -> Iterator[tuple[str, int]]:
    """A bare `prefect server start`, its own Prefect home, no credential: its API URL and its pid. One
    for the module: no test changes it (serve is refused before it deploys anything, which the first
    test checks; the second only reads it)."""
    root = Path(tempfile.mkdtemp(prefix="erasure-h23-foreign-", dir="/tmp"))
    port = free_port()
    env = clean_env(PREFECT_HOME=str(root / "prefect"))
    with open(root / "server.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    api = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 240
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{api}/health", timeout=2).json() is True:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, (root / "server.log").read_text()[-3000:]
            time.sleep(0.5)
        yield api, proc.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)


class _YesToEverything(BaseHTTPRequestHandler):
    def _yes(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body = b"true" if self.path.endswith("/health") else b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PATCH = do_PUT = _yes

    def log_message(self, *_args: object) -> None:
        return


@pytest.fixture
def server_that_says_yes_to_everything() -> Iterator[int]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _YesToEverything)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(srv.server_address[1])
    finally:
        srv.shutdown()
        srv.server_close()


def _one_line_refusal(out: Path, port: int) -> None:
    text = out.read_text()
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, text
    assert lines[0].startswith("error: ") and f"127.0.0.1:{port}" in lines[0], text
    assert "Traceback" not in text and "reusing" not in text


def test_serve_refuses_another_users_prefect_server(
    home: Home, other_users_prefect_server: tuple[str, int], tmp_path: Path
) -> None:
    api, _pid = other_users_prefect_server
    port = int(api.rsplit(":", 1)[1].split("/")[0])
    out = tmp_path / "serve.out"
    rc = finish(serve(home, port, out), out)
    assert rc == 3, out.read_text()
    _one_line_refusal(out, port)
    # Nothing of ours reached it: no pool (so no worker of ours on it), no deployment.
    assert httpx.get(f"{api}/work_pools/erasure-local", timeout=30).status_code == 404
    assert httpx.post(f"{api}/deployments/filter", json={}, timeout=30).json() == []
    assert not (home.root / "server" / "state.json").exists()


def test_serve_refuses_a_server_that_says_yes_to_everything(
    home: Home, server_that_says_yes_to_everything: int, tmp_path: Path
) -> None:
    port = server_that_says_yes_to_everything
    out = tmp_path / "serve.out"
    rc = finish(serve(home, port, out), out)
    assert rc == 3, out.read_text()
    _one_line_refusal(out, port)


def test_a_state_file_pointing_at_a_foreign_server_is_not_the_homes_server(
    home: Home, other_users_prefect_server: tuple[str, int]
) -> None:
    """The home's state file names a live Prefect process, but the server on its port is not ours (the
    home's server died and another user's took the port): the CLI does not use it, `serve` does not
    reuse it."""
    from cli import prefect_api
    from cli.serve import _running_server
    from cli.server_state import ServerState, running_api
    from cli.server_state import write_state as _write_state
    from erasure.errors import ConfigError

    api, pid = other_users_prefect_server
    port = int(api.rsplit(":", 1)[1].split("/")[0])
    _write_state(home, ServerState(host="127.0.0.1", port=port, server_pid=pid))
    assert running_api(home) is None and prefect_api.home_server(home) is None
    with pytest.raises(ConfigError, match="not this home's"):
        _running_server(home, "127.0.0.1", port)
