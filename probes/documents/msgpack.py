"""MessagePack (LangGraph's checkpoints and writes, and other agents' serialised state) read by a walker of
our own: msgpack has no magic, so a payload is msgpack only when it parses as exactly one document, a map
or an array (or an extension) at its top, that ends at the payload's last byte. Each map is one record
(its keys and scalar values, like a JSON object); an array's scalars are one record; an extension's data
is msgpack again (as LangGraph writes its objects) or, when it is not, a payload read again; binary
values are payloads too."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

MAX_DEPTH = 64
MAX_ITEMS = 1_000_000


class NotMsgpack(ValueError):
    """The bytes are not one msgpack document."""


@dataclass
class MsgpackReading:
    """A msgpack document's records and binary payloads."""

    records: list[str] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)


_Scalar = str | int | float | bool | None
_FIXED = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8, 0xCA: 4, 0xCB: 8}
_FORMATS = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}
_FORMATS |= {0xCA: ">f", 0xCB: ">d"}
_EXT_FIXED = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}


class _Walker:
    def __init__(self, data: bytes, out: MsgpackReading) -> None:
        self.data = data
        self.pos = 0
        self.out = out
        self.items = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise NotMsgpack("truncated")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def length(self, width: int) -> int:
        return int.from_bytes(self.take(width), "big")

    def value(self, depth: int) -> _Scalar:
        """One value: a scalar, or (for a container, recorded as it is read) None."""
        self.items += 1
        if depth > MAX_DEPTH or self.items > MAX_ITEMS:
            raise NotMsgpack("too deep or too large")
        tag = self.take(1)[0]
        if tag <= 0x7F:
            return tag
        if tag >= 0xE0:
            return tag - 0x100
        if 0x80 <= tag <= 0x8F:
            self.map(tag & 0x0F, depth)
            return None
        if 0x90 <= tag <= 0x9F:
            self.array(tag & 0x0F, depth)
            return None
        if 0xA0 <= tag <= 0xBF:
            return self.string(tag & 0x1F)
        if tag == 0xC0:
            return None
        if tag in (0xC2, 0xC3):
            return tag == 0xC3
        if tag in (0xD9, 0xDA, 0xDB):
            return self.string(self.length({0xD9: 1, 0xDA: 2, 0xDB: 4}[tag]))
        if tag in (0xC4, 0xC5, 0xC6):
            self.binary(self.take(self.length({0xC4: 1, 0xC5: 2, 0xC6: 4}[tag])))
            return None
        if tag in _FIXED:
            return struct.unpack(_FORMATS[tag], self.take(_FIXED[tag]))[0]  # type: ignore[no-any-return]
        if tag in (0xDC, 0xDD):
            self.array(self.length(2 if tag == 0xDC else 4), depth)
            return None
        if tag in (0xDE, 0xDF):
            self.map(self.length(2 if tag == 0xDE else 4), depth)
            return None
        if tag in _EXT_FIXED or tag in (0xC7, 0xC8, 0xC9):
            n = _EXT_FIXED.get(tag) or self.length({0xC7: 1, 0xC8: 2, 0xC9: 4}[tag])
            self.take(1)  # the extension's type
            self.extension(self.take(n), depth)
            return None
        raise NotMsgpack(f"tag {tag:#x}")

    def string(self, n: int) -> str:
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotMsgpack("a string that is not UTF-8") from exc

    def binary(self, data: bytes) -> None:
        if data:
            self.out.payloads.append(data)

    def extension(self, data: bytes, depth: int) -> None:
        inner = _Walker(data, self.out)
        mark = (len(self.out.records), len(self.out.payloads))
        try:
            inner.document(depth + 1, top=False)
        except NotMsgpack:
            del self.out.records[mark[0] :], self.out.payloads[mark[1] :]
            self.binary(data)
        self.items += inner.items

    def map(self, n: int, depth: int) -> None:
        own: list[str] = []
        for _ in range(2 * n):
            v = self.value(depth + 1)
            if v is not None:
                own.append(str(v))
        if own:
            self.out.records.append(" ".join(own))

    def array(self, n: int, depth: int) -> None:
        own = [str(v) for v in (self.value(depth + 1) for _ in range(n)) if v is not None]
        if own:
            self.out.records.append(" ".join(own))

    def document(self, depth: int, *, top: bool = True) -> None:
        first = self.data[:1]
        if top and not (first and (0x80 <= first[0] <= 0x9F or first[0] in (0xDC, 0xDD, 0xDE, 0xDF))):
            raise NotMsgpack("not a map or an array")
        while self.pos < len(self.data):
            self.value(depth)
            if top:
                break
        if self.pos != len(self.data):
            raise NotMsgpack("bytes after the document")


def read_msgpack(data: bytes) -> MsgpackReading | None:
    """The records and binary payloads of one msgpack document; None when `data` is not exactly one
    (a map or an array at the top, ending at the last byte)."""
    out = MsgpackReading()
    try:
        _Walker(data, out).document(0)
    except (NotMsgpack, struct.error, RecursionError):
        return None
    return out
