"""JSON as every check reads it: UTF-8, no duplicate key, no NaN or Infinity, no lone UTF-16
surrogate, at most 65,536 arrays and objects in a file, nesting as deep as Python's parser goes
(deeper is refused). Each reader fails with the error class of the check that reads."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from proof.verify.errors import PackError, fail

MAX_JSON_CONTAINERS = 65_536
_UTC_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z")
_LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


class _JsonRefused(ValueError):
    """A JSON text that parses but that we refuse (a duplicate key, NaN)."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _JsonRefused(f"repeats the key {k!r}")
        out[k] = v
    return out


def _constant(name: str) -> Any:
    raise _JsonRefused(f"holds {name}, which is not JSON")


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant)


def _loads(text: str, name: str, cls: type[PackError]) -> Any:
    try:
        return _DECODER.decode(text)
    except RecursionError:
        fail(cls, f"{name} nests too deeply")
    except _JsonRefused as exc:
        fail(cls, f"{name} {exc}")
    except ValueError:
        fail(cls, f"{name} is not valid JSON")


def _text(data: bytes, name: str, cls: type[PackError]) -> str:
    if data.count(b"[") + data.count(b"{") > MAX_JSON_CONTAINERS:
        fail(cls, f"{name} holds more than {MAX_JSON_CONTAINERS} arrays and objects")
    if _LONE_SURROGATE.search(data):
        fail(cls, f"{name} holds a lone UTF-16 surrogate (not Unicode text)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        fail(cls, f"{name} is not valid UTF-8")


def parse_json(data: bytes, name: str, cls: type[PackError]) -> Any:
    """The JSON document in `data` (file `name`), else `cls`."""
    return _loads(_text(data, name, cls), name, cls)


def parse_jsonl(data: bytes, name: str, cls: type[PackError]) -> list[Any]:
    """The JSON documents of the non-blank lines of `data` (file `name`), else `cls`."""
    return [
        _loads(line, f"{name} line {i}", cls)
        for i, line in enumerate(_text(data, name, cls).split("\n"), 1)
        if line.strip()
    ]


def is_int(v: Any) -> bool:
    """An integer, not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def count(v: Any, what: str, cls: type[PackError], *, nullable: bool = False) -> int | None:
    """`v` as a non-negative integer (or None when `nullable`), else `cls`."""
    if v is None and nullable:
        return None
    if not is_int(v) or v < 0:
        fail(cls, f"{what} is not a non-negative integer")
    return int(v)


def json_object(v: Any, what: str, cls: type[PackError]) -> dict[str, Any]:
    """`v` when it is a JSON object, else `cls`."""
    if not isinstance(v, dict):
        fail(cls, f"{what} is not a JSON object")
    return v


def utc_time(v: Any) -> datetime | None:
    """The instant of a `YYYY-MM-DDTHH:MM:SS[.ffffff]Z` string, else None."""
    if not isinstance(v, str) or not _UTC_TIME.fullmatch(v):
        return None
    try:
        return datetime.fromisoformat(v[:-1]).replace(tzinfo=UTC)
    except ValueError:
        return None
