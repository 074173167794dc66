"""SQLite files read through SQL by the decoded views (`probes.views`): every text or blob value,
long ones whole (overflow pages joined) and short ones each on its own where a trigger is in them, and
the values the file's freed pages still hold."""

from __future__ import annotations

import os
from bisect import bisect_right
from pathlib import Path

from erasure.sqlite import connect
from probes.documents.freed import freed_payloads
from probes.matcher import GENERIC_NAMES
from probes.view_payloads import FileScan, opens_window, read_payload

LONG_SQL_VALUE = 4000
"""SQLite values longer than a page's local payload (page size less its headers; this when the page size
cannot be read) may lie on overflow pages: they are read through SQL as well."""

SQL_BATCH = 4096
"""Short SQL values looked at in one trigger pass."""


def _short_values(
    scan: FileScan, values: list[bytes], declared: dict[bytes, list[tuple[str, bytes | None, int]]]
) -> None:
    """Short values, each read on its own where one pass over them all finds a trigger in it. On a page,
    SQLite writes a row's columns one after the other with nothing between them (`summary`, an id, then
    the text run together), so the raw view cannot tell where one value ends: docs/matching.md reads
    each value as its own text."""
    joined = b"\x00".join(values)
    starts: list[int] = []
    at = 0
    for v in values:
        starts.append(at)
        at += len(v) + 1
    # An identifier's trigger, or a generic one that opens a window of text (`opens_window`: base64 runs
    # and containers in the values are read by the raw view of the file's bytes, as before).
    hit = sorted(
        {
            bisect_right(starts, end - 1) - 1
            for pid, end in scan.matcher.triggers(joined, base64=False)
            if pid >= len(GENERIC_NAMES) or opens_window(GENERIC_NAMES[pid], joined, end)
        }
    )
    # Each is read as a guess (explicit checks only): a value that proves to be no format (a hash whose
    # bytes only look like an escape, or that puremagic would call an image) is matched as text, never
    # declared. The file it sits in is identified and read, its pages raw. A value repeated in the file
    # (`declared`: a subject id in every row of a table) is read once: reading it again finds nothing new
    # (a needle found is not looked for again), and what it declared is declared again.
    for i in hit:
        value = values[i]
        if value in declared:
            scan.unscanned += declared[value]
            continue
        before = len(scan.unscanned)
        if scan.budget.take(len(value)):
            read_payload(scan, value, 1, whole_file=False, speculative=True)
        declared[value] = scan.unscanned[before:]


def read_sql_values(scan: FileScan, path: str) -> None:
    """Text and blob values of a SQLite file, read through SQL: long ones whole (overflow pages joined),
    short ones each on its own where a trigger is in them (`_short_values`). A file whose values SQLite
    cannot read to the end (a corrupt page, a file that only looks like a database, one SQLite cannot open)
    is declared `database-unreadable`: its bytes were read, its values not all of them whole."""
    try:
        conn = connect(Path(path), readonly=True)
    except Exception:
        scan.opaque(DATABASE_UNREADABLE, None, _size(path))
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
        encoding = conn.execute("PRAGMA encoding").fetchone()
        # A value read as the bytes it is stored as: a text whose bytes are no UTF-8 (SQLite does not check)
        # would stop Python's decoding of it, and the reading with it. Text in UTF-16 is read as text.
        as_stored = "CAST({} AS BLOB)" if encoding is not None and str(encoding[0]).upper() == "UTF-8" else "{}"
        declared: dict[bytes, list[tuple[str, bytes | None, int]]] = {}
        for table in tables:
            cols = [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")')]
            for col in cols:
                short: list[bytes] = []
                value_of = as_stored.format(f'"{col}"')
                for (value,) in conn.execute(
                    f"SELECT {value_of} FROM \"{table}\" WHERE typeof(\"{col}\") IN ('text', 'blob')"
                ):
                    data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
                    if len(data) <= longest_local:
                        short.append(data)
                        if len(short) >= SQL_BATCH:
                            _short_values(scan, short, declared)
                            short = []
                    elif scan.budget.take(len(data)):
                        read_payload(scan, data, 1, whole_file=False)
                if short:
                    _short_values(scan, short, declared)
    except Exception:
        scan.opaque(DATABASE_UNREADABLE, None, _size(path))
    finally:
        conn.close()


DATABASE_UNREADABLE = "database-unreadable"


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def read_freed_pages(scan: FileScan, path: str) -> None:
    """A SQLite file's freed pages, read as the values they held (`probes.documents.freed`)."""
    for data in freed_payloads(path):
        if scan.budget.take(len(data)):
            scan.matcher.match_text(data.replace(b"\x00", b" ").decode("utf-8", "replace"), scan.hits)
