"""The RFC 3161 client: a timestamp authority's token over an envelope's signature.

When `ERASURE_TSA_URL` is set, `write_pack` and `attest` ask that TSA for a token over SHA-256 of the
signature bytes of the envelope they just signed and store the TimeStampResp, as the TSA sent it, in
the pack (signatures/engine.tsr, signatures/dpo.tsr). `ERASURE_TSA_ROOT` (a PEM file) pins the TSA's
root for the writer's own check of the pack; the regulator pins it again with `--tsa-root`.
`ERASURE_TSA_TIMEOUT` (seconds, default 30) bounds the whole exchange, connect to last byte; the
reply is read as it streams in, at most `MAX_REPLY_BYTES`. An erasure asks the TSA only after it
released the store's lock (`service.cascade.erase_window`).

The request (RFC 3161 2.4.1) is DER written here: version 1, messageImprint (SHA-256), a random
64-bit nonce, certReq true (the token carries the TSA's certificate, so it verifies offline). The
response must be granted, over that digest, with that nonce, and readable by the offline verifier.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from erasure.errors import ConfigError
from proof.verify import der
from proof.verify.errors import PackError
from proof.verify.timestamp import SHA256, check_token, load_roots, parse_response

TSA_URL_ENV = "ERASURE_TSA_URL"
TSA_ROOT_ENV = "ERASURE_TSA_ROOT"
TSA_TIMEOUT_ENV = "ERASURE_TSA_TIMEOUT"
DEFAULT_TIMEOUT = 30.0
QUERY_TYPE, REPLY_TYPE = "application/timestamp-query", "application/timestamp-reply"
MAX_REPLY_BYTES = 64 * 1024


def _tlv(tag: int, body: bytes) -> bytes:
    n = len(body)
    if n < 0x80:
        return bytes([tag, n]) + body
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + body


def _der_int(v: int) -> bytes:
    return _tlv(der.INTEGER, v.to_bytes(v.bit_length() // 8 + 1, "big", signed=True))


_SHA256_ALG = _tlv(der.SEQUENCE, bytes.fromhex("0609608648016503040201") + b"\x05\x00")


def timestamp_request(digest: bytes, nonce: int) -> bytes:
    """TimeStampReq DER: version 1, messageImprint (sha256, `digest`), nonce, certReq true."""
    imprint = _tlv(der.SEQUENCE, _SHA256_ALG + _tlv(der.OCTET_STRING, digest))
    return _tlv(der.SEQUENCE, _der_int(1) + imprint + _der_int(nonce) + b"\x01\x01\xff")


class TimestampFailed(ConfigError):
    """The TSA could not be reached, refused, or answered with something that is not our token."""


@dataclass(frozen=True)
class TimestampAuthority:
    """A TSA at `url`; `root` (PEM bytes) pins it for the writer's own check, when known."""

    url: str
    root: bytes | None = None
    timeout: float = DEFAULT_TIMEOUT
    """Seconds the whole exchange may take, connect to last byte."""

    @classmethod
    def from_env(cls) -> TimestampAuthority | None:
        """The TSA `ERASURE_TSA_URL` names (its root from `ERASURE_TSA_ROOT`), or None when unset."""
        url = os.environ.get(TSA_URL_ENV, "").strip()
        if not url:
            return None
        root_path = os.environ.get(TSA_ROOT_ENV, "").strip()
        try:
            root = Path(root_path).read_bytes() if root_path else None
        except OSError as exc:
            raise ConfigError(f"{TSA_ROOT_ENV}={root_path}: {exc.strerror}") from exc
        raw = os.environ.get(TSA_TIMEOUT_ENV, "").strip()
        try:
            timeout = float(raw) if raw else DEFAULT_TIMEOUT
        except ValueError:
            timeout = -1.0
        if not 0 < timeout <= 600:
            raise ConfigError(f"{TSA_TIMEOUT_ENV}={raw}: seconds the TSA exchange may take, more than 0, at most 600")
        return cls(url, root, timeout)

    def timestamp(self, signature: bytes) -> bytes:
        """A TimeStampResp over sha256(`signature`), checked: granted, our imprint and nonce, and (with
        `root`) the whole token as the offline verifier checks it. The whole exchange, connect to last
        byte, ends within `timeout` seconds (a TSA dripping one byte a second included), and a reply
        larger than `MAX_REPLY_BYTES` is refused as it streams in, never read whole."""
        from erasure.peer_http import PeerClient, PeerError, PeerTooLarge  # lazy: tests/cli/test_cli_lazy.py

        digest = hashlib.sha256(signature).digest()
        nonce = secrets.randbits(63) | 1
        query = timestamp_request(digest, nonce)
        try:
            with PeerClient(connect_timeout=min(5.0, self.timeout), max_bytes=MAX_REPLY_BYTES) as client:
                reply = client.request(
                    "POST",
                    self.url,
                    raw=(QUERY_TYPE, query),
                    accept=REPLY_TYPE,
                    deadline=time.monotonic() + self.timeout,
                )
        except PeerTooLarge as exc:
            raise TimestampFailed(f"the timestamp reply is larger than {MAX_REPLY_BYTES} bytes: refused") from exc
        except PeerError as exc:
            raise TimestampFailed(
                f"the timestamp authority at {self.url} cannot be reached or did not answer"
                f" within {self.timeout:g} s: {exc}"
            ) from exc
        if reply.status_code != 200 or reply.content_type.split(";")[0].strip() != REPLY_TYPE:
            raise TimestampFailed(
                f"the timestamp authority at {self.url} answered HTTP {reply.status_code}"
                f" ({reply.content_type or 'no content type'}), not a timestamp reply"
            )
        data = reply.content
        try:
            token = parse_response(data)
        except (ValueError, IndexError) as exc:  # der.DerError, or a part missing
            raise TimestampFailed(f"the timestamp authority's reply is not a granted RFC 3161 token: {exc}") from exc
        if token.status not in (0, 1):
            raise TimestampFailed(f"the timestamp authority refused the request (status {token.status})")
        if token.imprint_alg != SHA256 or token.imprint != digest or token.nonce != nonce:
            raise TimestampFailed("the timestamp authority's token is over another digest or nonce than requested")
        if self.root is not None:
            try:
                check_token(data, signature, load_roots(self.root), "the TSA's reply")
            except PackError as exc:
                raise TimestampFailed(str(exc)) from exc
        return data
