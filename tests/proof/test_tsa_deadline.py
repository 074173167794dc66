"""The timestamp authority cannot hang a store (issue 34, finding 4). A real TSA stand-in on 127.0.0.1
that drips its answer one byte a second, or answers 1 GiB: the exchange ends within its overall
deadline (connect to last byte), a huge reply is refused as it streams in (never read whole), and an
erasure run asks the TSA only after it released the store's lock: the run ends with no pack, the
request rerunnable, and another erasure of the store was never kept waiting."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from erasure.config import Home
from proof.history import PACK_NAME
from proof.keys import generate_keypair
from proof.tsa import REPLY_TYPE, TimestampAuthority, TimestampFailed
from service.cascade import run_requests
from service.outcome import Outcome
from service.stages import direct
from tests.cascade_fixtures import build_store, store_lock_free, submit

REQ = "req-ann-1"
GIB = 1024**3
DEADLINE = 3.0
SLACK = 2.0


@dataclass
class Tsa:
    """A raw HTTP server on 127.0.0.1: `handler(conn)` answers each request (read whole first)."""

    handler: Callable[[socket.socket], None]
    sock: socket.socket = field(default_factory=lambda: socket.create_server(("127.0.0.1", 0)))
    asked: list[float] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/tsa"

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            self.asked.append(time.monotonic())
            with contextlib.suppress(OSError):  # the client hung up: what its deadline does
                self.handler(conn)


@pytest.fixture
def tsa_server() -> Iterator[Callable[[Callable[[socket.socket], None]], Tsa]]:
    made: list[Tsa] = []

    def start(handler: Callable[[socket.socket], None]) -> Tsa:
        t = Tsa(handler)
        threading.Thread(target=t.serve, daemon=True).start()
        made.append(t)
        return t

    yield start
    for t in made:
        t.sock.close()


def _head(length: int) -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Type: {REPLY_TYPE}\r\nContent-Length: {length}\r\n\r\n".encode()


def trickle_one_byte_a_second(conn: socket.socket) -> None:
    """The status line, headers and a body, one byte a second, for a minute."""
    for b in _head(60) + b"\x30" * 60:
        conn.sendall(bytes([b]))
        time.sleep(1.0)


def one_gib_reply(sent: list[int]) -> Callable[[socket.socket], None]:
    def handler(conn: socket.socket) -> None:
        """1 GiB announced and sent, a MiB at a time, as fast as the client reads."""
        conn.sendall(_head(GIB))
        chunk = b"\x30" * (1 << 20)
        for _ in range(GIB // len(chunk)):
            conn.sendall(chunk)
            sent.append(len(chunk))

    return handler


def one_gib_reply_without_length(sent: list[int]) -> Callable[[socket.socket], None]:
    def handler(conn: socket.socket) -> None:
        """1 GiB with no Content-Length (the body runs to the connection's end): no size to refuse up front."""
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: {REPLY_TYPE}\r\nConnection: close\r\n\r\n".encode())
        chunk = b"\x30" * (1 << 20)
        for _ in range(GIB // len(chunk)):
            conn.sendall(chunk)
            sent.append(len(chunk))

    return handler


def test_a_trickling_tsa_ends_the_exchange_within_its_deadline(tsa_server: Callable[..., Tsa]) -> None:
    t = tsa_server(trickle_one_byte_a_second)
    start = time.monotonic()
    with pytest.raises(TimestampFailed, match="did not answer within"):
        TimestampAuthority(t.url, timeout=DEADLINE).timestamp(b"signature")
    assert time.monotonic() - start < DEADLINE + SLACK


@pytest.mark.parametrize("reply", [one_gib_reply, one_gib_reply_without_length], ids=lambda f: f.__name__)
def test_a_one_gib_tsa_reply_is_refused_without_reading_it_whole(
    tsa_server: Callable[..., Tsa], reply: Callable[[list[int]], Callable[[socket.socket], None]]
) -> None:
    sent: list[int] = []
    t = tsa_server(reply(sent))
    tracemalloc.start()
    try:
        with pytest.raises(TimestampFailed, match="larger than"):
            TimestampAuthority(t.url, timeout=30).timestamp(b"signature")
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024, f"peak {peak} bytes"
    time.sleep(0.5)
    assert sum(sent) < 64 * 1024 * 1024  # the server could not push the whole GiB: the client hung up


def test_a_trickling_tsa_ends_the_run_with_no_pack_and_the_store_lock_released(
    home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tsa_server: Callable[..., Tsa]
) -> None:
    lock_free_when_asked: list[bool] = []

    def trickle_and_check_the_lock(conn: socket.socket) -> None:
        lock_free_when_asked.append(store_lock_free(home))
        trickle_one_byte_a_second(conn)

    build_store(home, tmp_path)
    submit(home, REQ)
    generate_keypair("engine", home.keys_dir)
    t = tsa_server(trickle_and_check_the_lock)
    monkeypatch.setenv("ERASURE_TSA_URL", t.url)
    monkeypatch.setenv("ERASURE_TSA_TIMEOUT", str(DEADLINE))
    result = run_requests(home, [REQ], direct(home))[REQ]
    ended = time.monotonic()
    assert result.outcome is Outcome.no_pack, result
    assert "timestamp" in (result.detail or "")
    assert not (home.evidence_dir(REQ) / PACK_NAME).exists()
    assert lock_free_when_asked == [True]  # the store was released before the TSA was asked
    assert ended - t.asked[0] < DEADLINE + SLACK  # the run gave up on the TSA at its deadline
    assert store_lock_free(home)
