"""The store's keyed hashes: its secret (`store_meta.subject_key_secret`) and source-key halves kept as
`hmac:<hex>` under it. Its own module because the schema's migrations and the suppression list both
use it, and neither may import the other."""

from __future__ import annotations

import re

import apsw

from erasure.errors import StoreError
from erasure.identity import salted_hash
from erasure.sqlite import scalar


def identity_secret(conn: apsw.Connection) -> bytes:
    """The store's keyed-hash secret (`store_meta.subject_key_secret`, shared with holds)."""
    value = scalar(conn, "SELECT value FROM store_meta WHERE key = 'subject_key_secret'")
    if value is None:
        raise StoreError("store_meta has no 'subject_key_secret'")
    return bytes.fromhex(str(value))


PROTECTED = "hmac:"
"""Prefix of a source key half kept as its keyed hash."""


def protect(conn: apsw.Connection, value: str) -> str:
    """The keyed-hash form of one half of a source key (`hmac:<hex>`, under the store's secret)."""
    return PROTECTED + salted_hash(identity_secret(conn), "source-key", value)


_HASHED = re.compile(r"hmac:[0-9a-f]{64}")


def hashed(conn: apsw.Connection, value: str) -> str:
    """`value` as a keyed hash: `protect(value)`, or `value` itself when it is one already (exactly
    `hmac:` and 64 hex digits: a key that only starts with `hmac:` may spell anything)."""
    return value if _HASHED.fullmatch(value) else protect(conn, value)


def hashed_key(conn: apsw.Connection, source: str, source_ref: str) -> tuple[str, str]:
    """`(source, source_ref)` of an erased item as the suppression list and the archive skeleton keep
    it: both halves as keyed hashes, whatever they spell (a key can name a person in forms no
    identifier match foresees: `ticket-jane-doe-0042`, `jane.doe%40mail.example`)."""
    return hashed(conn, source), hashed(conn, source_ref)
