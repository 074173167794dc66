"""Pickles read without being loaded: `pickletools` walks the opcodes and every string argument (a
dictionary key, an id, a text) is a record; byte-string arguments are payloads, read again. Nothing is
ever unpickled (a pickle can name a function to run)."""

from __future__ import annotations

import pickletools
from dataclasses import dataclass, field


@dataclass
class PickleReading:
    """The strings of a pickle (records) and its byte strings (payloads)."""

    records: list[str] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)


def read_pickle(data: bytes) -> PickleReading | None:
    """The strings and byte strings of a pickle; None when its opcodes cannot be walked to STOP."""
    out = PickleReading()
    try:
        for op, arg, _pos in pickletools.genops(data):
            if isinstance(arg, str) and op.name not in ("GLOBAL", "INST"):
                out.records.append(arg)
            elif isinstance(arg, bytes | bytearray) and len(arg) >= 4:
                out.payloads.append(bytes(arg))
    except (ValueError, KeyError, IndexError, UnicodeDecodeError):
        return None
    return out
