"""SQLite files read through SQL by the decoded views (`probes.views`): every text or blob value,
long ones whole (overflow pages joined) and short ones each on its own where a trigger is in them, and
the values the file's freed pages still hold."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from itertools import accumulate
from pathlib import Path

from apsw import Connection, SQLError

from erasure.sqlite import connect
from probes.documents.freed import freed_payloads
from probes.matcher import GENERIC_NAMES
from probes.view_payloads import FileScan, read_payload

LONG_SQL_VALUE = 4000
"""SQLite values longer than a page's local payload (page size less its headers; this when the page size
cannot be read) may lie on overflow pages: they are read through SQL as well."""

SQL_BATCH = 4096
"""Short SQL values looked at in one trigger pass."""


def _short_values(scan: FileScan, joined: bytes, starts: list[int]) -> None:
    """Short values, run together in `joined` (value k from `starts[k]`), each read on its own where one
    pass over them all finds a trigger in it. On a page, SQLite writes a row's columns one after the other
    with nothing between them (`summary`, an id, then the text run together), so the raw view cannot tell
    where one value ends: docs/matching.md reads each value as its own text (a trigger across two values
    only opens the one it ends in)."""
    # An identifier's trigger (raw or escaped), or a full-width run that may spell one (base64 runs and
    # containers in them are read by the raw view of the file's bytes, as before).
    hit = sorted(
        {
            bisect_right(starts, end - 1) - 1
            for pid, end in scan.matcher.triggers(joined)
            if pid >= len(GENERIC_NAMES) or GENERIC_NAMES[pid] == "fullwidth"
        }
    )
    # Each is read as a guess (explicit checks only): a value that proves to be no format (a hash whose
    # bytes only look like an escape, or that puremagic would call an image) is matched as text, never
    # declared. The file it sits in is identified and read, its pages raw.
    for i in hit:
        value = joined[starts[i] : starts[i + 1] if i + 1 < len(starts) else len(joined)]
        if scan.budget.take(len(value)):
            read_payload(scan, value, 1, whole_file=False, speculative=True)


def _column(scan: FileScan, conn: Connection, table: str, col: str, longest_local: int) -> None:
    """One column's text and blob values: the short ones fetched run together by SQLite itself
    (`group_concat` of their hex, `SQL_BATCH` rows at a time by rowid), the long ones one by one."""
    values = f"typeof(\"{col}\") IN ('text', 'blob')"
    size = f'length(CAST("{col}" AS BLOB))'
    for (value,) in conn.execute(f'SELECT "{col}" FROM "{table}" WHERE {values} AND {size} > ?', (longest_local,)):
        data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
        if scan.budget.take(len(data)):
            read_payload(scan, data, 1, whole_file=False)
    try:
        bounds = conn.execute(f'SELECT min(rowid), max(rowid), count(*) FROM "{table}"').fetchone()
        if bounds is not None and bounds[0] is not None and bounds[1] - bounds[0] > 4 * bounds[2] + SQL_BATCH:
            raise SQLError("rowids too sparse for batches by range")
    except SQLError:  # a table WITHOUT ROWID (or with sparse rowids): its values one by one
        _by_rows(scan, conn.execute(f'SELECT "{col}" FROM "{table}" WHERE {values} AND {size} <= ?', (longest_local,)))
        return
    if bounds is None or bounds[0] is None:
        return
    query = (
        f"SELECT group_concat(hex(\"{col}\"), ''), group_concat({size}, ',') FROM \"{table}\" "
        f"WHERE rowid >= ? AND rowid < ? AND {values} AND {size} <= ?"
    )
    for low in range(int(bounds[0]), int(bounds[1]) + 1, SQL_BATCH):
        row = conn.execute(query, (low, low + SQL_BATCH, longest_local)).fetchone()
        hexed, lengths = row if row is not None else (None, None)
        if not hexed:
            continue
        # the two aggregates run over the same rows in the same order
        starts = [0, *accumulate(map(int, str(lengths).split(",")))][:-1]
        _short_values(scan, bytes.fromhex(str(hexed)), starts)


def _by_rows(scan: FileScan, rows: Iterable[tuple[str | bytes]]) -> None:
    """Short values of a table without rowids, fetched one by one and run together in batches."""
    joined = bytearray()
    starts: list[int] = []
    for (value,) in rows:
        starts.append(len(joined))
        joined += value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
        if len(starts) >= SQL_BATCH:
            _short_values(scan, bytes(joined), starts)
            joined, starts = bytearray(), []
    if starts:
        _short_values(scan, bytes(joined), starts)


def read_sql_values(scan: FileScan, path: str) -> None:
    """Text and blob values of a SQLite file, read through SQL: long ones whole (overflow pages joined),
    short ones each on its own where a trigger is in them (`_short_values`)."""
    try:
        conn = connect(Path(path), readonly=True)
    except Exception:
        return
    try:
        page = conn.execute("PRAGMA page_size").fetchone()
        longest_local = int(page[0]) - 64 if page else LONG_SQL_VALUE
        virtual = [
            str(r[0])
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL%'")
        ]
        # Shadow tables of full-text and vector indexes hold index segments and vector chunks, not
        # anyone's text as written (the raw view reads their bytes).
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
            )
            if not any(str(r[0]).startswith(f"{v}_") for v in virtual)
        ]
        for table in tables:
            for col in [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")')]:
                _column(scan, conn, table, col, longest_local)
    except Exception:
        return
    finally:
        conn.close()


def read_freed_pages(scan: FileScan, path: str) -> None:
    """A SQLite file's freed pages, read as the values they held (`probes.documents.freed`)."""
    for data in freed_payloads(path):
        if scan.budget.take(len(data)):
            scan.matcher.match_text(data.replace(b"\x00", b" ").decode("utf-8", "replace"), scan.hits)
