"""Confirmation tokens of the agent surface (`erasure mcp`): short-lived, bound to exactly one preview,
single use (`erasure.request_records.tokens` records a used one).

A token is `<payload>.<mac>`: the payload is base64url canonical JSON of a random id, the expiry, the
SHA-256 of the preview's content, a keyed digest of the identifiers and the identifiers themselves
sealed with AES-GCM (the agent sent them; the token carries them to the confirm without storing them
anywhere in between, and without showing them to anyone who reads the token); the mac is HMAC-SHA256
over the payload. Both keys are derived from the home's secret (the console's credential), so a token
made by one process of the home is checked by another, and a token of another home is forged.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from erasure.errors import ErasureError, RequestBlocked

TTL_ENV = "ERASURE_AGENT_TOKEN_TTL"
"""Seconds a confirmation token lives (default `DEFAULT_TTL`)."""
DEFAULT_TTL = 600
MAX_TOKEN_CHARS = 8192


class TokenRefused(RequestBlocked):
    """A confirmation token cannot file a request: preview again."""


class TokenForged(TokenRefused):
    """Not a token this home made, or one that was altered."""


class TokenExpired(TokenRefused):
    """The token's time ran out."""


@dataclass(frozen=True)
class Claims:
    """What a checked token says: its id, expiry, the preview's digest, and the identifiers."""

    token_id: str
    expires_at: datetime
    preview_sha256: str
    subject: dict[str, str]


def ttl() -> timedelta:
    """How long a new token lives (`ERASURE_AGENT_TOKEN_TTL` seconds, at least 1)."""
    raw = os.environ.get(TTL_ENV, "")
    try:
        seconds = int(raw) if raw else DEFAULT_TTL
    except ValueError:
        raise ErasureError(f"{TTL_ENV}: not a whole number of seconds") from None
    return timedelta(seconds=max(1, seconds))


def _key(secret: str, purpose: bytes) -> bytes:
    return hmac.new(secret.encode(), b"erasure-agent-token-v1/" + purpose, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def preview_digest(content: Any) -> str:
    """SHA-256 of a preview's content (canonical JSON): what a token is bound to."""
    return hashlib.sha256(_canonical(content)).hexdigest()


def issue(secret: str, subject: dict[str, str], content: Any, *, now: datetime) -> tuple[str, Claims]:
    """A new token for the preview `content` of `subject`, valid for `ttl()` from `now`."""
    token_id = secrets.token_hex(16)
    expires = now.astimezone(UTC) + ttl()
    nonce = os.urandom(12)
    sealed = AESGCM(_key(secret, b"seal")).encrypt(nonce, _canonical(subject), token_id.encode())
    exp = int(expires.timestamp())
    digest = preview_digest(content)
    payload: dict[str, Any] = {
        "v": 1,
        "id": token_id,
        "exp": exp,
        "preview": digest,
        "who": hmac.new(_key(secret, b"who"), _canonical(subject), hashlib.sha256).hexdigest(),
        "sealed": _b64(nonce + sealed),
    }
    body = _b64(_canonical(payload))
    mac = hmac.new(_key(secret, b"mac"), body.encode(), hashlib.sha256).hexdigest()
    claims = Claims(token_id, datetime.fromtimestamp(exp, UTC), digest, dict(subject))
    return f"{body}.{mac}", claims


def check(secret: str, token: str, *, now: datetime) -> Claims:
    """The claims of a token this home made, unaltered and unexpired; `TokenForged` or `TokenExpired`
    (one line, quoting nothing of the token)."""
    forged = TokenForged("the confirmation token is not one this server issued, or it was altered: preview again")
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS or token.count(".") != 1:
        raise forged
    body, mac = token.split(".")
    want = hmac.new(_key(secret, b"mac"), body.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac.encode(), want.encode()):
        raise forged
    try:
        payload = json.loads(_unb64(body))
        raw = _unb64(payload["sealed"])
        plain = AESGCM(_key(secret, b"seal")).decrypt(raw[:12], raw[12:], str(payload["id"]).encode())
        subject = json.loads(plain)
        expires = datetime.fromtimestamp(int(payload["exp"]), UTC)
        digest = str(payload["preview"])
        who = hmac.new(_key(secret, b"who"), _canonical(subject), hashlib.sha256).hexdigest()
    except (ValueError, KeyError, TypeError, InvalidTag):
        raise forged from None
    if payload.get("v") != 1 or not hmac.compare_digest(who, str(payload.get("who", ""))):
        raise forged
    if now.astimezone(UTC) >= expires:
        raise TokenExpired(f"the confirmation token expired at {expires.strftime('%Y-%m-%dT%H:%M:%SZ')}: preview again")
    return Claims(str(payload["id"]), expires, digest, {str(k): str(v) for k, v in subject.items()})
