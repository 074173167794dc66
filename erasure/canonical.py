"""One canonical JSON encoding and one digest, used by everyone that hashes or signs JSON.

The same object always encodes to the same bytes: keys sorted, no whitespace, UTF-8 text kept as is
(not `\\u` escaped), NaN and infinities refused (they are not JSON).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(obj: Any) -> bytes:
    """`obj` as canonical JSON bytes: sort_keys, separators (",", ":"), ensure_ascii=False, UTF-8.

    Only plain JSON types are accepted (dict, list, str, int, float, bool, None); dump pydantic
    models with `model_dump(mode="json")` first. Raises `TypeError`/`ValueError` otherwise.
    """
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of `data`, as 64 lowercase hex digits."""
    return hashlib.sha256(data).hexdigest()
