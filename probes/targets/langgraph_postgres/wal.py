"""Compressed full-page images in a PostgreSQL cluster's WAL, as the probe reads them: own code, read-only.

With `wal_compression` on (pglz, lz4, zstd), the first change to a page after a checkpoint writes the
whole page into the WAL compressed: a page holding the subject's rows is then in `pg_wal/` where no byte
search sees it (pglz puts a control byte among every eight literals). `pg_waldump --save-fullpage`
(PostgreSQL 16+) writes every image out decompressed, as an 8 kB page; those pages are scanned like any
file of the target, and a find is residue named `pg_wal_fullpages/<segment>-page<n>/<lsn>.<tablespace>.
<database>.<relation>.<block>_<fork>` (numbers only).

A recycled segment (renamed for reuse) keeps the records of the segment it was, and once WAL is written
over its start, its tail still holds older records: each run of pages whose page headers follow on from
one another is read as the segment its first page's address names, from a copy whose first page header
says so. Where `pg_waldump` of the server's major version (16+) is not found, or a run cannot be read,
`unread` says so and the WAL is declared, never all clear by bytes.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

MAGIC_MIN = 0xD000
"""WAL page magic numbers of every supported major (0xD10D for 15, 0xD116 for 16, ...): a page whose
first two bytes are below this is not a WAL page (a zeroed, unused one)."""
LONG_HEADER = 0x0002
_LSN = re.compile(r"\b([0-9A-F]+)/([0-9A-F]+)\b")
_SEGMENT = re.compile(r"^[0-9A-F]{24}$")
TIMEOUT = 600


def compression(conn: psycopg.Connection[Any]) -> str:
    """`wal_compression` (off, on = pglz, pglz, lz4, zstd)."""
    row = conn.execute("SELECT current_setting('wal_compression')").fetchone()
    return str(row[0]) if row else "off"


def _major(text: str) -> int | None:
    m = re.search(r"\(PostgreSQL\)\s+(\d+)", text)
    return int(m.group(1)) if m else None


def waldump(conn: psycopg.Connection[Any], bindir: Path | None) -> Path | None:
    """A `pg_waldump` of the server's major version that can save full-page images (16+): from the
    target's `pg_bindir`, the server's own bin folder (`pg_config`, readable by a superuser), PATH, or
    Debian's `/usr/lib/postgresql/<major>/bin`; None when there is none."""
    row = conn.execute("SELECT current_setting('server_version_num')::int / 10000").fetchone()
    major = int(row[0]) if row else 0
    if major < 16:
        return None
    places: list[Path] = [bindir] if bindir is not None else []
    with contextlib.suppress(psycopg.Error):
        got = conn.execute("SELECT setting FROM pg_config WHERE name = 'BINDIR'").fetchone()
        if got and got[0]:
            places.append(Path(str(got[0])))
    on_path = shutil.which("pg_waldump")
    places += [Path(on_path).parent] if on_path else []
    places.append(Path(f"/usr/lib/postgresql/{major}/bin"))
    for d in places:
        exe = d / "pg_waldump"
        if not (exe.is_file() and os.access(exe, os.X_OK)):
            continue
        try:
            out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=30, check=False)
        except OSError:
            continue
        if _major(out.stdout) == major:
            return exe
    return None


@dataclass(frozen=True)
class _Run:
    """Pages `first`..`last` (inclusive) of a segment file whose headers follow on from one another."""

    first: int
    last: int
    addr: int
    tli: int


def _runs(data: bytes, blcksz: int) -> list[_Run]:
    out: list[_Run] = []
    run: _Run | None = None
    for i in range(len(data) // blcksz):
        magic, _info, tli, addr = struct.unpack_from("<HHIQ", data, i * blcksz)
        if magic < MAGIC_MIN or addr % blcksz:
            run = None
            continue
        if run is not None and addr == run.addr + (i - run.first) * blcksz and tli >= run.tli:
            run = _Run(run.first, i, run.addr, run.tli)
            out[-1] = run
        else:
            run = _Run(i, i, addr, tli)
            out.append(run)
    return out


def _name(tli: int, segno: int, seg_size: int) -> str:
    per = 0x1_0000_0000 // seg_size
    return f"{tli:08X}{segno // per:08X}{segno % per:08X}"


def _lsn(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


def _dump(exe: Path, data: bytes, sysid: int, run: _Run, seg_size: int, blcksz: int, dest: Path, work: Path) -> bool:
    """`pg_waldump --save-fullpage` over one run, into `dest`, from a copy named as the segment it was written as (its
    first page header rewritten to say so when the run starts later in the file): whether every page
    of the run was read."""
    start = run.addr - run.first * blcksz
    if start % seg_size:
        return False
    name = _name(run.tli, start // seg_size, seg_size)
    folder = Path(tempfile.mkdtemp(dir=work))
    copy = bytearray(data)
    if run.first:
        magic = struct.unpack_from("<H", data, run.first * blcksz)[0]
        page0 = struct.pack("<HHIQI4xQII", magic, LONG_HEADER, run.tli, start, 0, sysid, seg_size, blcksz)
        copy[:blcksz] = page0.ljust(blcksz, b"\0")
    (folder / name).write_bytes(bytes(copy))
    end = run.addr + (run.last - run.first + 1) * blcksz
    proc = subprocess.run(
        [str(exe), "-p", str(folder), f"--save-fullpage={dest}", "-s", _lsn(run.addr), "-e", _lsn(end), name],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    shutil.rmtree(folder, ignore_errors=True)
    if proc.returncode == 0:
        return True
    if "could not find a valid record" in proc.stderr:
        return False
    # Stopped at the end of valid WAL: read when that lies in the run's last page (or past it).
    stops = [int(hi, 16) << 32 | int(lo, 16) for hi, lo in _LSN.findall(proc.stderr)]
    return bool(stops) and max(stops) >= end - blcksz


@contextlib.contextmanager
def fullpages(data_dir: Path, exe: Path) -> Iterator[tuple[Path, int]]:
    """Every full-page image in `data_dir/pg_wal`, decompressed, in a temporary folder (removed after);
    and how many runs of WAL pages could not be read."""
    work = Path(tempfile.mkdtemp(prefix="erasure-fullpages-"))
    try:
        out = work / "pages"
        out.mkdir()
        unread = 0
        for seg in sorted((data_dir / "pg_wal").iterdir()):
            if not (_SEGMENT.fullmatch(seg.name) and seg.is_file()):
                continue
            try:
                data = seg.read_bytes()
            except OSError:
                unread += 1
                continue
            if len(data) < 40 or struct.unpack_from("<H", data)[0] < MAGIC_MIN:
                sysid, seg_size, blcksz = 0, len(data), 8192
            else:
                sysid, seg_size, blcksz = struct.unpack_from("<QII", data, 24)
            if not blcksz or not seg_size or seg_size != len(data):
                unread += any(data)
                continue
            for run in _runs(data, blcksz):
                dest = out / f"{seg.name}-page{run.first}"
                unread += not _dump(exe, data, sysid, run, seg_size, blcksz, dest, work)
        yield out, unread
    finally:
        shutil.rmtree(work, ignore_errors=True)
