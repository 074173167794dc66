"""hnswlib's persisted index, as Chroma 1.x writes it: the file names, the header and where each part
of an element lies. The format only: how the eraser rewrites an index and how the probe reads its
vectors are each side's own code.

A segment folder holds `header.bin` (the header below), `data_level0.bin` (one fixed-size row per
element: a 4-byte word whose low 16 bits count the element's level-0 links and whose bit 16 marks it
deleted, `max_m0` 4-byte links, the float32 vector at `offset_data`, the 8-byte label at
`label_offset`), `length.bin` (a float32 per element), `link_lists.bin` (per element: a 4-byte size,
then its upper-level link lists) and `index_metadata.pickle` (Chroma's id map: `id_to_label`,
`label_to_id`, `id_to_seq_id`).
"""

from __future__ import annotations

import struct
from dataclasses import astuple, dataclass

HEADER_FILE = "header.bin"
DATA_FILE = "data_level0.bin"
LENGTH_FILE = "length.bin"
LINKS_FILE = "link_lists.bin"
PICKLE_FILE = "index_metadata.pickle"
INDEX_FILES = (HEADER_FILE, DATA_FILE, LENGTH_FILE, LINKS_FILE)

DELETED = 0x10000
"""The deleted flag in an element's first word."""
LINK_COUNT = 0xFFFF
"""The level-0 link count in an element's first word."""

_HEADER = struct.Struct("<iQQQQQQiiQQQdQ")


@dataclass(frozen=True)
class HnswHeader:
    """`header.bin`: 100 bytes, little-endian, in this order."""

    version: int
    offset_level0: int
    max_elements: int
    cur_element_count: int
    size_data_per_element: int
    label_offset: int
    offset_data: int
    maxlevel: int
    enterpoint_node: int
    max_m: int
    max_m0: int
    m: int
    mult: float
    ef_construction: int

    SIZE = _HEADER.size

    @classmethod
    def unpack(cls, raw: bytes) -> HnswHeader | None:
        """The header at the start of `raw` (None when `raw` is shorter than a header)."""
        if len(raw) < _HEADER.size:
            return None
        return cls(*_HEADER.unpack_from(raw))

    def pack(self) -> bytes:
        """The header's bytes."""
        return _HEADER.pack(*astuple(self))

    @property
    def dim(self) -> int:
        """Floats per vector."""
        return (self.label_offset - self.offset_data) // 4
