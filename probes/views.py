"""Decoded views: the byte probe reads every file as software writes text, not only as raw bytes.

The raw scan (`probes.bytescan`) matches literal spellings. People's data is also written in documents,
escaped, encoded, compressed and re-spelled, and a literal scan is blind to all of it. Parse, then match
(DESIGN.md invariant 7): every payload (a file, an archive member, a decoded stream) is identified by its
content and read by the parser made for its format (`probes.documents`: markup, PDF, OOXML/ODF, RTF,
mail, vCard/iCalendar, JSON, compressors and archives, images by OCR, pickles, SQLite's files); each
member or decoded part is read again, nested up to `MAX_DEPTH` deep. The text a parser yields is matched
with records separated by U+001E; text payloads are read besides through the text views:
- the text views of `probes.matcher` (JSON, percent, HTML and quoted-printable escapes);
- base64 and base64url runs of at least `MIN_BASE64` characters (decoded at every alignment);
- containers embedded in other bytes (a gzip, bz2 or xz stream, a `FlateDecode` stream, inside a
  database page or a text);
- SQLite database files: besides their bytes, every text or blob value longer than a page's share is
  read through SQL too (a long value is split over overflow pages, with page pointers in between).

Each identifier is matched in one canonical form, with its own regexes and raw-byte triggers
(`probes.matcher`: the canonical form, the needles' patterns and the text views are described there).

Speed: each payload is parsed once per scan, for every needle of every subject in it. A large plain or
SQLite file is never decoded whole: one hyperscan pass over its bytes finds triggers (a fragment of an
identifier that survives every text encoding, a phone's digits with encoded separators, an escape run,
a base64 or UTF-16 run, a container's magic; and where the rule reads an identifier in which no fragment
of its own spelling need stand: a format character beside a letter, another script's digits, an id cut
anywhere, a name's letters with diacritics, an address's digests: `probes.char_triggers`), and only
windows around them are decoded. Documents and containers are parsed whole, within `MAX_MEMBER` and
`MAX_DECODED_PER_FILE`.

Default deny: nothing unread is certified. A file (or a member, or a stream) that is not positively
identified and read is listed as `Unscanned`, with its digest, size and reason (`unidentified-format`,
`image-not-read`, `encrypted-archive`, `encrypted-pdf`, `container-corrupt`, `container-too-large`,
`container-too-deep`, `database-unreadable`, ...). There is no entropy test and no "looks like text": a
base64 run or a magic found inside other bytes is a guess, read on when it decodes to something
identified, and matched as UTF-8 otherwise (the bytes around it were read). Files a store kind writes
in a format with no magic (Chroma's HNSW segment files) are identified by that kind's layout, checked
against their content (`probes.documents.layouts`). No path is reported (a path can spell a person).
"""

from __future__ import annotations

import codecs
import hashlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from probes.bytescan import _Walk
from probes.documents import layout_format
from probes.documents.formats import (
    SQLITE,
    SQLITE_FILES,
    binary_format,
    text_head_is_clean,
    wide_codec,
)
from probes.documents.layouts import PAGED
from probes.documents.layouts import forget as forget_layouts
from probes.matcher import Matcher, canonical
from probes.model import Unscanned
from probes.view_payloads import MAX_DEPTH, MAX_MEMBER, FileScan, read_payload, read_triggered
from probes.view_sqlite import read_freed_pages, read_sql_values

CHUNK = 16 << 20
OVERLAP = 8 << 10
MAX_WORKERS = 4


@dataclass
class ViewReport:
    """What the decoded views found: per needle index, its hits (counted in the views that found it first:
    a needle once found is not looked for again); and what they could not read."""

    found: dict[int, int] = field(default_factory=dict)
    unscanned: list[Unscanned] = field(default_factory=list)
    files: int = 0
    bytes_read: int = 0
    decoded: int = 0
    """Payloads decoded out of the files' bytes (members, streams, base64 runs) and read again."""
    reused: int = 0
    """Files whose content (by SHA-256) was already read in this scan or an earlier one of its `ViewCache`,
    and not read again (a blob and its replicas, a corpus copied to another folder)."""
    seconds: float = 0.0
    set_aside: dict[str, set[int]] = field(default_factory=dict)
    """Per label, the needles found in the files `scan_views` was told are someone else's content (another
    person's attachment): not residue, declared by that label (docs/matching.md 7.2)."""
    plain: set[int] = field(default_factory=set)
    """Needles of `found` found outside any base64 run's decodings."""
    encoded: dict[bytes, set[int]] = field(default_factory=dict)
    """Per base64 run, the needles found inside its decodings (`FileScan.encoded_in`; in `found` too): a
    payload pasted into a text that the erasing side cannot rewrite, residue unless the caller knows the
    run to be in another person's item (`probes.window_bytes`)."""

    def found_indexes(self) -> set[int]:
        """Indexes of the needles found in at least one view."""
        return set(self.found)


