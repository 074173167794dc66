"""Quiescing a store's server: stop it (or wait until someone else has), and start it again.

A store served over the network (`chroma run`) keeps its folder open: editing the files under a running
server is a race with its own writes and its in-memory index, which it would persist over ours. So a
target that names its server (`url`) is erased, and read by the probes, only while the server is down:
the side that needs the folder opens a `Window` (`quiesced`), which stops the server (runs the
target's `stop` argv) or waits until it is stopped (its `stopped_check` argv exits 0, or, with nothing
but `url`, the URL no longer answers), both bounded; and, when it closes, runs `start` and waits until
the heartbeat answers. The window measures how long the server was unavailable, and names the requests
it covered: an erasure window of many requests opens one `Window` per served target for all their
erasures, and one for all their verifications. Each such outage goes into the step records of every
request it covered (`Window.outage`, `with_outage`).

Process control only: nothing here reads or writes a store, and nothing it returns or raises carries an
identifier or content (commands' output is discarded; errors name the URL, the key and exit codes).
Commands are argv lists run without a shell; a command that starts a server in the background must not
keep our stdio (they are /dev/null) and runs in its own session, so the server outlives this process.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from erasure.child_env import child_env
from erasure.errors import ErasureError

HEARTBEATS = ("/api/v2/heartbeat", "/api/v1/heartbeat")
"""Chroma's heartbeat: v2 since chromadb 1.0 (1.5 answers v1 with 410 Gone), v1 before."""
PROBE_TIMEOUT = 2.0
HEARTBEAT_MAX_BYTES = 64 * 1024
POLL = 0.2
COMMAND_GRACE = 30.0
"""A command may run this long beyond the wait it belongs to before it is killed."""
LISTED_REQUESTS = 50
"""An outage names the requests it covered up to this many (beyond, their count only)."""


class ServerNotStopped(ErasureError):
    """The server still answers (or its stopped check fails): nothing of its folder was touched."""

    exit_code = 8


class ServerNotStarted(ErasureError):
    """The server did not answer again after its start command: the store is unavailable."""

    exit_code = 8


@dataclass(frozen=True)
class ServerControl:
    """A target's server and how to quiesce it (settings only; built by the kind's configuration)."""

    target: str
    url: str
    stop: tuple[str, ...] = ()
    start: tuple[str, ...] = ()
    stopped_check: tuple[str, ...] = ()
    stop_wait_seconds: float = 60.0
    start_wait_seconds: float = 120.0

    @property
    def managed(self) -> bool:
        """Whether we stop and start the server ourselves (else someone else keeps it stopped)."""
        return bool(self.stop)


@dataclass
class Window:
    """One stretch with the server down: how long it lasted, and whether it came back."""

    control: ServerControl | None
    what: str = "the erasure"
    requests: tuple[str, ...] = ()
    """The requests whose work this stretch covered (request ids: tokens, never identifiers)."""
    stopped_at: float | None = None
    ended_at: float | None = None
    stopped_wall: datetime | None = None
    ended_wall: datetime | None = None
    restarted: bool = False
    start_error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        """How long the store was unavailable (from the stop command, or from when we found it stopped,
        to the heartbeat answering again, or to the end of our work when we do not start it)."""
        if self.stopped_at is None:
            return 0.0
        end = self.ended_at if self.ended_at is not None else time.monotonic()
        return round(end - self.stopped_at, 2)

    def outage(self) -> dict[str, Any]:
        """This stretch for a step record: what it was for, when the server stopped and came back (UTC),
        how long, whether it came back, and the requests it covered (ids and counts only)."""
        return {
            "during": self.what.removeprefix("the "),
            "stopped_at": self.stopped_wall.isoformat() if self.stopped_wall else None,
            "started_at": self.ended_wall.isoformat() if self.ended_wall and self.restarted else None,
            "seconds": self.seconds,
            "restarted": int(self.restarted),
            "requests": len(self.requests),
            **({"request_ids": list(self.requests)} if len(self.requests) <= LISTED_REQUESTS else {}),
        }

    def detail(self) -> dict[str, Any]:
        """For a step record: this stretch as its only outage (`with_outage`)."""
        return with_outage({}, self)

    def raise_if_down(self) -> None:
        """`ServerNotStarted` when the server we stopped did not come back."""
        if self.start_error is not None:
            raise ServerNotStarted(self.start_error)


def with_outage(detail: dict[str, Any], w: Window) -> dict[str, Any]:
    """A step record's detail with one more outage of its target's server: `outages` lists every one
    (the erasure's, the verification's), `unavailable_seconds` is their sum and `server_stops` their
    count, `server_restarted` says whether every one ended with the server back, `server_down` that
    one did not. Unchanged for a target without a server."""
    if w.control is None:
        return detail
    outages = [*detail.get("outages", []), w.outage()]
    out = {
        **detail,
        "outages": outages,
        "server_stops": len(outages),
        "unavailable_seconds": round(sum(float(o["seconds"]) for o in outages), 2),
        "server_restarted": int(all(o["restarted"] for o in outages)),
    }
    if not w.control.managed:
        out["server_left_stopped"] = 1
    if w.start_error is not None:
        out["server_down"] = 1
    return out


