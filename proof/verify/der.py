"""A small, strict DER reader (X.690 distinguished encoding) for the RFC 3161 tokens in a pack: the
standard library only. It reads what the timestamp check needs and refuses what DER forbids
(indefinite or non-minimal lengths, high tag numbers, bytes after the end of a value), so one token
has one reading.

`parse(data)` gives the one top-level `Node`; `node.children()` its parts when it is constructed.
Every error is a `DerError` (a `ValueError`); the caller turns it into its check's failure.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

MAX_DEPTH = 32
"""Deeper than any token: a value nested deeper is refused."""

# Universal tags (class 0) as the reader meets them: (tag byte).
BOOLEAN, INTEGER, BIT_STRING, OCTET_STRING, NULL, OID = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
UTF8_STRING, GENERALIZED_TIME = 0x0C, 0x18
SEQUENCE, SET = 0x30, 0x31


class DerError(ValueError):
    """The bytes are not the DER the reader expects."""


@dataclass(frozen=True)
class Node:
    """One DER value: its tag byte, its whole encoding (`raw`) and its content octets (`value`)."""

    tag: int
    raw: bytes
    value: bytes
    depth: int = 0

    @property
    def constructed(self) -> bool:
        """Bit 6 of the tag: the value is a sequence of values."""
        return bool(self.tag & 0x20)

    def children(self) -> list[Node]:
        """The values inside a constructed value, in order."""
        if not self.constructed:
            raise DerError(f"tag 0x{self.tag:02x} is not constructed")
        if self.depth >= MAX_DEPTH:
            raise DerError("the value nests too deeply")
        out, pos = [], 0
        while pos < len(self.value):
            node, pos = _read(self.value, pos, self.depth + 1)
            out.append(node)
        return out

    def expect(self, tag: int, what: str) -> Node:
        """This node, if its tag is `tag`; else `DerError` naming `what`."""
        if self.tag != tag:
            raise DerError(f"{what}: expected tag 0x{tag:02x}, found 0x{self.tag:02x}")
        return self


def _read(data: bytes, pos: int, depth: int) -> tuple[Node, int]:
    if pos + 2 > len(data):
        raise DerError("truncated value")
    tag = data[pos]
    if tag & 0x1F == 0x1F:
        raise DerError("a high tag number (not used by RFC 3161 tokens)")
    first = data[pos + 1]
    head = pos + 2
    if first < 0x80:
        length = first
    elif first == 0x80:
        raise DerError("an indefinite length (BER, not DER)")
    else:
        n = first & 0x7F
        if n > 4 or head + n > len(data):
            raise DerError("a length too long or truncated")
        length = int.from_bytes(data[head : head + n], "big")
        if data[head] == 0 or length < 0x80:
            raise DerError("a length not in its shortest form (not DER)")
        head += n
    end = head + length
    if end > len(data):
        raise DerError("truncated value")
    return Node(tag, data[pos:end], data[head:end], depth), end


def parse(data: bytes) -> Node:
    """The one DER value that is all of `data` (nothing may follow it)."""
    node, end = _read(data, 0, 0)
    if end != len(data):
        raise DerError("bytes after the end of the value")
    return node


def integer(node: Node, what: str) -> int:
    """An INTEGER's value, which DER writes in its shortest two's complement form."""
    v = node.expect(INTEGER, what).value
    if not v or (len(v) > 1 and ((v[0] == 0 and v[1] < 0x80) or (v[0] == 0xFF and v[1] >= 0x80))):
        raise DerError(f"{what}: an integer not in its shortest form")
    return int.from_bytes(v, "big", signed=True)


def oid(node: Node, what: str) -> str:
    """An OBJECT IDENTIFIER in dotted form."""
    v = node.expect(OID, what).value
    if not v or v[-1] & 0x80:
        raise DerError(f"{what}: a truncated object identifier")
    arcs: list[int] = []
    acc = 0
    fresh = True
    for b in v:
        if fresh and b == 0x80:
            raise DerError(f"{what}: an object identifier arc not in its shortest form")
        acc = (acc << 7) | (b & 0x7F)
        fresh = not b & 0x80
        if fresh:
            arcs.append(acc)
            acc = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(str(a) for a in [first, arcs[0] - 40 * first, *arcs[1:]])


def boolean(node: Node, what: str) -> bool:
    """A BOOLEAN, which DER writes as 0x00 or 0xFF."""
    v = node.expect(BOOLEAN, what).value
    if v not in (b"\x00", b"\xff"):
        raise DerError(f"{what}: a boolean not in DER")
    return v == b"\xff"


_GENERALIZED = re.compile(rb"(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(?:\.(\d*[1-9]))?Z")


def generalized_time(node: Node, what: str) -> dt.datetime:
    """A GeneralizedTime as RFC 3161 2.4.2 writes it: YYYYMMDDhhmmss[.s...]Z, UTC, no trailing zeros."""
    m = _GENERALIZED.fullmatch(node.expect(GENERALIZED_TIME, what).value)
    if m is None:
        raise DerError(f"{what}: not a UTC GeneralizedTime (YYYYMMDDhhmmss[.s]Z)")
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    frac = m.group(7) or b""
    micro = int((frac.decode("ascii") + "000000")[:6])
    try:
        return dt.datetime(y, mo, d, h, mi, s, micro, tzinfo=dt.UTC)
    except ValueError as exc:
        raise DerError(f"{what}: not a calendar time") from exc
