"""Files a supported store kind writes in a format with no magic, identified by that kind's layout and
checked against its content, never by a name alone.

Chroma's HNSW segment folders (`erasure.hnsw_format`): `header.bin` is identified when its 100 bytes are
a consistent hnswlib header (element size = label offset + 8, vector before label, element counts within
bounds); `data_level0.bin`, `length.bin` and `link_lists.bin` beside such a header when their sizes agree
with it (rows of the element size, a float per element, 4-byte words). These files hold links, floats
and integer labels only: no text by their format. Their bytes are still read raw (the subject's own
vectors are needles of the raw scan), and the chroma kind's probe parses them itself
(`probes.targets.chroma.indexes`). `index_metadata.pickle` needs no layout: a pickle is identified by
its content and read by `probes.documents.pickles`.

SQLite's rollback journal with no magic: kept by `journal_mode=PERSIST` (after each commit SQLite zeroes
its header), or of a transaction in flight (the magic is written at commit only); the rest still holds
page records. It is identified when the file beside it without `-journal` is a SQLite database, its
magic is zeros, and what follows a header of one sector (512 bytes up to 64 KiB; the header's own
sector and page size when a transaction in flight wrote them) is whole page records of that database's
page size (a page number, the page, a checksum). It is read as a journal with its magic is (its pages
raw, windows matched).
"""

from __future__ import annotations

import os

from erasure.hnsw_format import DATA_FILE, HEADER_FILE, LENGTH_FILE, LINKS_FILE, HnswHeader

HNSW = "hnsw-segment"
SQLITE_JOURNAL = "sqlite-journal"
_SECTORS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
MAX_ELEMENTS = 1 << 34


def _header(raw: bytes) -> HnswHeader | None:
    if len(raw) != HnswHeader.SIZE:
        return None
    h = HnswHeader.unpack(raw)
    if h is None:
        return None
    ok = (
        h.offset_level0 == 0
        and 0 <= h.cur_element_count <= h.max_elements < MAX_ELEMENTS
        and 0 < h.offset_data < h.label_offset
        and h.size_data_per_element == h.label_offset + 8
        and (h.label_offset - h.offset_data) % 4 == 0
        and 0 < h.max_m0 <= 4096
        and h.offset_data == 4 + 4 * h.max_m0
    )
    return h if ok else None


def layout_format(path: str, size: int) -> str | None:
    """The format a store kind's layout gives the file at `path` (of `size` bytes), checked against its
    content and its siblings; None when no layout claims it."""
    folder, name = os.path.split(path)
    if name.endswith("-journal"):
        return SQLITE_JOURNAL if _persisted_journal(path, size) else None
    if name not in (HEADER_FILE, DATA_FILE, LENGTH_FILE, LINKS_FILE):
        return None
    try:
        with open(os.path.join(folder, HEADER_FILE), "rb") as f:
            h = _header(f.read(HnswHeader.SIZE + 1))
    except OSError:
        return None
    if h is None:
        return None
    if name == HEADER_FILE:
        return HNSW
    if name == DATA_FILE:
        ok = size % h.size_data_per_element == 0 and size <= h.max_elements * h.size_data_per_element
    elif name == LENGTH_FILE:
        ok = size % 4 == 0 and size <= 4 * h.max_elements
    else:
        ok = size % 4 == 0
    return HNSW if ok else None


def _persisted_journal(path: str, size: int) -> bool:
    try:
        with open(path[: -len("-journal")], "rb") as db:
            head = db.read(18)
        with open(path, "rb") as f:
            journal = f.read(_SECTORS[-1] + 4)
    except OSError:
        return False
    if not head.startswith(b"SQLite format 3\x00") or journal[:8].strip(b"\x00"):
        return False
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512:
        return False
    sector_field, page_field = int.from_bytes(journal[20:24], "big"), int.from_bytes(journal[24:28], "big")
    if (sector_field, page_field) != (0, 0):  # in flight: the header is written but for its magic
        return sector_field in _SECTORS and page_field == page and _records_fit(journal, size, sector_field, page)
    return any(_records_fit(journal, size, sector, page) for sector in _SECTORS)


def _records_fit(journal: bytes, size: int, sector: int, page: int) -> bool:
    """Whether what follows a header of `sector` bytes is whole page records of `page` bytes."""
    return (
        size > sector
        and (size - sector) % (page + 8) == 0
        and not journal[28:sector].strip(b"\x00")
        and 0 < int.from_bytes(journal[sector : sector + 4], "big") < 1 << 31
    )
