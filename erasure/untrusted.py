"""Reading input we do not trust (request envelopes, ingest files) with bounds checked before the
memory is spent: a file is read up to a cap (the zero device never ends), and JSON text is refused
when it nests deeper than a limit (Python's parser recurses: 100k `[` is a RecursionError).

Messages name the limit that was passed, never the content."""

from __future__ import annotations

import re
from pathlib import Path

from erasure.errors import InputError

MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays and objects accepted in an envelope or an ingest line (they need 3)."""

# A JSON string (escapes included), or one bracket. Possessive quantifiers: no backtracking on an
# unterminated string.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+"|[\[\]{}]', re.DOTALL)


def read_capped(path: Path, limit: int, *, what: str = "file") -> bytes:
    """The bytes of `path`, read at most `limit` + 1 of them: `InputError` "PATH: WHAT is larger than
    LIMIT bytes" when there are more (a device or a pipe that never ends is refused the same way),
    "PATH: cannot read (...)" when it cannot be opened or read."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})") from None
    if len(data) > limit:
        raise InputError(f"{path}: {what} is larger than {limit:,} bytes")
    return data


def json_depth(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """The nesting depth of arrays and objects in JSON `text`, counted up to `limit` + 1 (it stops
    there). Linear in the text; brackets inside strings do not count. On text that is not JSON the
    count is a bound the parser's own error will follow."""
    depth = deepest = 0
    for m in _JSON_TOKEN.finditer(text):
        c = m.group()[0]
        if c == '"':
            continue
        if c in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        else:
            depth -= 1
    return deepest


def check_json_depth(text: str, where: str, limit: int = MAX_JSON_DEPTH) -> None:
    """`InputError` "WHERE: JSON nested more than LIMIT levels deep" when `text` nests deeper."""
    if json_depth(text, limit) > limit:
        raise InputError(f"{where}: JSON nested more than {limit} levels deep")
