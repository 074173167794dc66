"""Byte scanner: every file under a directory, all needles in one pass (hyperscan, streaming mode).

Every regular file under the root is read (database, `-wal`, `-journal`, `-shm`, blobs in any
directory, corpora, session files, files nobody lists); symlinks and special files are not followed
and are counted instead. Each file is one hyperscan stream, so a needle that straddles two read
buffers is still found; the data is read with `readinto` into one preallocated buffer.

Needles are matched as literal byte strings. The python-hyperscan binding's pure-literal compiler
(`literal=True`) measures each pattern with `strlen`, which cuts a needle at its first NUL byte (a
float32 vector has NUL bytes), so every needle is compiled instead as a pattern in which each byte is
written as a `\\xHH` escape: no byte is a metacharacter, NUL included, and the semantics are those of a
literal (measured: same throughput as `literal=True`). The binding keeps no reference to the match
callback, so the callback is held in a local for the whole stream.

The report names needles by their index only: it never contains the needle bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import threading
import time
from bisect import bisect_right
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty, Queue
from typing import cast

import hyperscan
from pydantic import BaseModel, ConfigDict

from erasure.errors import InputError

MIB = 1 << 20
GIB = 1 << 30
DEFAULT_BUFFER = 8 * MIB
DEFAULT_SEGMENT = 64 * MIB
MAX_WORKERS = 4
SMALL_FILE = 256 * 1024
"""Files up to this size are scanned in batches (one scan per batch): a store holds tens of
thousands of small blobs and session files, and one stream per file costs more than reading it."""
SMALL_BATCH_BYTES = 8 * MIB
SMALL_BATCH_FILES = 4096
MAX_NEEDLE_BYTES = 2048
"""Hyperscan refuses longer patterns (its limit on the escaped expression is a little under 4 KiB of
needle); the fingerprint cuts long strings into pieces below this."""


class NeedleHits(BaseModel):
    """Where one needle (by its index in the needle list) was found."""

    model_config = ConfigDict(frozen=True)

    index: int
    hits: int
    files: list[str]


class ScannedFile(BaseModel):
    """One file the scan read: its path relative to the root (in memory only: a path can name someone,
    `probes.manifest` labels it before anything is written), its size and the SHA-256 of the bytes
    read."""

    model_config = ConfigDict(frozen=True)

    rel: str
    size: int
    sha256: str


class ScanReport(BaseModel):
    """What a scan read and found. `found` lists only needles with at least one hit, by index.
    `files` (only when asked for, `scan_tree(manifest=True)`): every file read, sorted by path."""

    model_config = ConfigDict(frozen=True)

    needles: int
    found: list[NeedleHits]
    files_scanned: int
    bytes_scanned: int
    seconds: float
    gib_per_s: float
    unreadable: list[str]
    skipped_not_regular: int
    files: list[ScannedFile] = []

    def found_indexes(self) -> set[int]:
        """Indexes of the needles found at least once."""
        return {h.index for h in self.found}

    def hit_count(self, index: int) -> int:
        """How many times needle `index` was found (overlapping matches count separately)."""
        return next((h.hits for h in self.found if h.index == index), 0)


class _Walk:
    """The files of a tree, in a stable order, with what could not be scanned set aside. Paths are
    strings: a store holds tens of thousands of small files, and Path objects per file cost more than
    the stat."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._prefix = len(str(root)) + 1
        self.skipped_not_regular = 0
        self.unreadable: list[str] = []

    def files(self) -> Iterator[tuple[str, str, int]]:
        """(absolute path, posix path relative to the root, size) of every regular file, sorted per dir."""
        stack = [str(self.root)]
        while stack:
            current = stack.pop()
            try:
                with os.scandir(current) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                self.unreadable.append(self._rel(current) + "/")
                continue
            subdirs: list[str] = []
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                mode = st.st_mode
                if stat.S_ISDIR(mode):
                    subdirs.append(entry.path)
                elif stat.S_ISREG(mode):
                    yield entry.path, entry.path[self._prefix :], st.st_size
                else:  # symlinks, fifos, sockets, devices: reading them could loop or block
                    self.skipped_not_regular += 1
            stack.extend(reversed(subdirs))

    def _rel(self, path: str) -> str:
        return path[self._prefix :] or "."


def _check_needles(needles: Sequence[bytes]) -> None:
    for i, needle in enumerate(needles):
        if not isinstance(needle, bytes | bytearray):
            raise InputError(f"needle {i} is not bytes")
        if not needle:
            raise InputError(f"needle {i} is empty")
        if len(needle) > MAX_NEEDLE_BYTES:
            raise InputError(f"needle {i} is longer than {MAX_NEEDLE_BYTES} bytes")