Key = tuple[str, str]
"""A needle as the views match it: (kind, text)."""


@dataclass(frozen=True)
class _Reading:
    """What reading one file's content gave: hits by needle, what was not read (reason, SHA-256, size),
    payloads decoded, and the needles it looked for (a `once` matcher skips those found before)."""

    hits: dict[Key, int]
    encoded: dict[bytes, frozenset[Key]]
    unscanned: list[tuple[str, str, int]]
    decoded: int
    looked_for: frozenset[Key]


class ViewCache:
    """File contents already read through the views, by SHA-256: a content read once in a window (one
    scan, or the scans of the store and the home's folders) is not read again. A reading is reused only
    by a scan with the same other people's identifiers (`shared` needles change what counts), and only
    when it looked for every needle that scan still looks for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._readings: dict[tuple[str, frozenset[Key]], Future[_Reading]] = {}

    def claim(self, key: tuple[str, frozenset[Key]], wanted: frozenset[Key]) -> _Reading | Future[_Reading]:
        """The reading of `key` if one looked for all of `wanted` (waiting for it if it is under way),
        else a new future the caller must complete."""
        while True:
            with self._lock:
                got = self._readings.get(key)
                if got is None or (
                    got.done() and (got.exception() is not None or not wanted <= got.result().looked_for)
                ):
                    mine: Future[_Reading] = Future()
                    self._readings[key] = mine
                    return mine
            try:
                reading = got.result()
            except BaseException:  # the reader failed (it reports that itself): read it here again
                continue
            if wanted <= reading.looked_for:
                return reading


def _read_file(scan: FileScan, path: str, size: int, data: bytes | None = None) -> int:
    """Read one file through the views; returns the bytes read. A file up to `CHUNK` is read whole as one
    payload (`data`: its bytes, already read). A larger one: SQLite's files and plain text are read in
    chunks, around their triggers (a text file whose later bytes stop decoding is declared); a container,
    document or image whole, up to `MAX_MEMBER`; anything else is declared (`unidentified-format`) and its
    chunks looked at all the same."""
    layout = layout_format(path, size)
    with open(path, "rb", buffering=0) as f:
        if size <= CHUNK or (layout is not None and layout not in PAGED):
            if data is None or (layout is not None and layout not in PAGED):
                data = f.read() if layout is None or layout in PAGED else b""
            read_payload(scan, data, 0, whole_file=True, layout=layout)
            if data.startswith(b"SQLite format 3\x00"):
                read_sql_values(scan, path)
                read_freed_pages(scan, path)
            return len(data)
        head = f.read(1 << 16)
        f.seek(0)
        kind = layout or binary_format(head)
        if kind in SQLITE_FILES or kind in PAGED:
            total = _chunks(scan, f, None, size)
            if kind == SQLITE:
                read_sql_values(scan, path)
                read_freed_pages(scan, path)
            return total
        if kind is not None:
            data = f.read(MAX_MEMBER + 1)
            if len(data) > MAX_MEMBER:
                scan.opaque("container-too-large", None, size)
                return len(data)
            read_payload(scan, data, 0, whole_file=True)
            return len(data)
        codec = wide_codec(head) or ("utf-8" if text_head_is_clean(head) else None)
        if codec is None:  # declared, and looked at all the same
            scan.opaque("unidentified-format", None, size)
        return _chunks(scan, f, codec, size)


def _chunks(scan: FileScan, f: BinaryIO, codec: str | None, size: int) -> int:
    """A large file read in chunks, windows around triggers matched. With `codec`, the file must decode
    as text in it to its end, or it is declared (`unidentified-format`)."""
    decoder = codecs.getincrementaldecoder(codec)() if codec else None
    total = 0
    tail = b""
    while chunk := f.read(CHUNK):
        if decoder is not None:
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                scan.opaque("unidentified-format", None, size)
                decoder = None
        buf = tail + chunk
        read_triggered(scan, buf, 0, match_windows=True)
        total += len(chunk)
        tail = buf[-OVERLAP:]
    if decoder is not None:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            scan.opaque("unidentified-format", None, size)
    return total


def scan_views(
    root: Path,
    needles: Sequence[tuple[str, str]],
    *,
    report_unscanned: bool = True,
    set_aside: Callable[[str], str | None] | None = None,
    cache: ViewCache | None = None,
) -> ViewReport:
    """Read every regular file under `root` through the decoded views for `needles` ((kind, text) per
    index: `identifier` or `content`; other kinds are not matched in views). Files nobody can read are
    left to the raw scan, which counts them. `report_unscanned` False: what no view reads is not
    listed (a folder of the engine's own ciphertexts). `set_aside(relative path)` gives a label for a
    file that is someone else's content: its finds go to `ViewReport.set_aside`, never to `found`.
    `cache`: file contents (up to `CHUNK`) already read in this window, by SHA-256, are not read again
    (without one, in this scan: a blob's replicas are read once)."""
    started = time.perf_counter()
    cache = ViewCache() if cache is None else cache
    forget_layouts()
    report = ViewReport()
    matcher = Matcher(needles, once=True)
    if matcher.empty:
        return report
    files = list(_Walk(Path(root)).files())  # what cannot be listed or read: the raw scan counts it
    labels = {rel: label for _p, rel, _s in files if set_aside and (label := set_aside(rel))}
    aside = Matcher(needles) if labels else matcher
    indexes: dict[Key, list[int]] = {}
    for i, key in enumerate(needles):
        indexes.setdefault(key, []).append(i)
    looked = frozenset(k for k in indexes if k[0].startswith("identifier") or k[0] == "content")
    shared = frozenset(k for k in indexes if k[0].startswith("shared"))

    def still_wanted(m: Matcher) -> frozenset[Key]:
        found = frozenset(m.found)
        return frozenset(k for k in looked if not all(i in found for i in indexes[k]))

    def read(entry: tuple[str, str, int]) -> tuple[_Reading, int, bool] | None:
        path, rel, size = entry
        # Someone else's file is read with a matcher of its own: a find there must not stop the search
        # for the same needle in the subject's files (`once`).
        m = aside if rel in labels else matcher
        data: bytes | None = None
        digest: str | None = None
        mine: Future[_Reading] | None = None
        try:
            if size <= CHUNK:
                with open(path, "rb", buffering=0) as f:
                    data = f.read()
                digest = hashlib.sha256(data).hexdigest()
                # A database is read through SQL with the WAL beside it, and a store kind's file by its
                # siblings: what they give depends on more than their content.
                if not data.startswith(b"SQLite format 3\x00") and layout_format(path, size) is None:
                    got = cache.claim((digest, shared), still_wanted(m))
                    if isinstance(got, _Reading):
                        m.found |= {i for k in got.hits for i in indexes.get(k, ())} if m.once else set()
                        return got, len(data), True
                    mine = got
            scan = FileScan(m, {}, [])
            n = _read_file(scan, path, size, data)
            hits = {needles[i]: h for i, h in scan.hits.items()}
            encoded = {run: frozenset(needles[i] for i in h) for run, h in scan.encoded.items()}
            if digest is None and report_unscanned and any(part is None for _r, part, _n in scan.unscanned):
                digest = _digest_file(path)
            reading = _Reading(
                hits=hits,
                encoded=encoded,
                unscanned=[
                    (reason, digest or "" if part is None else hashlib.sha256(part).hexdigest(), size_)
                    for reason, part, size_ in scan.unscanned
                ],
                decoded=scan.decoded,
                # A `once` matcher skipped the needles found before (here or by another thread): they
                # were looked for only if this reading found them.
                looked_for=still_wanted(m) | frozenset(hits) if m.once else looked,
            )
        except BaseException as exc:
            if mine is not None:
                mine.set_exception(exc)
            if isinstance(exc, OSError):
                return None  # the raw scan counts what cannot be read
            raise
        if mine is not None:
            mine.set_result(reading)
        return reading, n, False

    # Files are read by a few threads: hyperscan, hashing, decompression and file reads release the GIL.
    ordered = sorted(files, key=lambda e: -e[2])
    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, os.cpu_count() or 1)) as pool:
        done = list(pool.map(read, ordered))
    for (_path, rel, _size), got in zip(ordered, done, strict=True):
        if got is None:
            continue
        reading, n, reused = got
        report.bytes_read += n
        report.reused += reused
        report.decoded += 0 if reused else reading.decoded
        by_index = {i: h for key, h in reading.hits.items() for i in indexes.get(key, ())}
        by_run = {run: {i for key in keys for i in indexes.get(key, ())} for run, keys in reading.encoded.items()}
        if rel in labels:
            if by_index or by_run:
                report.set_aside.setdefault(labels[rel], set()).update(by_index, *by_run.values())
        else:
            report.plain |= by_index.keys()
            for index in {i for found_there in by_run.values() for i in found_there}:
                by_index[index] = by_index.get(index, 0) + 1
            for index, hits in by_index.items():
                report.found[index] = report.found.get(index, 0) + hits
            for run, found_there in by_run.items():
                report.encoded.setdefault(run, set()).update(found_there)
        report.files += 1
        if report_unscanned:
            report.unscanned += [
                Unscanned(sha256=digest, size=size, reason=reason, folder=_folder(rel))
                for reason, digest, size in reading.unscanned
            ]
    report.seconds = time.perf_counter() - started
    return report


def _digest_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _folder(rel: str) -> str:
    return rel.split("/", 1)[0] if "/" in rel else ""


__all__ = ["MAX_DEPTH", "Matcher", "Unscanned", "ViewCache", "ViewReport", "canonical", "scan_views"]