def answers(url: str, timeout: float = PROBE_TIMEOUT) -> bool:
    """Whether something still listens at the URL's host and port. Only a refused connection counts as
    "no": a timeout may be a server that hangs with the folder open, so it counts as "yes"."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "localhost", port), timeout=timeout):
            return True
    except ConnectionRefusedError:
        return False
    except OSError:
        return True


def heartbeat(url: str, timeout: float = PROBE_TIMEOUT) -> bool:
    """Whether the server's heartbeat answers 200 (v2, then v1 where v2 is unknown). Each probe ends
    within `timeout` seconds, connect to last byte (`erasure.peer_http`: a server that drips its answer
    cannot hold the store's lock), reads at most a few KB, follows no redirect and uses no proxy."""
    from erasure.peer_http import PeerClient, PeerError

    base = url.rstrip("/")
    with PeerClient(connect_timeout=timeout, max_bytes=HEARTBEAT_MAX_BYTES) as client:
        for path in HEARTBEATS:
            try:
                answer = client.request("GET", base + path, deadline=time.monotonic() + timeout)
            except PeerError:
                return False
            if answer.status_code in (404, 410):
                continue  # this version serves the other path
            return answer.status_code in (200, 401, 403)  # 401/403: up, behind its authentication
    return False


def run_command(argv: tuple[str, ...], timeout: float) -> int:
    """Run one argv (no shell, stdio to /dev/null, its own session, the allowlisted environment of
    `erasure.child_env`: no credential of ours); its exit status (-1: timed out, -2: could not be run)."""
    try:
        done = subprocess.run(
            list(argv),
            env=child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        return -1
    except OSError:
        return -2
    return done.returncode


def _status(code: int) -> str:
    return {-1: "timed out", -2: "could not be run"}.get(code, f"exited with status {code}")


def _stopped(c: ServerControl) -> bool:
    if answers(c.url):
        return False
    return not c.stopped_check or run_command(c.stopped_check, c.stop_wait_seconds + COMMAND_GRACE) == 0


def stop(c: ServerControl, what: str) -> float:
    """Stop the server (or wait until it is stopped), bounded by `stop_wait_seconds`; the monotonic time
    its unavailability began. `ServerNotStopped` when it still answers (or its `stopped_check` fails):
    nothing was touched, and nothing is started (a second server on the folder would be worse).
    A stop command that fails on a server already down is no reason to refuse."""
    began = time.monotonic()
    code = 0
    if c.managed:
        code = run_command(c.stop, c.stop_wait_seconds + COMMAND_GRACE)
    deadline = time.monotonic() + c.stop_wait_seconds
    while True:
        if _stopped(c):
            return began
        if code != 0 or time.monotonic() >= deadline:
            break
        time.sleep(POLL)
    how = (
        f"its stop command {_status(code)}"
        if code != 0
        else f"it still answers {c.stop_wait_seconds:g} s after its stop command"
        if c.managed
        else f"it still answers after {c.stop_wait_seconds:g} s (stop it, or give `stop` and `start` commands)"
    )
    if c.stopped_check and code == 0 and not answers(c.url):
        how = f"its stopped_check did not exit 0 within {c.stop_wait_seconds:g} s"
    raise ServerNotStopped(
        f"target {c.target}: the server at {c.url} was not stopped ({how}): nothing of "
        f"its folder was touched; {what} did not run"
    )


def _start(c: ServerControl, w: Window, what: str) -> None:
    code = run_command(c.start, c.start_wait_seconds + COMMAND_GRACE)
    deadline = time.monotonic() + c.start_wait_seconds
    while code == 0 and not heartbeat(c.url):
        if time.monotonic() >= deadline:
            code = -3
            break
        time.sleep(POLL)
    w.ended_at = time.monotonic()
    w.ended_wall = datetime.now(UTC)
    if code == 0:
        w.restarted = True
        return
    how = (
        f"its heartbeat did not answer within {c.start_wait_seconds:g} s of its start command"
        if code == -3
        else f"its start command {_status(code)}"
    )
    w.start_error = (
        f"target {c.target}: {what} is done, but the server at {c.url} did not start again "
        f"({how}): the server is down; start it, then rerun the request"
    )


@contextmanager
def quiesced(c: ServerControl | None, what: str, requests: tuple[str, ...] = ()) -> Iterator[Window]:
    """A window with the server down (no-op for a target without a server), for the work of `requests`.
    Stops it (or waits until it is stopped) on entry; on exit starts it again (managed) and waits for
    its heartbeat, or, when others manage it, leaves it stopped. A start that fails is kept in
    `Window.start_error` (the caller records its steps, then `raise_if_down`); when the body raised
    too, the body's error is raised with it."""
    w = Window(control=c, what=what, requests=tuple(requests))
    if c is None:
        yield w
        return
    w.stopped_at = stop(c, what)
    w.stopped_wall = datetime.now(UTC) - timedelta(seconds=time.monotonic() - w.stopped_at)
    try:
        yield w
    except BaseException as exc:
        if c.managed:
            _start(c, w, what)
            if w.start_error is not None:
                raise ServerNotStarted(f"{w.start_error} (and {what} did not finish: {type(exc).__name__})") from exc
        raise
    if c.managed:
        _start(c, w, what)
    else:
        w.ended_at = time.monotonic()
        w.ended_wall = datetime.now(UTC)