def _escape(needle: bytes) -> bytes:
    return "".join(f"\\x{b:02x}" for b in needle).encode("ascii")


def _flags(n: int, caseless: Collection[int]) -> list[int]:
    return [hyperscan.HS_FLAG_CASELESS if i in caseless else 0 for i in range(n)]


def compile_needles(
    needles: Sequence[bytes], caseless: Collection[int] = (), *, mode: int = hyperscan.HS_MODE_STREAM
) -> hyperscan.Database:
    """A hyperscan database (streaming unless `mode` says otherwise) matching each needle literally
    (those whose index is in `caseless` in any ASCII letter case); pattern id = needle index."""
    _check_needles(needles)
    db = hyperscan.Database(mode=mode)
    db.compile(
        expressions=[_escape(bytes(n)) for n in needles],
        ids=list(range(len(needles))),
        flags=_flags(len(needles), caseless),
    )
    return db


@dataclass(frozen=True)
class _Batch:
    """Small files scanned as one buffer: a match is counted only inside one file's bytes."""

    files: list[tuple[str, str]]


@dataclass(frozen=True)
class _Segment:
    """Bytes [start, end) of one file (end None: to EOF, for the file's last segment)."""

    path: str
    rel: str
    start: int
    end: int | None


@dataclass
class _Partial:
    """What one worker found: per needle, hits and files; per file, failures."""

    counts: dict[int, int] = field(default_factory=dict)
    where: dict[int, set[str]] = field(default_factory=dict)
    bytes_read: int = 0
    failed: dict[str, bool] = field(default_factory=dict)
    """rel -> True when unreadable, False when it vanished during the scan."""
    digests: dict[str, tuple[int, str]] | None = None
    """rel -> (size, sha256) of every whole file this worker read (None: no manifest asked for)."""


def _segments(walk: _Walk, segment_size: int) -> tuple[list[_Segment], list[_Batch]]:
    segments: list[_Segment] = []
    batches: list[_Batch] = []
    batch: list[tuple[str, str]] = []
    batch_bytes = 0
    for path, rel, size in walk.files():
        if size <= SMALL_FILE:
            batch.append((path, rel))
            batch_bytes += size
            if batch_bytes >= SMALL_BATCH_BYTES or len(batch) >= SMALL_BATCH_FILES:
                batches.append(_Batch(batch))
                batch, batch_bytes = [], 0
            continue
        starts = list(range(0, size, segment_size)) or [0]
        segments += [_Segment(path, rel, a, None if a == starts[-1] else a + segment_size) for a in starts]
    if batch:
        batches.append(_Batch(batch))
    return segments, batches


def scan_tree(
    root: Path,
    needles: Sequence[bytes],
    *,
    buffer_size: int = DEFAULT_BUFFER,
    segment_size: int = DEFAULT_SEGMENT,
    workers: int | None = None,
    caseless: Collection[int] = (),
    manifest: bool = False,
) -> ScanReport:
    """Scan every regular file under `root` for all `needles` in one pass; report hits by index.

    With `manifest`, the report also lists every file read with its size and the SHA-256 of the bytes
    read, hashed from the same reads as the scan (a file of more than one segment is hashed by one more
    sequential read after the scan).

    Files are cut into segments of `segment_size` scanned by `workers` threads (default: one per CPU,
    at most 4); reads and hyperscan both release the GIL. Each segment is its own stream that starts
    `longest needle - 1` bytes early and counts only matches ending inside the segment, so a needle
    across a segment boundary is counted exactly once, and one across a read buffer is found by the
    stream.
    """
    if buffer_size < 1 or segment_size < 1:
        raise InputError("buffer_size and segment_size must be positive")
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root} is not a directory")
    db = compile_needles(needles, caseless) if needles else None
    lengths = [len(n) for n in needles]
    overlap = max(lengths, default=1) - 1
    walk = _Walk(root)
    started = time.perf_counter()
    segments, batches = _segments(walk, segment_size)
    queue: Queue[_Segment | _Batch] = Queue()
    for seg in segments:
        queue.put(seg)
    for batch in batches:
        queue.put(batch)
    n_items = len(segments) + len(batches)
    n_workers = max(1, min(workers or min(os.cpu_count() or 1, MAX_WORKERS), n_items or 1))
    scratches = [db.scratch.clone() if db is not None else None for _ in range(n_workers)]
    parts = [_Partial(digests={} if manifest else None) for _ in range(n_workers)]
    errors: list[BaseException] = []
    files = {s.rel for s in segments} | {rel for b in batches for _, rel in b.files}

    def work(k: int) -> None:
        try:
            _drain(queue, (db, scratches[k]), lengths, parts[k], bytearray(buffer_size), overlap)
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,), name=f"bytescan-{k}") for k in range(1, n_workers)]
    # A file of several segments is scanned in pieces by several workers, but SHA-256 is sequential:
    # one more thread reads and hashes such files while the workers scan (hashlib releases the GIL).
    split: dict[str, tuple[int, str] | None] = {s.rel: None for s in segments if s.start > 0} if manifest else {}
    paths = {s.rel: s.path for s in segments}
    if split:
        threads.append(threading.Thread(target=_hash_files, args=(split, paths), name="bytescan-hash"))
    for t in threads:
        t.start()
    work(0)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    seconds = time.perf_counter() - started
    report = _merge(len(needles), parts, walk, files, seconds)
    if not manifest:
        return report
    return report.model_copy(update={"files": _manifest(parts, split)})


