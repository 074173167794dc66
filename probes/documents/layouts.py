"""Files a supported store kind writes in a format with no magic, identified by that kind's layout and
checked against its content, never by a name alone.

Chroma's HNSW segment folders (`erasure.target_kinds.chroma.hnsw`): `header.bin` is identified when its
100 bytes are a consistent hnswlib header (element size = label offset + 8, vector before label, element counts within
bounds); `data_level0.bin`, `length.bin` and `link_lists.bin` beside such a header when their sizes agree
with it (rows of the element size, a float per element, 4-byte words). These files hold links, floats
and integer labels only: no text by their format. Their bytes are still read raw (the subject's own
vectors are needles of the raw scan), and the chroma kind's probe parses them itself
(`probes.targets.chroma.indexes`). `index_metadata.pickle` needs no layout: a pickle is identified by
its content and read by `probes.documents.pickles`.

PostgreSQL's data directory (the `langgraph-postgres` kind scans its cluster's): the folder holding
`PG_VERSION` and `global/pg_control`. In it, relation files (`base/`, `global/`: 8 KiB pages whose first
and last page headers are PostgreSQL's), WAL segments (`pg_wal/`: a power-of-two size, the WAL page magic
and a long header), SLRU files (`pg_xact/`, `pg_multixact/`, ...: whole pages), and the control,
relation-mapper, relcache-init and replication state files (by their own magic numbers) are identified;
outside it, so are the page images `pg_waldump --save-fullpage` writes out of compressed WAL
(`probes.targets.langgraph_postgres.wal`: `<lsn>.<tablespace>.<database>.<relation>.<block>_<fork>`,
one 8 KiB page each).
Pages and WAL are read raw, around their triggers (tuples and WAL records hold text as written; the
kind's probe reads the live rows itself). Text files there (configuration, the server's logs) are text.

Kuzu's database file (the `graphiti` kind's embedded backend, wherever a copy of it lies): the magic
`KUZU` and a storage version at the start of a file of whole 4 KiB pages. Its pages are read raw, around
their triggers: Kuzu writes strings and float32 lists as they are (measured with kuzu 0.11.3; the kind's
probe declares any of the subject's values it did not find in the bytes before the erasure).

SQLite's rollback journal with no magic: kept by `journal_mode=PERSIST` (after each commit SQLite zeroes
its header), or of a transaction in flight (the magic is written at commit only); the rest still holds
page records. It is identified when the file beside it without `-journal` is a SQLite database, its
magic is zeros, and what follows a header of one sector (512 bytes up to 64 KiB; the header's own
sector and page size when a transaction in flight wrote them) is whole page records of that database's
page size (a page number, the page, a checksum). It is read as a journal with its magic is (its pages
raw, windows matched).
"""

from __future__ import annotations

import functools
import os
import re
import struct

from erasure.target_kinds.chroma.hnsw import DATA_FILE, HEADER_FILE, LENGTH_FILE, LINKS_FILE, HnswHeader

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
    pg_root = _pg_root(folder)
    if pg_root is not None:
        return _postgres_format(path, size, pg_root)
    if _FULLPAGE.match(name):
        return _fullpage_format(path, size)
    if name.endswith("-journal"):
        return SQLITE_JOURNAL if _persisted_journal(path, size) else None
    if size and size % _KUZU_PAGE == 0 and _kuzu_header(path):
        return KUZU_PAGES
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


# --- Kuzu's database file (the graphiti kind's embedded backend) ---------------------------------------

_KUZU_PAGE = 4096
_KUZU_MAGIC = b"KUZU"


def _kuzu_header(path: str) -> bool:
    """Kuzu's database header: the magic `KUZU`, then the storage version (a little-endian u64; 39 for
    kuzu 0.11), at the start of a file of whole 4 KiB pages."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError:
        return False
    return len(head) == 12 and head.startswith(_KUZU_MAGIC) and 0 < struct.unpack_from("<Q", head, 4)[0] < 1 << 16


# --- PostgreSQL's data directory (the langgraph-postgres kind's cluster) -----------------------------------

PG_PAGES = "postgres-pages"
"""Relation, free-space and visibility-map files, SLRU files: 8 KiB pages (tuples, read raw)."""
PG_WAL = "postgres-wal"
"""A WAL segment: page images and records (read raw)."""
PG_STATE = "postgres-state"
"""pg_control, relation-mapper and relcache-init files, replication-origin and slot state: binary
state with no one's text by its format (its bytes are still read raw)."""
KUZU_PAGES = "kuzu-database"
"""A Kuzu database file (the graphiti kind's embedded backend): 4 KiB pages of column chunks (strings
and float32 lists as written, read raw)."""
PAGED = frozenset({SQLITE_JOURNAL, PG_PAGES, PG_WAL, KUZU_PAGES})
"""Layout formats whose pages are read raw, around their triggers, as SQLite's are."""

