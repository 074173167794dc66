"""Hardening (issue 23, item 9): a hostile subprocessor cannot stall or bloat a run. Real HTTP peers on
127.0.0.1 that drip one byte at a time (in the body, or in the status line) or answer 64 MiB: every
call of our client (`memory.subprocessors`) and of the probes' own client (`probes.subprocessors`)
ends within its total deadline, reads at most its byte cap, and keeps only bounded receipt fields."""

from __future__ import annotations

import json
import socket
import string
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory import subprocessors as sp
from probes import subprocessors as probe_sp
from tests import budget

Handler = Callable[[socket.socket], None]


@dataclass
class Peer:
    """A raw TCP server on 127.0.0.1 that answers every connection with `handler`."""

    handler: Handler
    sock: socket.socket = field(default_factory=lambda: socket.create_server(("127.0.0.1", 0)))
    stop: threading.Event = field(default_factory=threading.Event)
    connections: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            try:
                _read_request(conn)
                self.handler(conn)
            except OSError:
                pass  # the client hung up: what a deadline does


def _read_request(conn: socket.socket) -> None:
    conn.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0
    )
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        rest += chunk


@pytest.fixture
def peer() -> Iterator[Callable[[Handler], Peer]]:
    started: list[tuple[Peer, threading.Thread]] = []

    def start(handler: Handler) -> Peer:
        p = Peer(handler)
        t = threading.Thread(target=p.serve, daemon=True)
        t.start()
        started.append((p, t))
        return p

    yield start
    for p, t in started:
        p.stop.set()
        t.join(timeout=2)
        p.sock.close()


def _head(length: int | None, status: str = "200 OK") -> bytes:
    size = f"Content-Length: {length}\r\n" if length is not None else "Transfer-Encoding: chunked\r\n"
    return f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{size}Connection: close\r\n\r\n".encode()


RECEIPT = json.dumps(
    {"ticket_id": "del_0123456789abcdef", "status": "done", "deleted": 1, "completed_at": "2024-01-01T00:00:00.000000Z"}
).encode()


# --- attack fixtures, named after the attack -----------------------------------------------------


def slow_drip_body(conn: socket.socket) -> None:
    """A valid receipt, one byte every 0.3 s (each read is within any per-read timeout)."""
    conn.sendall(_head(len(RECEIPT)))
    for b in RECEIPT:
        conn.sendall(bytes([b]))
        time.sleep(0.3)


def slow_drip_status_line(conn: socket.socket) -> None:
    """The status line and headers themselves, one byte every 0.3 s."""
    for b in _head(len(RECEIPT)) + RECEIPT:
        conn.sendall(bytes([b]))
        time.sleep(0.3)


HUGE = 64 * 1024 * 1024


