"""The issue-33 oracle's scan: tests/oracle.py's walk and decoded views, plus the document readers of
`tests.oracle33.readers`, matched by the rule of `tests.oracle33.match`.

What it adds to tests/oracle.py's views (text decodings, unescapes, base64, gzip/zlib/zip/bz2/xz, SQLite
cells): every text view is also read as RTF, JSON records, HTML/XML and vCard/iCalendar where it is one;
every byte view as PDF (pdfminer.six and our own `TJ` joiner), DOCX, 7z, tar, zstd, lz4, brotli, EML,
images (OCR) and SQLite freed pages. Files it knows to carry a person without any reader being able to
show it (`known`: sha256 of the planted bytes -> person id, for a picture or an opaque file the test
wrote itself) are hits of kind `opaque` wherever those bytes are found whole.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from tests.oracle import HOME_EXCLUDE, MAX_DEPTH, MAX_FILE, Hit, Scan, Seen, _Scanner
from tests.oracle33.match import Matcher, Person33
from tests.oracle33.readers import byte_documents, text_documents
from tests.oracle_views import SQLITE_MAGIC


class DocScanner(_Scanner):
    """tests/oracle.py's scanner with the readers of issue 33 and its own matching rule."""

    def __init__(self, people: Iterable[Person33], known: Mapping[str, str] | None = None) -> None:
        super().__init__([])
        self.matcher = Matcher(people)
        self.known = dict(known or {})

    def match(self, text: str, where: str, view: str, out: list[Hit]) -> None:
        for who, kind, found in self.matcher.find(text):
            out.append(Hit(where, view, kind, found, who))

    def scan_text(self, text: str, where: str, view: str, depth: int, out: list[Hit], seen: Seen) -> None:
        super().scan_text(text, where, view, depth, out, seen)
        if depth >= MAX_DEPTH or not seen.first(("doc-t", hash(text), len(text)), depth):
            return
        for name, inner in text_documents(text, self.matcher.maybe):
            if isinstance(inner, str):
                self.scan_text(inner, where, f"{view}>{name}", depth + 1, out, seen)

    def scan_bytes(self, data: bytes, where: str, view: str, depth: int, out: list[Hit], seen: Seen) -> None:
        if self.known:
            who = self.known.get(hashlib.sha256(data).hexdigest())
            if who is not None:
                out.append(Hit(where, view or "file", "opaque", f"{len(data)} planted bytes", who))
        super().scan_bytes(data, where, view, depth, out, seen)
        if depth >= MAX_DEPTH or not seen.first(("doc-b", hash(data), len(data)), depth):
            return
        for name, inner in byte_documents(data):
            v = f"{view}>{name}" if view else name
            if isinstance(inner, str):
                self.scan_text(inner, where, v, depth + 1, out, seen)
            else:
                self.scan_bytes(inner, where, v, depth + 1, out, seen)


def scan_tree33(
    root: Path, people: Iterable[Person33], known: Mapping[str, str] | None = None, exclude: Iterable[str] = ()
) -> Scan:
    """Every occurrence of any of `people` in every file under `root` (symlinks not followed);
    top-level paths in `exclude` skipped."""
    skip = {Path(e) for e in exclude}
    scanner = DocScanner(people, known)
    scan = Scan()
    by_digest: dict[str, list[Hit]] = {}
    for dirpath, dirs, files in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        dirs[:] = sorted(d for d in dirs if rel_dir / d not in skip and not (Path(dirpath) / d).is_symlink())
        for name in sorted(files):
            p = Path(dirpath) / name
            rel = p.relative_to(root)
            if p.is_symlink() or not p.is_file() or rel in skip:
                continue
            try:
                data = p.read_bytes() if p.stat().st_size <= MAX_FILE else b""
            except OSError:
                data = b""
            digest = hashlib.sha256(data).hexdigest() if data and not data.startswith(SQLITE_MAGIC) else ""
            if digest in by_digest:  # the same bytes again (a blob's replica): the same hits, here
                scan.hits += [Hit(str(rel), h.view, h.kind, h.text, h.who) for h in by_digest[digest]]
                continue
            first = len(scan.hits)
            scanner.scan_file(p, str(rel), scan)
            if digest:
                by_digest[digest] = scan.hits[first:]
    return scan


def scan_home33(
    home_root: Path, evidence_root: Path | None, people: Iterable[Person33], known: Mapping[str, str] | None = None
) -> Scan:
    """The home (but the request vault and the keys: the controller's own duty records) and the
    evidence folder, as tests/oracle.py's `scan_home` reads them."""
    people = list(people)
    scan = scan_tree33(home_root, people, known, exclude=HOME_EXCLUDE)
    if evidence_root is not None and evidence_root.exists() and not evidence_root.is_relative_to(home_root):
        ev = scan_tree33(evidence_root, people, known)
        scan.hits += [Hit(f"evidence/{h.file}", h.view, h.kind, h.text, h.who) for h in ev.hits]
        scan.unread += [f"evidence/{u}" for u in ev.unread]
    return scan


def scan_bytes33(data: bytes, people: Iterable[Person33], known: Mapping[str, str] | None = None) -> Scan:
    """Every occurrence of any of `people` in `data` (one planted file, before it enters a store)."""
    scan = Scan()
    DocScanner(people, known).scan_bytes(data, "<bytes>", "", 0, scan.hits, Seen())
    return scan


def scan_text33(text: str, people: Iterable[Person33]) -> Scan:
    """Every occurrence of any of `people` in one text (a planted item's content)."""
    return scan_bytes33(text.encode("utf-8"), people)
