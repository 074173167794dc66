"""The CLI's own calls to the Prefect REST API ride out a busy server.

Prefect's server answers 503 "Service Unavailable" when its SQLite database is busy (a lock held by
another writer), and 429/502 in front of a proxy; Prefect's own clients retry those. The CLI's calls (the
desk starting a run, `server status` reading the schedule, `serve` setting the pool's template, a
deployment run started by hand) used a plain HTTP client and failed on the first one: CI saw it as a 503
on `create_flow_run` while eight runs wrote at once.

The server here is a real HTTP server on 127.0.0.1 that speaks the few routes those calls use and answers
"busy" to the requests a plan names; the oracle is the same call against the same server never busy.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli import desk, serve, server
from cli.prefect_auth import CLIENT_VAR

SECRET = "busy-test-secret"


class FakePrefect:
    """The state behind the routes: one deployment per name, runs created, the pool's template."""

    def __init__(self, busy: dict[int, tuple[int, str | None]]) -> None:
        self.busy = busy  # request number -> (status, Retry-After header or None)
        self.count = 0
        self.served: list[tuple[str, str]] = []  # (method, path) of every request answered for real
        self.runs: list[dict[str, Any]] = []
        self.pool: dict[str, Any] | None = None
        self.lock = threading.Lock()

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        path = path.removeprefix("/api")
        if path.startswith("/deployments/name/"):
            name = path.split("/")[-1]
            schedules = [{"active": True, "schedule": {"cron": "0 * * * *"}}]
            return 200, {"id": f"dep-{name}", "paused": False, "schedules": schedules}
        if path.endswith("/create_flow_run") and method == "POST":
            run = {"id": f"run-{len(self.runs) + 1}", "parameters": body.get("parameters")}
            self.runs.append(run)
            return 201, run
        if path == "/flow_runs/filter":
            return 200, [{"expected_start_time": "2026-12-05T04:00:00+00:00"}]
        if path == "/work_pools/erasure-local":
            if self.pool is None:
                return 404, {"detail": "not found"}
            if method == "PATCH":
                self.pool.update(body)
                return 204, None
            return 200, self.pool
        if path == "/work_pools/" and method == "POST":
            self.pool = dict(body)
            return 201, self.pool
        return 404, {"detail": path}


def _handler(state: FakePrefect) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _reply(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
            data = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null")
            if self.headers.get("Authorization") is None:
                self._reply(401, {"detail": "no credential"})
                return
            with state.lock:
                n = state.count
                state.count += 1
                if n in state.busy:
                    status, retry_after = state.busy[n]
                    extra = {"Retry-After": retry_after} if retry_after is not None else {}
                    self._reply(status, {"exception_message": "Service Unavailable"}, extra)
                    return
                status, payload = state.answer(self.command, self.path, body)
                state.served.append((self.command, self.path))
            self._reply(status, payload)

        do_GET = do_POST = do_PATCH = _any

    return Handler


@contextmanager
def fake_prefect(busy: dict[int, tuple[int, str | None]]) -> Iterator[tuple[str, FakePrefect]]:
    state = FakePrefect(busy)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/api", state
    finally:
        srv.shutdown()
        srv.server_close()


# every call of the CLI that talks to the API, as (name, call(api_url) -> its result)
CALLS: dict[str, Callable[[str], Any]] = {
    "desk starts a run": lambda api: desk.start_run(api, SECRET, "req-busy-1"),
    "a deployment run by hand": lambda api: serve.run_deployment_now(api, "sla-monitor/sla-monitor", {}, SECRET),
    "server status reads the schedule": lambda api: server.next_runs(api, SECRET),
    "serve sets the pool's template": lambda api: serve.ensure_pool(api, {CLIENT_VAR: SECRET}),
}


def _outcome(call: str, busy: dict[int, tuple[int, str | None]]) -> tuple[Any, list[tuple[str, str]], list[Any]]:
    with fake_prefect(busy) as (api, state):
        result = CALLS[call](api)
        return result, state.served, state.runs


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_503_from_a_busy_server_is_retried_like_prefects_own_client(call: str) -> None:
    """Prefect's server sends its 503 with no Retry-After: the call waits and asks again."""
    calm = _outcome(call, {})
    assert _outcome(call, {0: (503, None)}) == calm


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    call=st.sampled_from(sorted(CALLS)),
    busy=st.dictionaries(
        st.integers(min_value=0, max_value=5), st.tuples(st.sampled_from([429, 502, 503]), st.just("0")), max_size=3
    ),
)
def test_any_busy_answers_leave_the_result_and_the_requests_served_unchanged(
    call: str, busy: dict[int, tuple[int, str | None]]
) -> None:
    """Whichever requests of a call meet a busy server (a few, as a locked database gives), the call
    returns what it returns against a calm server, and the server served the same requests: none lost,
    none made twice (a second run started would be a second erasure run)."""
    assert _outcome(call, busy) == _outcome(call, {})
