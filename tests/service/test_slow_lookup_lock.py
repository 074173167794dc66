"""A processor whose lookups trickle cannot hold the store (issue 34: no network call while a store lock
is held). A real processor (the reference subprocessor service) sits behind a proxy on 127.0.0.1 that
answers one subject's `/v1/lookup` one byte a second, for as long as the caller waits; every other call
is relayed to the processor. While that lookup is in flight (the erasure's verification, or a
re-verification), the store's lock is free and a second erasure of the same store runs to all clear
without waiting; no lookup at all (the fingerprint's included) is made with the store's lock held. The
slow subject's processor ends residue-unknown (`lookup-unreachable`), never all clear."""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from erasure.states import RequestState
from memory import subprocessors as sp
from memory.schema import create
from memory.subprocessor_service import start_service
from probes import subprocessors as lookups
from proof.keys import generate_keypair
from service.outcome import Outcome, Result
from service.reverification import reverify_request
from tests.cascade_fixtures import BYSTANDER, SUBJECT, build_store, run_direct, store_lock_free, submit
from tests.engine_of import EngineOf

SLOW = "req-slow-1"
OTHER = "req-other-2"
ATTEMPTS = 20
"""Lookup tries, each over by the probes' 5 s deadline: the trickle stays in flight far longer than
the second erasure takes (it ends when the test hangs up)."""


@dataclass
class Trickler:
    """The proxy. `slow` set: the slow subject's lookups get their status line one byte a second
    until `release` is set, then a hang-up. `watching`: lookups seen record whether the store's lock
    was free then (cleared once the second erasure starts, whose own lock is no concern here)."""

    home: Home
    upstream: str
    slow_ref: str
    slow: threading.Event = field(default_factory=threading.Event)
    asked: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    trickle_ended: threading.Event = field(default_factory=threading.Event)
    watching: bool = True
    lock_free_at_lookup: list[bool] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def handle(self, req: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(req.path)
        if url.path == "/v1/lookup":
            if self.watching:
                self.lock_free_at_lookup.append(store_lock_free(self.home))
            if self.slow.is_set() and parse_qs(url.query).get("subject_ref") == [self.slow_ref]:
                self.asked.set()
                try:
                    for b in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n":
                        if self.release.is_set():
                            return
                        req.wfile.write(bytes([b]))
                        req.wfile.flush()
                        self.release.wait(1.0)
                finally:
                    self.trickle_ended.set()
                return
        body = req.rfile.read(int(req.headers.get("Content-Length") or 0))
        up = urlsplit(self.upstream)
        conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port, timeout=30)
        try:
            conn.request(method, req.path, body or None, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        req.send_response(resp.status)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(data)))
        req.end_headers()
        req.wfile.write(data)


def _handler(t: Trickler) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            with contextlib.suppress(OSError):
                t.handle(self, "GET")

        def do_POST(self) -> None:
            with contextlib.suppress(OSError):
                t.handle(self, "POST")

        def do_PUT(self) -> None:
            with contextlib.suppress(OSError):
                t.handle(self, "PUT")

    return Handler


@pytest.fixture
def trickler(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Trickler]:
    """The store (subject and bystander, their records at `crm-sync`) with `crm-sync` answering
    through the proxy, one engine key, both requests submitted."""
    monkeypatch.setattr(lookups, "ATTEMPTS", ATTEMPTS)
    monkeypatch.setattr(lookups, "BACKOFF", 0.01)
    with start_service("crm-sync", home.services_dir) as svc:
        build_store(home, tmp_path, processors=[svc])
        t = Trickler(home=home, upstream=svc.url, slow_ref=SUBJECT.id)
        t.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(t))
        t.server.daemon_threads = True
        threading.Thread(target=t.server.serve_forever, daemon=True).start()
        conn = create(home.store_dir)
        try:  # the processor now answers through the proxy
            sp.register(conn, "crm-sync", t.url, "crm", ["profile"])
        finally:
            conn.close()
        generate_keypair("engine", home.keys_dir)
        submit(home, SLOW)
        submit(home, OTHER, BYSTANDER)
        try:
            yield t
        finally:
            t.release.set()
            t.server.shutdown()
            t.server.server_close()


def _while_trickling(t: Trickler, slow_run: Callable[[], object]) -> tuple[Result, float, bool]:
    """Start `slow_run`; once its slow lookup is in flight, erase the other request. Returns the other
    request's result, how long it took, and whether the slow lookup was still in flight at its end."""
    first = threading.Thread(target=slow_run)
    first.start()
    try:
        assert t.asked.wait(180), "the slow subject's processor was never asked"
        t.watching = False
        started = time.monotonic()
        other = run_direct(t.home, [OTHER])[OTHER]
        took = time.monotonic() - started
        in_flight = not t.trickle_ended.is_set()
    finally:
        t.release.set()
        first.join(180)
    assert not first.is_alive(), "the slow run did not end after the processor hung up"
    print(f"second erasure of the store: {took:.1f} s while a lookup was in flight")
    return other, took, in_flight


def test_a_trickling_lookup_in_the_verification_keeps_no_other_erasure_waiting(trickler: Trickler) -> None:
    trickler.slow.set()
    slow: dict[str, Result] = {}
    other, took, in_flight = _while_trickling(trickler, lambda: slow.update(run_direct(trickler.home, [SLOW])))
    assert trickler.lock_free_at_lookup and all(trickler.lock_free_at_lookup), trickler.lock_free_at_lookup
    assert other.outcome is Outcome.all_clear, other
    assert in_flight, f"the second erasure ended only after the slow lookup ({took:.1f} s)"
    assert slow[SLOW].outcome is Outcome.residue, slow  # residue-unknown at the processor: never all clear
    assert "subprocessors" in (slow[SLOW].detail or "")
    doc = json.loads((trickler.home.run_dir(SLOW) / "verification.json").read_text())
    methods = {(p["tier"], p["method"]): p["residue"] for p in doc["probes"]}
    assert methods[("subprocessors", "lookup-unreachable:crm-sync")] == 1


def test_a_trickling_lookup_in_a_reverification_keeps_no_other_erasure_waiting(
    trickler: Trickler, engine_of: EngineOf
) -> None:
    first = run_direct(trickler.home, [SLOW])[SLOW]
    assert first.outcome is Outcome.all_clear, first  # every lookup answered at once
    engine = open_engine(trickler.home.engine_db)
    try:  # the DPO's seal is not what this is about: the engine-signed pack is re-verified as is
        request_records.set_state(engine, SLOW, RequestState.sealed)
    finally:
        engine.close()
    trickler.lock_free_at_lookup.clear()
    trickler.slow.set()
    got: dict[str, Any] = {}
    other, took, in_flight = _while_trickling(
        trickler, lambda: got.update(reverify_request(engine_of(trickler.home), trickler.home, SLOW))
    )
    assert trickler.lock_free_at_lookup and all(trickler.lock_free_at_lookup), trickler.lock_free_at_lookup
    assert other.outcome is Outcome.all_clear, other
    assert in_flight, f"the second erasure ended only after the slow lookup ({took:.1f} s)"
    assert got["reopened"] is True and got["residue_tiers"] == ["subprocessors"], got
    assert "subprocessors/lookup-unreachable:crm-sync" in got["residue_methods"]
