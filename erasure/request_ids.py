"""Request and tenant ids: one rule for every place that takes one (intake, the CLI, the pack writer,
`export`), because an id becomes a file name and a Prefect parameter."""

from __future__ import annotations

import re

from erasure.errors import InputError

REQUEST_ID_MAX_CHARS = 128
"""The one limit on request (and tenant) ids: submit, the pack writer, `export` and the offline verifier
(which keeps its own copy of the pattern, checked equal by the tests) all use it."""
SAFE_TOKEN = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{REQUEST_ID_MAX_CHARS - 1}}}")
"""Request and tenant ids: they become file names and Prefect parameters (use `fullmatch`)."""
TOKEN_RULE = f"must be 1-{REQUEST_ID_MAX_CHARS} characters of A-Z a-z 0-9 . _ -, starting with a letter or digit"
"""What a refused id is told."""


def is_safe_token(value: str) -> bool:
    """True when `value` may be used as a request or tenant id (and so as a path component)."""
    return SAFE_TOKEN.fullmatch(value) is not None


def checked_request_id(request_id: str) -> str:
    """`request_id` when it is a safe token, else `InputError`."""
    if not is_safe_token(request_id):
        raise InputError("request_id: not a safe token (letters, digits, '.', '_', '-'; at most 128)")
    return request_id
