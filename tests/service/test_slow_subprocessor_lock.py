"""A slow subprocessor cannot hold the store (issue 34, finding 4: no network call while a store lock
is held). A real processor stand-in on 127.0.0.1 answers its deletion call one byte a second, for as
long as the caller waits; while that call is in flight, the store's lock is free and a second erasure
of the same store runs to its signed pack without waiting. The slow processor's own request ends with
a failed receipt and a retryable step, never a success."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from memory import subprocessors as sp
from memory.schema import create
from memory.subprocessor_service import start_service
from proof.keys import generate_keypair
from service.cascade import run_requests
from service.outcome import Outcome, Result
from service.stages import direct
from tests.cascade_fixtures import BYSTANDER, build_store, store_lock_free, submit

SLOW = "req-slow-1"
OTHER = "req-other-2"
CALL_SECONDS = 90.0
"""The deletion call's deadline here: far longer than the second erasure takes, so on a store that
waits for the call, the second erasure is seen waiting (the call ends only when the test hangs up)."""


@dataclass
class Trickler:
    """A processor on 127.0.0.1: lookups answer `{"count": 0}` at once; a deletion call gets its status
    line and headers one byte a second until the caller hangs up or `release` is set."""

    sock: socket.socket = field(default_factory=lambda: socket.create_server(("127.0.0.1", 0)))
    deletion_asked: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    deletion_ended_at: list[float] = field(default_factory=list)
    lock_free_while_called: list[bool] = field(default_factory=list)
    home: Home | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            if data.startswith(b"POST /v1/deletions"):
                assert self.home is not None
                self.lock_free_while_called.append(store_lock_free(self.home))
                self.deletion_asked.set()
                try:
                    for b in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n":
                        if self.release.is_set():
                            return
                        conn.sendall(bytes([b]))
                        time.sleep(1.0)
                finally:
                    self.deletion_ended_at.append(time.monotonic())
                return
            body = b'{"count": 0}'
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            conn.sendall(head.encode() + b"Connection: close\r\n\r\n" + body)


@pytest.fixture
def trickler(home: Home) -> Iterator[Trickler]:
    t = Trickler(home=home)
    threading.Thread(target=t.serve, daemon=True).start()
    yield t
    t.release.set()
    t.sock.close()


def test_a_slow_subprocessor_keeps_no_other_erasure_of_the_store_waiting(
    home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trickler: Trickler
) -> None:
    with start_service("crm-sync", home.services_dir) as svc:  # the ingest pushes the subject's record
        build_store(home, tmp_path, processors=[svc])
    conn = create(home.store_dir)
    try:  # the processor now answers from the trickler's address
        sp.register(conn, "crm-sync", trickler.url, "crm", ["profile"])
    finally:
        conn.close()
    generate_keypair("engine", home.keys_dir)
    submit(home, SLOW)
    submit(home, OTHER, BYSTANDER)
    defaults = sp.request_deletion.__kwdefaults__
    assert defaults is not None
    monkeypatch.setitem(defaults, "deadline", CALL_SECONDS)
    monkeypatch.setitem(defaults, "timeout", CALL_SECONDS)
    monkeypatch.setitem(defaults, "attempts", 1)

    slow: dict[str, Result] = {}
    first = threading.Thread(target=lambda: slow.update(run_requests(home, [SLOW], direct(home))))
    first.start()
    try:
        assert trickler.deletion_asked.wait(120), "the slow request never called its processor"
        started = time.monotonic()
        other = run_requests(home, [OTHER], direct(home))[OTHER]
        took = time.monotonic() - started
        still_calling = not trickler.deletion_ended_at
    finally:
        trickler.release.set()
        first.join(CALL_SECONDS + 60)
    print(f"second erasure of the store: {took:.1f} s while the processor was being called")
    assert trickler.lock_free_while_called == [True]  # no lock of the store held during the call
    assert other.outcome is Outcome.all_clear, other
    assert still_calling, f"the second erasure ended only after the slow call ({took:.1f} s)"
    assert slow[SLOW].outcome is Outcome.failed, slow  # the slow processor never confirmed: rerunnable
    assert "subprocessors" in (slow[SLOW].detail or "")
    engine = open_engine(home.engine_db)
    try:
        assert [(r.processor, r.status) for r in request_records.receipts(engine, SLOW)] == [("crm-sync", "failed")]
    finally:
        engine.close()


def test_another_erasures_subject_is_never_sampled_as_a_processors_bystander(home: Home, tmp_path: Path) -> None:
    """Its deletion call runs with the store unlocked, so it may land between this fingerprint and its
    verification: sampled, it would read as another person's data lost at the processor."""
    from service.verification import take_window_all
    from tests.cascade_fixtures import SUBJECT

    with start_service("crm-sync", home.services_dir) as svc:
        build_store(home, tmp_path, processors=[svc])
        conn = create(home.store_dir)
        try:  # a third person has a record at the processor too: the sample keeps someone
            conn.execute(
                "INSERT INTO subprocessor_records(processor, subject_id, source, source_ref, remote_ref, created_at)"
                " SELECT processor, ?, source, 'conv-x', remote_ref, created_at FROM subprocessor_records LIMIT 1",
                ("user-carol-0001",),
            )
        finally:
            conn.close()
        submit(home, SLOW)
        submit(home, OTHER, BYSTANDER)
        before = take_window_all(home, [BYSTANDER])[0].keys.subprocessor_bystanders["crm-sync"]
        assert SUBJECT.id in before  # no request has recorded the subject's store ids yet
        engine = open_engine(home.engine_db)
        try:
            request_records.add_store_ids(engine, SLOW, [SUBJECT.id])  # what its run records before any call
        finally:
            engine.close()
        after = take_window_all(home, [BYSTANDER])[0].keys.subprocessor_bystanders["crm-sync"]
        assert after == sorted(set(before) - {SUBJECT.id}) and after