_BLCKSZ = 8192
_PAGE_VERSION = 0x2004  # pd_pagesize_version: 8192 | layout version 4
_RELATION = re.compile(r"^\d+(?:_(?:fsm|vm|init))?(?:\.\d+)?$")
_WAL_SEGMENT = re.compile(r"^[0-9A-F]{24}(?:\.partial)?$")
_FULLPAGE = re.compile(r"^[0-9A-F]{8}-[0-9A-F]{8}-[0-9A-F]{8}\.\d+\.\d+\.\d+\.\d+_(?:main|fsm|vm|init)$")
"""A page image `pg_waldump --save-fullpage` wrote out of the WAL (`probes.targets.langgraph_postgres.wal`)."""
_SLRU_DIRS = frozenset({"pg_xact", "pg_subtrans", "pg_commit_ts", "pg_serial", "pg_notify", "pg_multixact"})
_STATE_MAGIC = {
    "pg_filenode.map": (0x592717,),
    "pg_internal.init": (0x573266,),
    "replorigin_checkpoint": (0x1257DADE,),
    "state": (0x1051CA1,),
}


@functools.lru_cache(maxsize=4096)
def _pg_root(folder: str) -> str | None:
    """The data directory `folder` lies in (itself or up to three levels up): it holds `PG_VERSION` (a
    version number) and `global/pg_control`."""
    here = folder
    for _ in range(4):
        try:
            with open(os.path.join(here, "PG_VERSION"), "rb") as f:
                version = f.read(16).strip()
            if version.replace(b".", b"").isdigit() and os.path.isfile(os.path.join(here, "global", "pg_control")):
                return here
        except OSError:
            pass
        here = os.path.dirname(here)
    return None


def forget() -> None:
    """Forget the data directories found (a scan starts afresh: folders change between scans)."""
    _pg_root.cache_clear()


def _page_ok(page: bytes) -> bool:
    """A heap/index page header (pd_lower <= pd_upper <= pd_special <= 8192, version 4 at 8 KiB), or a new
    page (its header all zeros)."""
    if len(page) < 24:
        return False
    lower, upper, special, version = struct.unpack_from("<HHHH", page, 12)
    if (lower, upper, special, version) == (0, 0, 0, 0):
        return True
    return bool(version == _PAGE_VERSION and 24 <= lower <= upper <= special <= _BLCKSZ)


def _fullpage_format(path: str, size: int) -> str | None:
    if size != _BLCKSZ:
        return None
    try:
        with open(path, "rb") as f:
            page = f.read(_BLCKSZ)
    except OSError:
        return None
    return PG_PAGES if _page_ok(page) else None


def _postgres_format(path: str, size: int, root: str) -> str | None:
    parts = os.path.relpath(path, root).split(os.sep)
    name = parts[-1]
    try:
        with open(path, "rb") as f:
            head = f.read(_BLCKSZ)
            if size > _BLCKSZ:
                f.seek(size - _BLCKSZ)
                tail = f.read(_BLCKSZ)
            else:
                tail = head
    except OSError:
        return None
    if parts[0] in ("base", "global", "pg_tblspc") and _RELATION.match(name):
        return PG_PAGES if size % _BLCKSZ == 0 and _page_ok(head) and _page_ok(tail) else None
    if parts[0] == "pg_wal" and len(parts) == 2 and _WAL_SEGMENT.match(name):
        magic, info = struct.unpack_from("<HH", head, 0) if len(head) >= 4 else (0, 0)
        return PG_WAL if size & (size - 1) == 0 and 0xD000 <= magic <= 0xD1FF and info & 0x2 else None
    if parts[0] in _SLRU_DIRS and re.fullmatch(r"[0-9A-F]{4,15}", name):
        return PG_PAGES if size % _BLCKSZ == 0 else None
    if parts == ["global", "pg_control"]:
        return PG_STATE if size == _BLCKSZ and 900 <= struct.unpack_from("<I", head, 8)[0] <= 9999 else None
    magics = _STATE_MAGIC.get(name)
    if magics is not None and len(head) >= 4 and struct.unpack_from("<I", head, 0)[0] in magics:
        return PG_STATE
    return None
