"""HTTP to peers we do not trust (the subprocessors, a timestamp authority, a server's heartbeat), with a
total deadline and a byte cap.

httpx's timeouts are per socket operation: a peer that sends one byte every few seconds never trips
them and holds a call for as long as it likes, and a peer that answers 64 MiB is read whole. Here every
socket operation (connect, each write, each read, status line and headers included) waits at most what
is left of the request's deadline, and the body is refused when its Content-Length, or what has been
read of it, passes `max_bytes`. No redirects, no proxies from the environment.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpcore

MAX_RESPONSE_BYTES = 1024 * 1024
"""Largest answer read from a processor (its receipts and id lists are a few KB)."""


class PeerError(Exception):
    """A request to a peer failed; `str()` names the kind of failure, never the data."""


class PeerUnreachable(PeerError):
    """Transient: no connection, a reset, a protocol error, or the deadline passed. `str()` names the
    kind of failure, never the data."""


class PeerTooLarge(PeerError):
    """The answer is larger than the cap: refused, not retried."""


class PeerInvalid(PeerError):
    """The request cannot be made (a URL of another scheme, a header httpcore refuses): not retried."""


@dataclass(frozen=True)
class Answer:
    """A peer's answer: its status, at most `max_bytes` of body, and its Content-Type ("" when none)."""

    status_code: int
    content: bytes
    content_type: str = ""

    def json(self) -> Any:
        """The body as JSON (`ValueError` when it is not)."""
        return json.loads(self.content)


class _Deadline:
    """The monotonic time by which the request in flight must be done (one per pool)."""

    def __init__(self) -> None:
        self.at = 0.0

    def bound(self, timeout: float | None) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise httpcore.ReadTimeout("deadline passed")
        return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self._inner, self._deadline = inner, deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._deadline.bound(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._deadline.bound(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(ssl_context, server_hostname, self._deadline.bound(timeout))
        return _Stream(inner, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, deadline: _Deadline) -> None:
        self._inner, self._deadline = httpcore.SyncBackend(), deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(host, port, self._deadline.bound(timeout), local_address, socket_options)
        return _Stream(stream, self._deadline)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not used for processors")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class PeerClient:
    """Sequential requests to peers, each within its own deadline. Use as a context manager."""

    def __init__(self, *, connect_timeout: float = 2.0, max_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self._deadline = _Deadline()
        self._connect = connect_timeout
        self.max_bytes = max_bytes
        # The CA bundle is loaded by httpcore only when a TLS peer is met (local processors are plain HTTP).
        self._pool = httpcore.ConnectionPool(network_backend=_Backend(self._deadline), max_connections=4)

    def request(
        self,
        method: str,
        url: str,
        *,
        body: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        deadline: float,
        raw: tuple[str, bytes] | None = None,
        accept: str = "application/json",
    ) -> Answer:
        """Send one request and read its answer by `deadline` (a `time.monotonic()` value). The body is
        `body` as JSON, or `raw` (its content type, its bytes). `PeerUnreachable` on a transient failure
        (the deadline passing is one), `PeerTooLarge` when the answer is larger than `max_bytes`."""
        if params:
            url = f"{url}?{urlencode(params)}"
        if raw is not None:
            content_type, content = raw
        else:
            content_type, content = "application/json", b"" if body is None else json.dumps(body).encode("utf-8")
        headers = [("Accept", accept)]
        if body is not None or raw is not None:
            headers.append(("Content-Type", content_type))
        self._deadline.at = deadline
        left = deadline - time.monotonic()
        if left <= 0:
            raise PeerUnreachable("ReadTimeout (deadline passed)")
        timeouts = {"connect": min(self._connect, left), "read": left, "write": left, "pool": left}
        try:
            with self._pool.stream(
                method, url, headers=headers, content=content, extensions={"timeout": timeouts}
            ) as resp:
                announced = next((v for k, v in resp.headers if k.lower() == b"content-length"), None)
                if announced is not None and announced.strip().isdigit() and int(announced) > self.max_bytes:
                    raise PeerTooLarge(f"answer is larger than {self.max_bytes:,} bytes")
                chunks, size = [], 0
                for chunk in resp.iter_stream():
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise PeerTooLarge(f"answer is larger than {self.max_bytes:,} bytes")
                    chunks.append(chunk)
                kind = next((v for k, v in resp.headers if k.lower() == b"content-type"), b"")
                return Answer(resp.status, b"".join(chunks), kind.decode("latin-1"))
        except httpcore.TimeoutException as exc:
            raise PeerUnreachable(type(exc).__name__) from None
        except (httpcore.NetworkError, httpcore.RemoteProtocolError) as exc:
            raise PeerUnreachable(type(exc).__name__) from None
        except (httpcore.UnsupportedProtocol, httpcore.LocalProtocolError) as exc:
            raise PeerInvalid(type(exc).__name__) from None

    def close(self) -> None:
        """Close every connection."""
        self._pool.close()

    def __enter__(self) -> PeerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
