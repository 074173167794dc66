"""The red team's oracle: every occurrence of a person in every decoded view of every byte of a folder.

Written apart from the product on purpose (it imports nothing of `probes/`, `tasks/`, `erasure/`): a
second reader with its own blind spots, so that the product's byte scan and this one do not share them.
Simple rather than fast; standard library only.

How a folder is read:

- every file under the root (symlinks not followed), as bytes, through views that nest to
  `MAX_DEPTH` levels: text decodings (UTF-8, Latin-1, UTF-16 LE/BE and UTF-32 LE/BE at every
  alignment, NUL bytes dropped), text unescapes (JSON string escapes incl. surrogate pairs and `\\/`,
  percent-encoding, HTML entities, quoted-printable incl. soft line breaks), base64 and base64url
  runs (standard and url alphabets, every alignment), compressed containers found anywhere in the
  bytes (gzip members, zlib streams incl. PDF FlateDecode, raw deflate after a zip local header or a
  PDF `stream` keyword, zip members, bz2, xz), and SQLite database files opened read-only on a copy
  (with their `-wal`) so that every cell value is read too (text, and blobs as bytes: LangGraph's
  msgpack / JSON checkpoints, mem0's pickled Qdrant points, ...);
- each text view is compared in canonical form: NFKC, format characters removed (soft hyphen,
  zero-width, BOM, ...), every dash one hyphen, every run of white space one space, case folded
  (ß -> ss), and twice: diacritics stripped (Müller -> muller) and German transliteration
  (Müller -> mueller);
- a person is matched as: their id (its letter/digit groups, any separators); their email (any
  `+tag`); their name (tokens in any order, any separators: "Doe, Jane", "Jane\\tDoe", "jane.doe",
  "ticket-jane-doe-0042"); their phone as its digits with any separators, with `+CC`, `00CC`, `CC`
  or the national trunk `0`, and an optional `(0)`.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.oracle_person import Patterns, Person, canonical_forms
from tests.oracle_views import (
    B64_RUN,
    SQLITE_MAGIC,
    UNESCAPES,
    b64_candidates,
    containers,
    sqlite_values,
    text_decodings,
)

MAX_DEPTH = 4
"""Views nest this deep (a base64 run in a JSON string in a gzip member in a zip: 4)."""
MAX_FILE = 512 * 1024 * 1024
"""A file larger than this is not read (reported as `unread`)."""
JUNK_RUN = 5
"""A text view is read in pieces cut at runs of this many control or undecodable characters (see
`segments`)."""


# --- the scan -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    """One occurrence: the file (relative to the scanned root), the chain of views, the kind of
    identifier and the canonical text that matched."""

    file: str
    view: str
    kind: str
    text: str
    who: str = ""
    """The id of the person whose identifier matched."""

    def __str__(self) -> str:
        return f"{self.file} [{self.view}] {self.kind}: {self.text!r}"


@dataclass
class Scan:
    """What a scan found, and what it could not read."""

    hits: list[Hit] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)

    def files(self) -> set[str]:
        return {h.file for h in self.hits}

    def kinds(self) -> set[str]:
        return {h.kind for h in self.hits}

    def of(self, person_id: str) -> Scan:
        """Only the hits of one person."""
        return Scan([h for h in self.hits if h.who == person_id], list(self.unread))

    def __bool__(self) -> bool:
        return bool(self.hits)

    def summary(self, limit: int = 20) -> str:
        seen: dict[tuple[str, str, str], Hit] = {}
        for h in self.hits:
            seen.setdefault((h.file, h.kind, h.text), h)
        lines = [str(h) for h in list(seen.values())[:limit]]
        more = len(seen) - len(lines)
        return "\n".join(lines + ([f"... and {more} more"] if more > 0 else []))


_WINDOW = 400
"""Characters on each side of an anchor that a pattern is run on (longer than any match)."""
_PHONE_RUN = re.compile(r"[0-9+][0-9\s\-./()\[\]+]*[0-9]")
_NON_DIGITS = re.compile(r"\D+")


class Seen:
    """Views already read, with the shallowest depth each was read at: a view read again deeper is
    skipped (the shallower reading nested at least as far); read again shallower, it is read again."""

    def __init__(self) -> None:
        self.depth: dict[tuple[str, int, int], int] = {}

    def first(self, key: tuple[str, int, int], depth: int) -> bool:
        old = self.depth.get(key)
        if old is not None and old <= depth:
            return False
        self.depth[key] = depth
        return True


_MAGICS = (
    b"\x1f\x8b\x08",
    b"\x78\x9c",
    b"\x78\xda",
    b"\x78\x01",
    b"\x78\x5e",
    b"PK\x03\x04",
    b"BZh",
    b"\xfd7zXZ\x00",
    b"stream",
    SQLITE_MAGIC,
)


_MAGIC_ANYWHERE = re.compile(b"|".join(re.escape(m) for m in _MAGICS))


def plausible(raw: bytes) -> bool:
    """Decoded base64 worth reading further: text (valid UTF-8), UTF-16/32 (NUL bytes), or a container.
    (Random letters that happen to form a base64 run decode to bytes that are none of these.)"""
    if b"\x00" in raw or _MAGIC_ANYWHERE.search(raw):
        return True
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@functools.lru_cache(maxsize=65536)
def plausible_decodings(run: str) -> tuple[bytes, ...]:
    """The decodings of a base64 run worth reading further. Kept per run: one text's unescaped views
    repeat most of its runs (a pack's hex digests in every JSON/QP reading of it)."""
    return tuple(raw for raw in b64_candidates(run) if plausible(raw))


_JUNK_RUN = re.compile(f"[\x00-\x08\x0e-\x1f\x7f\ufffd]{{{JUNK_RUN}}}")


def segments(text: str) -> Iterator[str]:
    """`text` cut at every run of JUNK_RUN or more control or undecodable characters. No match can
    hold such a run (an id's or a name's separators are at most 4 characters, a phone's at most 3, an
    email has none, its `+tag` taken to hold none either), so nothing a pass over the whole text finds
    is lost; each piece is unescaped and decoded on its own, so a view tree grows only where escapes
    are, not over the whole file."""
    start = 0
    for m in _JUNK_RUN.finditer(text):
        if m.start() > start:
            yield text[start : m.start()]
        start = m.end()
    if start < len(text):
        yield text[start:]


class _Scanner:
    def __init__(self, people: Iterable[Person]) -> None:
        self.patterns = [(p.id, Patterns.of(p)) for p in people]

    def match(self, text: str, where: str, view: str, out: list[Hit]) -> None:
        """Every match of every person's patterns in every canonical form of `text`. A pattern runs
        only on windows around an occurrence of a piece every one of its matches contains (the longest
        piece of each alternative; phones: a run of digits and separators holding the national
        number), which finds exactly what a pass over the whole text finds: matches are far shorter
        than the window."""
        for form in canonical_forms(text):
            seen: set[tuple[str, str, int]] = set()
            phone_runs = None
            for who, pat in self.patterns:
                for kind, rx in pat.by_kind.items():
                    if kind == "phone":
                        if phone_runs is None:
                            phone_runs = [
                                (m.start(), m.end(), _NON_DIGITS.sub("", m.group(0))) for m in _PHONE_RUN.finditer(form)
                            ]
                        anchors = [(a, b) for a, b, d in phone_runs if pat.nsn and pat.nsn in d]
                    else:
                        anchors = []
                        for alt in pat.needs.get(kind, []):
                            if not alt or not all(piece in form for piece in alt):
                                continue
                            key = max(alt, key=len)
                            pos = form.find(key)
                            while pos >= 0:
                                anchors.append((pos, pos + len(key)))
                                pos = form.find(key, pos + 1)
                    for a, b in anchors:
                        lo = max(0, a - _WINDOW)
                        for m in rx.finditer(form, lo, min(len(form), b + _WINDOW)):
                            k = (who, kind, m.start())
                            if k not in seen:
                                seen.add(k)
                                out.append(Hit(where, view, kind, m.group(0), who))

    def scan_text(self, text: str, where: str, view: str, depth: int, out: list[Hit], seen: Seen) -> None:
        if not seen.first(("t", hash(text), len(text)), depth):
            return
        self.match(text, where, view, out)
        if depth >= MAX_DEPTH:
            return
        for name, applies, fn in UNESCAPES:
            if applies(text):
                try:
                    t2 = fn(text)
                except (ValueError, UnicodeError):
                    continue
                if t2 != text:
                    self.scan_text(t2, where, f"{view}>{name}", depth + 1, out, seen)
                    if "\x00" in t2 and "\x00" not in text:  # escapes that spell bytes (escaped UTF-16)
                        self.scan_bytes(
                            t2.encode("latin-1", "ignore"), where, f"{view}>{name}>as-bytes", depth + 1, out, seen
                        )
        for m in B64_RUN.finditer(text):
            for raw in plausible_decodings(m.group(0)):
                self.scan_bytes(raw, where, f"{view}>base64", depth + 1, out, seen)

    def scan_bytes(self, data: bytes, where: str, view: str, depth: int, out: list[Hit], seen: Seen) -> None:
        if not seen.first(("b", hash(data), len(data)), depth):
            return
        for name, text in text_decodings(data):
            for piece in segments(text):
                self.scan_text(piece, where, f"{view}>{name}" if view else name, depth, out, seen)
        if depth >= MAX_DEPTH:
            return
        for name, inner in containers(data):
            self.scan_bytes(inner, where, f"{view}>{name}" if view else name, depth + 1, out, seen)

    def scan_file(self, path: Path, where: str, scan: Scan) -> None:
        try:
            size = path.stat().st_size
            if size > MAX_FILE:
                scan.unread.append(where)
                return
            data = path.read_bytes()
        except OSError:
            scan.unread.append(where)
            return
        seen = Seen()
        self.scan_bytes(data, where, "", 0, scan.hits, seen)
        if data.startswith(SQLITE_MAGIC):
            for table, value in sqlite_values(path):
                if isinstance(value, str):
                    self.scan_text(value, where, table, 1, scan.hits, seen)
                else:
                    self.scan_bytes(value, where, table, 1, scan.hits, seen)


def scan_bytes(data: bytes, *people: object) -> Scan:
    """Every occurrence of any of `people` in `data` (named `<bytes>`)."""
    scan = Scan()
    _Scanner([Person.of(p) for p in people]).scan_bytes(data, "<bytes>", "", 0, scan.hits, Seen())
    return scan


def scan_text(text: str, *people: object) -> Scan:
    return scan_bytes(text.encode("utf-8"), *people)


def scan_tree(root: Path | str, *people: object, exclude: Iterable[str] = ()) -> Scan:
    """Every occurrence of any of `people` in every file under `root`; top-level folders named in
    `exclude` (relative paths) are skipped."""
    root = Path(root)
    skip = {Path(e) for e in exclude}
    scanner = _Scanner([Person.of(p) for p in people])
    scan = Scan()
    for dirpath, dirs, files in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        dirs[:] = sorted(d for d in dirs if rel_dir / d not in skip and not (Path(dirpath) / d).is_symlink())
        for name in sorted(files):
            p = Path(dirpath) / name
            if p.is_symlink() or not p.is_file():
                continue
            rel = str(p.relative_to(root))
            if Path(rel) in skip:
                continue
            scanner.scan_file(p, rel, scan)
    return scan


HOME_EXCLUDE = ("engine", "keys")
"""What "all clear" allows to keep the subject: the request vault (engine/) and the keys."""


def scan_home(home_root: Path, evidence_root: Path | None, *people: object) -> Scan:
    """The home (but the vault and the keys) and the evidence folder."""
    scan = scan_tree(home_root, *people, exclude=HOME_EXCLUDE)
    if evidence_root is not None and evidence_root.exists() and not evidence_root.is_relative_to(home_root):
        ev = scan_tree(evidence_root, *people)
        scan.hits += [Hit(f"evidence/{h.file}", h.view, h.kind, h.text, h.who) for h in ev.hits]
        scan.unread += [f"evidence/{u}" for u in ev.unread]
    return scan