def huge_ticket_id(conn: socket.socket) -> None:
    """A 64 MiB ticket_id in a receipt that says done, Content-Length announced."""
    head, tail = b'{"status": "done", "ticket_id": "', b'"}'
    conn.sendall(_head(len(head) + HUGE + len(tail)) + head)
    chunk = b"A" * (1 << 20)
    for _ in range(HUGE // len(chunk)):
        conn.sendall(chunk)
    conn.sendall(tail)


def huge_chunked_answer(conn: socket.socket) -> None:
    """The same 64 MiB, chunked: no Content-Length to refuse up front."""
    conn.sendall(_head(None))
    piece = b"A" * (1 << 20)
    conn.sendall(b'22\r\n{"status": "done", "ticket_id": "X\r\n')
    for _ in range(HUGE // len(piece)):
        conn.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    conn.sendall(b'2\r\n"}\r\n0\r\n\r\n')


def _answer(body: bytes, status: str = "200 OK") -> Handler:
    def handler(conn: socket.socket) -> None:
        conn.sendall(_head(len(body), status) + body)

    return handler


# --- a total deadline per call --------------------------------------------------------------------


@pytest.mark.parametrize("attack", [slow_drip_body, slow_drip_status_line], ids=lambda f: f.__name__)
def test_a_slow_drip_cannot_keep_request_deletion_past_its_deadline(
    peer: Callable[[Handler], Peer], attack: Handler
) -> None:
    p = peer(attack)
    t0 = time.monotonic()
    with pytest.raises(sp.SubprocessorError) as err:
        sp.request_deletion(p.url, "subj-x", timeout=1.0, attempts=2, backoff=0.05)
    took = time.monotonic() - t0
    assert took < 1.0 * 2 + 0.05 + 1.0, f"{took:.1f} s"  # two attempts of 1 s each, backoff, slack
    assert "subj-x" not in str(err.value)


def test_the_call_deadline_covers_every_retry(peer: Callable[[Handler], Peer]) -> None:
    p = peer(slow_drip_body)
    t0 = time.monotonic()
    with pytest.raises(sp.SubprocessorError):
        sp.request_deletion(p.url, "subj-x", timeout=1.0, attempts=50, backoff=0.01, deadline=2.5)
    assert time.monotonic() - t0 < 2.5 + 1.0


def test_a_slow_drip_cannot_stall_polling_rectifying_or_lookups(peer: Callable[[Handler], Peer]) -> None:
    p = peer(slow_drip_body)
    t0 = time.monotonic()
    with pytest.raises(sp.SubprocessorError):
        sp.poll_job(p.url, "del_1", timeout=1.5, interval=0.05, request_timeout=1.0)
    with pytest.raises(sp.SubprocessorError):
        sp.rectify(p.url, "rec_1", "text", timeout=1.0, attempts=1)
    with pytest.raises(sp.SubprocessorError):
        sp.lookup_count(p.url, "subj-x", timeout=1.0, attempts=1)
    assert time.monotonic() - t0 < 1.5 + 1.0 + 1.0 + 1.5


@pytest.mark.parametrize("attack", [slow_drip_body, slow_drip_status_line], ids=lambda f: f.__name__)
def test_the_probes_lookup_has_a_deadline_too(peer: Callable[[Handler], Peer], attack: Handler) -> None:
    p = peer(attack)
    t0 = time.monotonic()
    with pytest.raises(probe_sp.Unreachable):
        probe_sp.lookup(p.url, "subj-x", timeout=1.0)
    # three attempts of at most 1 s each, and the probe's own backoff (0.2 + 0.4 s)
    assert time.monotonic() - t0 < probe_sp.ATTEMPTS * 1.0 + 0.6 + 1.0


# --- a response size limit ------------------------------------------------------------------------


@pytest.mark.parametrize("attack", [huge_ticket_id, huge_chunked_answer], ids=lambda f: f.__name__)
def test_a_64_mib_answer_is_refused_without_reading_it(peer: Callable[[Handler], Peer], attack: Handler) -> None:
    p = peer(attack)
    tracemalloc.start()
    try:
        with pytest.raises(sp.SubprocessorError) as err:
            sp.request_deletion(p.url, "subj-x", timeout=10.0, attempts=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "larger than" in str(err.value)
    assert peak < 8 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB"


@pytest.mark.parametrize("attack", [huge_ticket_id, huge_chunked_answer], ids=lambda f: f.__name__)
def test_the_probe_refuses_a_64_mib_answer(peer: Callable[[Handler], Peer], attack: Handler) -> None:
    p = peer(attack)
    tracemalloc.start()
    try:
        with pytest.raises(probe_sp.Unreachable):
            probe_sp.lookup(p.url, "subj-x", timeout=10.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB"


# --- bounded receipt fields -----------------------------------------------------------------------

TICKET_CHARS = string.ascii_letters + string.digits + "_-"


def ticket_acceptable(t: object) -> bool:
    """The oracle, written apart: 1-128 characters of letters, digits, '_' and '-'. A ticket is put
    into the poll URL's path, so '/', '.', '?', '%' and the like would point the poll elsewhere."""
    return isinstance(t, str) and 1 <= len(t) <= 128 and all(c in TICKET_CHARS for c in t)


@settings(max_examples=budget.examples(80), deadline=None)
@given(
    ticket=st.one_of(
        st.text(alphabet=TICKET_CHARS, min_size=0, max_size=200),
        st.text(min_size=0, max_size=40),
        st.sampled_from(["../admin", "a/b", "a?x=1", "%2e%2e", "a.b", "x" * 129, "x" * 128]),
        st.integers(),
        st.none(),
    ),
    completed=st.one_of(st.just("2024-01-01T00:00:00.000000Z"), st.text(max_size=300)),
)
def test_property_receipt_fields_are_bounded(ticket: object, completed: str) -> None:
    body = json.dumps({"ticket_id": ticket, "status": "done", "deleted": 1, "completed_at": completed}).encode()
    server = socket.create_server(("127.0.0.1", 0))
    p = Peer(_answer(body), sock=server)
    t = threading.Thread(target=p.serve, daemon=True)
    t.start()
    try:
        try:
            receipt = sp.request_deletion(p.url, "subj-x", attempts=1, timeout=5.0)
        except sp.SubprocessorError as exc:
            assert not ticket_acceptable(ticket) or "completed" in str(exc), str(exc)
            return
        assert ticket_acceptable(ticket)
        assert receipt.ticket_id == ticket
        assert receipt.completed_at is None or len(receipt.completed_at) <= 64
    finally:
        p.stop.set()
        t.join(timeout=2)
        server.close()


def test_a_10_kib_ticket_id_is_refused(peer: Callable[[Handler], Peer]) -> None:
    p = peer(_answer(json.dumps({"ticket_id": "A" * 10240, "status": "done"}).encode()))
    with pytest.raises(sp.SubprocessorError, match="ticket id"):
        sp.request_deletion(p.url, "subj-x", attempts=1)


def test_an_honest_peer_still_works(peer: Callable[[Handler], Peer]) -> None:
    p = peer(_answer(RECEIPT))
    receipt = sp.request_deletion(p.url, "subj-x", attempts=1)
    assert (receipt.ticket_id, receipt.status, receipt.deleted) == ("del_0123456789abcdef", "done", 1)
    q = peer(_answer(b'{"subject_ref": "subj-x", "count": 3}'))
    assert probe_sp.lookup(q.url, "subj-x", timeout=2.0) == 3
