"""Probing kind `langgraph-sqlite`: the text held by LangGraph's serialised values (checkpoint and write
blobs in msgpack, store values and metadata in JSON), read by the probe's own decoders."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from typing import Any


def _unpack_strings(data: bytes) -> list[str]:
    """Every string in a msgpack document, by a recursive reader (ext payloads are msgpack again, as
    LangGraph writes them). ValueError when the bytes are not msgpack."""
    out: list[str] = []

    def take(n: int, pos: int) -> tuple[bytes, int]:
        if pos + n > len(data):
            raise ValueError("truncated")
        return data[pos : pos + n], pos + n

    def uint(width: int, pos: int) -> tuple[int, int]:
        raw, pos = take(width, pos)
        return int.from_bytes(raw, "big"), pos

    def one(pos: int, depth: int) -> int:
        if depth > 64:
            raise ValueError("too deep")
        (tag,), pos = struct.unpack("B", data[pos : pos + 1]), pos + 1
        if tag <= 0x7F or tag >= 0xE0 or tag in (0xC0, 0xC2, 0xC3):
            return pos
        if 0x80 <= tag <= 0x8F:
            for _ in range(2 * (tag & 0x0F)):
                pos = one(pos, depth + 1)
            return pos
        if 0x90 <= tag <= 0x9F:
            for _ in range(tag & 0x0F):
                pos = one(pos, depth + 1)
            return pos
        if 0xA0 <= tag <= 0xBF or tag in (0xD9, 0xDA, 0xDB):
            size, pos = (tag & 0x1F, pos) if tag <= 0xBF else uint({0xD9: 1, 0xDA: 2, 0xDB: 4}[tag], pos)
            raw, pos = take(size, pos)
            out.append(raw.decode("utf-8", "replace"))
            return pos
        if tag in (0xC4, 0xC5, 0xC6):
            size, pos = uint({0xC4: 1, 0xC5: 2, 0xC6: 4}[tag], pos)
            raw, pos = take(size, pos)
            out.append(raw.decode("utf-8", "replace"))
            return pos
        if tag in (0xC7, 0xC8, 0xC9, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8):
            if tag >= 0xD4:
                size = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}[tag]
            else:
                size, pos = uint({0xC7: 1, 0xC8: 2, 0xC9: 4}[tag], pos)
            raw, pos = take(1 + size, pos)
            try:
                out.extend(_unpack_strings(raw[1:]))
            except (ValueError, struct.error):
                out.append(raw[1:].decode("utf-8", "replace"))
            return pos
        widths = {0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
        if tag in widths:
            return take(widths[tag], pos)[1]
        if tag in (0xDC, 0xDD, 0xDE, 0xDF):
            count, pos = uint(2 if tag in (0xDC, 0xDE) else 4, pos)
            for _ in range(count * (2 if tag >= 0xDE else 1)):
                pos = one(pos, depth + 1)
            return pos
        raise ValueError("not msgpack")

    pos = 0
    try:
        while pos < len(data):
            pos = one(pos, 0)
    except struct.error as exc:
        raise ValueError("truncated") from exc
    return out


def _walk_json(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _walk_json(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk_json(v)


def texts_of(kind: Any, blob: Any) -> list[str]:
    """The text held by a serialised value (msgpack, JSON; anything else read as UTF-8)."""
    if blob is None:
        return []
    raw = blob if isinstance(blob, bytes) else str(blob).encode("utf-8", "surrogatepass")
    try:
        if kind == "msgpack":
            return _unpack_strings(raw)
        if kind in ("json", None):
            return list(_walk_json(json.loads(raw)))
    except (ValueError, RecursionError):
        pass
    return [raw.decode("utf-8", "replace")]