def _hash_files(split: dict[str, tuple[int, str] | None], paths: dict[str, str]) -> None:
    """(size, sha256) of each file in `split`, in place; None stays for one that could not be read."""
    for rel in split:
        try:
            split[rel] = _hash_file(paths[rel])
        except OSError:
            continue


def _manifest(parts: list[_Partial], split: dict[str, tuple[int, str] | None]) -> list[ScannedFile]:
    """Every file read whole by one worker (small files, one-segment files), and every file of several
    segments (hashed beside the scan); files that failed or vanished are not listed."""
    got: dict[str, tuple[int, str]] = {}
    failed: set[str] = set()
    for part in parts:
        got |= part.digests or {}
        failed |= set(part.failed)
    got |= {rel: h for rel, h in split.items() if h is not None and rel not in failed}
    return [ScannedFile(rel=rel, size=size, sha256=digest) for rel, (size, digest) in sorted(got.items())]


def _hash_file(path: str) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(DEFAULT_BUFFER):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


_Stream = tuple["hyperscan.Database | None", "hyperscan.Scratch | None"]


def _drain(
    queue: Queue[_Segment | _Batch], stream: _Stream, lengths: list[int], part: _Partial, buf: bytearray, overlap: int
) -> None:
    view = memoryview(buf)
    while True:
        try:
            item = queue.get_nowait()
        except Empty:
            return
        if isinstance(item, _Batch):
            part.bytes_read += _scan_batch(item, stream, lengths, part)
            continue
        if item.rel in part.failed:
            continue
        try:
            part.bytes_read += _scan_segment(item, stream[0], stream[1], part, view, overlap)
        except FileNotFoundError:
            part.failed[item.rel] = False
        except OSError:
            part.failed[item.rel] = True


