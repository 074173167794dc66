"""Reading input we do not trust (request envelopes, ingest files, other software's pickles) with
bounds checked before the memory is spent: a file is read up to a cap (the zero device never ends),
and JSON text is refused when it nests deeper than a limit (Python's parser recurses: 100k `[` is a
RecursionError). A pickle is read as data only (`load_pickle`): it can name no function to run.

Messages name the limit that was passed, never the content."""

from __future__ import annotations

import io
import pickle
import re
from pathlib import Path
from typing import Any

from erasure.errors import InputError

MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays and objects accepted in an envelope or an ingest line (they need 3)."""

# A JSON string (escapes included), or one bracket. Possessive quantifiers: no backtracking on an
# unterminated string.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+"|[\[\]{}]', re.DOTALL)


# TOML, as far as its bounds need: strings of its four kinds and comments are skipped whole (what they
# hold is no structure), then one bracket, one key dot, or one character that ends a dotted key.
# Possessive quantifiers: linear on unterminated strings. A string the parser would refuse is left
# unmatched and its characters are counted as structure: the counts can only grow.
_TOML_TOKEN = re.compile(
    r'"""(?:[^"\\]++|\\.|"{1,2}+(?!"))*+"{3,5}+'
    r"|'''(?:[^']++|'{1,2}+(?!'))*+'{3,5}+"
    r'|"(?:[^"\\\n]++|\\.)*+"'
    r"|'[^'\n]*+'"
    r"|#[^\n]*+"
    r"|[\[\]{}.=,\n]",
    re.DOTALL,
)


def toml_bounds(text: str, max_depth: int, max_key_parts: int) -> str | None:
    """What makes TOML `text` too costly to parse, or None: arrays and tables (inline ones and the
    `[[...]]` of a header) nested more than `max_depth` deep (Python's parser recurses on them), or a
    dotted key of more than `max_key_parts` parts (the parser's work grows with their square: 30,000
    parts took 16-47 s). Linear in the text; brackets and dots inside strings and comments do not
    count. A value's own dot (`0.5`, a time's fraction) counts as a key's would: 2 parts."""
    depth = dots = 0
    for m in _TOML_TOKEN.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > max_depth:
                return f"arrays or tables nested more than {max_depth} levels deep"
        elif c in "]}":
            depth -= 1
        elif c == ".":
            dots += 1
            if dots >= max_key_parts:
                return f"a dotted key of more than {max_key_parts} parts"
            continue
        elif c[0] in "\"'":
            continue  # a quoted part of a key, or a string value: the dots around it still count
        dots = 0  # a bracket, '=', ',', a comment or a new line ends the key
    return None


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


class PickledRecord:
    """What a class a pickle may name becomes: its fields (the pickled state), never an object of that
    class, and nothing that runs code."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.state: dict[str, Any] = {}

    def __setstate__(self, state: object) -> None:
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):
            state = state[0]  # (__dict__, slots), as pickle builds it for some protocols
        if isinstance(state, dict):
            inner = state.get("__dict__")  # a pydantic model's state holds its fields there
            self.state = inner if isinstance(inner, dict) else state


class _DataOnly(pickle.Unpickler):
    def __init__(self, data: bytes, records: frozenset[str]) -> None:
        super().__init__(io.BytesIO(data))
        self._records = records

    def find_class(self, module: str, name: str) -> Any:
        if f"{module}.{name}" in self._records:
            return PickledRecord
        raise pickle.UnpicklingError(f"a pickle of data may not name {module}.{name}")


def load_pickle(data: bytes, *, records: frozenset[str] = frozenset()) -> Any:
    """The data in an untrusted pickle: dicts, lists, tuples, sets, strings, bytes, numbers, and a
    `PickledRecord` for each class in `records` ("module.Name"). Any other class or function it names
    (`os.system`, `builtins.eval`, `subprocess.Popen`...) is refused before it is looked up, so loading
    runs no code. `pickle.UnpicklingError` for anything that is not such a pickle."""
    try:
        return _DataOnly(data, records).load()
    except pickle.UnpicklingError:
        raise
    except Exception as exc:  # truncated, malformed or hostile opcodes: one error for all of them
        raise pickle.UnpicklingError(f"not a pickle of data ({type(exc).__name__})") from None