def _scan_batch(batch: _Batch, stream: _Stream, lengths: list[int], part: _Partial) -> int:
    """Read the batch's files into one buffer and scan it once (one stream, one write: the same matches
    as a block-mode scan, without compiling a second database); a match counts for the file that holds
    all of its bytes (needles are literals, so its start is its end minus its length); one across two
    files' bytes is no match. Returns the bytes read."""
    db, scratch = stream
    buf = bytearray()
    starts: list[int] = []
    rels: list[str] = []
    for path, rel in batch.files:
        try:
            fd = os.open(path, os.O_RDONLY)
            chunks: list[bytes] = []
            try:
                while chunk := os.read(fd, MIB):  # to EOF, even if the file grew since the walk
                    chunks.append(chunk)
            finally:
                os.close(fd)
            data = b"".join(chunks)
        except FileNotFoundError:
            part.failed[rel] = False
            continue
        except OSError:
            part.failed[rel] = True
            continue
        if part.digests is not None:
            part.digests[rel] = (len(data), hashlib.sha256(data).hexdigest())
        if data:
            starts.append(len(buf))
            rels.append(rel)
            buf += data
    if db is None or not buf:
        return len(buf)
    ends = [*starts[1:], len(buf)]

    def on_match(needle_id: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
        i = bisect_right(starts, end - lengths[needle_id]) - 1
        if i >= 0 and end <= ends[i]:
            part.counts[needle_id] = part.counts.get(needle_id, 0) + 1
            part.where.setdefault(needle_id, set()).add(rels[i])

    with db.stream(match_event_handler=on_match) as one:
        one.scan(bytes(buf), scratch=scratch)
    return len(buf)


def _scan_segment(
    seg: _Segment,
    db: hyperscan.Database | None,
    scratch: hyperscan.Scratch | None,
    part: _Partial,
    view: memoryview,
    overlap: int,
) -> int:
    """Scan one segment; returns the bytes of the segment itself (not the overlap) that were read."""
    begin = max(0, seg.start - overlap)
    own = 0
    whole = part.digests is not None and seg.start == 0 and seg.end is None
    digest = hashlib.sha256() if whole else None

    def on_match(needle_id: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
        if begin + end > seg.start:  # ends inside this segment: the one before did not count it
            part.counts[needle_id] = part.counts.get(needle_id, 0) + 1
            part.where.setdefault(needle_id, set()).add(seg.rel)

    with open(seg.path, "rb", buffering=0) as f, contextlib.ExitStack() as stack:
        f.seek(begin)
        pos = begin
        # Scans use this worker's scratch. Closing uses the database's own scratch (the binding's
        # close(scratch=...) is broken), which is safe: close holds the GIL, so no two run at once,
        # and no scan ever uses the database's scratch.
        stream = stack.enter_context(db.stream(match_event_handler=on_match)) if db is not None else None
        while True:
            want = len(view) if seg.end is None else min(len(view), seg.end - pos)
            n = f.readinto(view[:want]) if want > 0 else 0
            if not n:
                break
            if stream is not None:
                # the stub says AnyStr; the C API takes any buffer (y*), so no copy is made
                stream.scan(cast(bytes, view[:n]), scratch=scratch)
            if digest is not None:
                digest.update(view[:n])
            own += max(0, min(n, pos + n - seg.start))
            pos += n
    if digest is not None and part.digests is not None:
        part.digests[seg.rel] = (pos, digest.hexdigest())
    return own


def _merge(n_needles: int, parts: list[_Partial], walk: _Walk, files: set[str], seconds: float) -> ScanReport:
    counts = [0] * n_needles
    where: list[set[str]] = [set() for _ in range(n_needles)]
    failed: dict[str, bool] = {}
    for part in parts:
        for i, c in part.counts.items():
            counts[i] += c
            where[i] |= part.where[i]
        for rel, unreadable in part.failed.items():
            failed[rel] = failed.get(rel, False) or unreadable
    walk.unreadable += [rel for rel, unreadable in failed.items() if unreadable]
    total = sum(p.bytes_read for p in parts)
    return _report(n_needles, counts, where, walk, len(files - set(failed)), total, seconds)


def _report(
    n_needles: int, counts: list[int], where: list[set[str]], walk: _Walk, files: int, total: int, seconds: float
) -> ScanReport:
    found = [NeedleHits(index=i, hits=c, files=sorted(where[i])) for i, c in enumerate(counts) if c]
    return ScanReport(
        needles=n_needles,
        found=found,
        files_scanned=files,
        bytes_scanned=total,
        seconds=seconds,
        gib_per_s=(total / GIB / seconds) if seconds > 0 else 0.0,
        unreadable=sorted(walk.unreadable),
        skipped_not_regular=walk.skipped_not_regular,
    )


def naive_scan_tree(root: Path, needles: Sequence[bytes], *, buffer_size: int = DEFAULT_BUFFER) -> ScanReport:
    """The bench baseline: the same walk, each needle searched with `bytes.find` per buffer.

    Buffers overlap by the longest needle less one byte; a match is counted in the buffer where it
    ends, so none is counted twice. Same report as `scan_tree`.
    """
    _check_needles(needles)
    root = Path(root)
    keep = max((len(n) for n in needles), default=1) - 1
    counts = [0] * len(needles)
    where: list[set[str]] = [set() for _ in needles]
    walk = _Walk(root)
    files = total = 0
    started = time.perf_counter()
    for path, rel, _size in walk.files():
        try:
            with open(path, "rb", buffering=0) as f:
                tail = b""
                while chunk := f.read(buffer_size):
                    total += len(chunk)
                    window = tail + chunk
                    for i, needle in enumerate(needles):
                        c = _count_ending_after(window, bytes(needle), len(tail))
                        if c:
                            counts[i] += c
                            where[i].add(rel)
                    tail = window[-keep:] if keep else b""
        except FileNotFoundError:
            continue
        except OSError:
            walk.unreadable.append(rel)
            continue
        files += 1
    seconds = time.perf_counter() - started
    return _report(len(needles), counts, where, walk, files, total, seconds)


def _count_ending_after(window: bytes, needle: bytes, boundary: int) -> int:
    """Overlapping occurrences of `needle` in `window` that end after `boundary`."""
    count = 0
    start = max(0, boundary - len(needle) + 1)
    while (pos := window.find(needle, start)) != -1:
        count += 1
        start = pos + 1
    return count
