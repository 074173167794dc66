"""The red team's oracle's decoded views (`tests.oracle`): text decodings, text unescapes, base64 runs,
compressed containers found anywhere in the bytes, and SQLite cell values read on a copy. Standard
library only; nothing of the product."""

from __future__ import annotations

import base64
import binascii
import bz2
import html
import io
import lzma
import quopri
import re
import shutil
import sqlite3
import tempfile
import urllib.parse
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

MAX_STREAM = 64 * 1024 * 1024
"""At most this many bytes are inflated from one compressed stream."""
MIN_B64 = 12
"""Shortest base64 run that is decoded (9 bytes: shorter than any identifier we plant)."""


# --- views ----------------------------------------------------------------------------------------

_JSON_ESC = re.compile(r"\\u([0-9a-fA-F]{4})|\\([\\/\"bfnrt'])")
_JSON_SIMPLE = {"\\": "\\", "/": "/", '"': '"', "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "'": "'"}
_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")
_HTML = re.compile(r"&(#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]{1,31});?")
_QP = re.compile(r"=(?:[0-9A-F]{2}|\r?\n)")
B64_RUN = re.compile(r"[A-Za-z0-9+/_\-]{" + str(MIN_B64) + r",}={0,2}")


def json_unescape(text: str) -> str:
    """JSON string escapes: `\\uXXXX` (surrogate pairs joined), `\\/`, `\\"`, `\\\\`, `\\n`, ..."""

    def one(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return chr(int(m.group(1), 16))
        return _JSON_SIMPLE[m.group(2)]

    out = _JSON_ESC.sub(one, text)
    # join surrogate pairs (and drop lone ones' damage by encoding with surrogatepass)
    if any("\ud800" <= c <= "\udfff" for c in out):
        out = out.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return out


def percent_unescape(text: str) -> str:
    return urllib.parse.unquote(text, errors="replace")


def form_unescape(text: str) -> str:
    """application/x-www-form-urlencoded: `+` is a space, inside a whitespace-free piece that carries a
    percent escape (a URL query, a form body); a `+` in any other piece of the text stays a plus."""
    pieces = re.split(r"(\s+)", text)
    return "".join(
        urllib.parse.unquote_plus(p, errors="replace") if _PERCENT.search(p) else urllib.parse.unquote(p)
        for p in pieces
    )


def qp_unescape(text: str) -> str:
    return quopri.decodestring(text.encode("utf-8", "surrogateescape")).decode("utf-8", "replace")


UNESCAPES: tuple[tuple[str, Callable[[str], bool], Callable[[str], str]], ...] = (
    ("json", lambda t: "\\u" in t or "\\/" in t or "\\n" in t or "\\t" in t or '\\"' in t, json_unescape),
    ("percent", lambda t: _PERCENT.search(t) is not None, percent_unescape),
    ("form", lambda t: "+" in t and _PERCENT.search(t) is not None, form_unescape),
    ("html", lambda t: _HTML.search(t) is not None, html.unescape),
    ("qp", lambda t: _QP.search(t) is not None, qp_unescape),
)


def b64_candidates(run: str) -> Iterator[bytes]:
    """Every decoding of a base64 / base64url run at each of the four alignments."""
    s = run.rstrip("=").translate(str.maketrans("-_", "+/"))
    seen: set[bytes] = set()
    for k in range(4):
        part = s[k:]
        if len(part) % 4 == 1:
            part = part[:-1]
        if len(part) < 8:
            continue
        try:
            raw = base64.b64decode(part + "=" * (-len(part) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        if raw not in seen:
            seen.add(raw)
            yield raw


_TEXTY = re.compile(
    "[\t\n\r\x20-\x7e\u00a0-\u052f\u1e00-\u1fff\u2000-\u206f\u2100-\u214f\u2212\ufe00-\ufe6f\uff00-\uffef]{3,}"
)


def texty(text: str) -> str:
    """The runs of `text` made of characters that can spell an identifier (Latin, Greek, Cyrillic,
    punctuation, dashes, spaces, format characters, full-width forms), one per line: what a UTF-16/32
    decoding of bytes that are not UTF-16/32 turns into (CJK and other noise) is left out."""
    return "\n".join(m.group(0) for m in _TEXTY.finditer(text))


def text_decodings(data: bytes) -> Iterator[tuple[str, str]]:
    """(name, text) for each text decoding worth reading."""
    yield "utf-8", data.decode("utf-8", "replace")
    if not data.isascii():
        yield "latin-1", data.decode("latin-1")
    if b"\x00" in data:
        yield "nul-stripped", data.replace(b"\x00", b"").decode("utf-8", "replace")
        for enc in ("utf-16-le", "utf-16-be"):
            for off in (0, 1):
                yield f"{enc}@{off}", texty(data[off : len(data) - ((len(data) - off) % 2)].decode(enc, "replace"))
        if b"\x00\x00" in data:
            for enc in ("utf-32-le", "utf-32-be"):
                for off in range(4):
                    chunk = data[off:]
                    chunk = chunk[: len(chunk) - len(chunk) % 4]
                    yield f"{enc}@{off}", texty(chunk.decode(enc, "replace"))


def _inflate(data: bytes, wbits: int) -> bytes | None:
    d = zlib.decompressobj(wbits)
    try:
        out = d.decompress(data, MAX_STREAM)
    except zlib.error:
        return None
    return out or None


def containers(data: bytes) -> Iterator[tuple[str, bytes]]:
    """(name, decoded bytes) of every compressed container found anywhere in `data`."""
    for m in re.finditer(rb"\x1f\x8b\x08", data):
        out = _inflate(data[m.start() :], 31)
        if out:
            yield f"gzip@{m.start()}", out
    for m in re.finditer(rb"\x78[\x01\x5e\x9c\xda]", data):
        out = _inflate(data[m.start() :], 15)
        if out:
            yield f"zlib@{m.start()}", out
    for m in re.finditer(rb"stream\r?\n", data):
        out = _inflate(data[m.end() :], -15)
        if out:
            yield f"pdf-deflate@{m.end()}", out
    for m in re.finditer(rb"PK\x03\x04", data):
        start = m.start()
        if len(data) < start + 30:
            continue
        method = int.from_bytes(data[start + 8 : start + 10], "little")
        nlen = int.from_bytes(data[start + 26 : start + 28], "little")
        xlen = int.from_bytes(data[start + 28 : start + 30], "little")
        body = start + 30 + nlen + xlen
        if method == 8:
            out = _inflate(data[body:], -15)
            if out:
                yield f"zip-member@{start}", out
        elif method == 12:
            try:
                out = bz2.BZ2Decompressor().decompress(data[body:], MAX_STREAM)
            except (OSError, ValueError, EOFError):
                out = None
            if out:
                yield f"zip-bz2@{start}", out
        # method 14 (LZMA) and the rest: read through zipfile below
    if b"PK\x05\x06" in data:
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                for info in zf.infolist():
                    if info.file_size <= MAX_STREAM:
                        yield f"zip:{info.filename}", zf.read(info)
                        yield f"zip-name:{info.filename}", info.filename.encode("utf-8")
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError, RuntimeError):
            pass
    for m in re.finditer(rb"BZh[1-9]1AY&SY", data):
        try:
            out = bz2.BZ2Decompressor().decompress(data[m.start() :], MAX_STREAM)
        except (OSError, ValueError, EOFError):
            continue
        if out:
            yield f"bz2@{m.start()}", out
    for m in re.finditer(rb"\xfd7zXZ\x00", data):
        try:
            out = lzma.LZMADecompressor().decompress(data[m.start() :], MAX_STREAM)
        except (lzma.LZMAError, EOFError):
            continue
        if out:
            yield f"xz@{m.start()}", out


# --- SQLite files -----------------------------------------------------------------------------------

SQLITE_MAGIC = b"SQLite format 3\x00"


def sqlite_values(path: Path) -> Iterator[tuple[str, str | bytes]]:
    """Every cell value of every table of the database at `path`, read on a copy (with its -wal, so
    that committed pages not yet checkpointed are seen), never touching the original."""
    with tempfile.TemporaryDirectory(prefix="oracle-sqlite-") as tmp:
        copy = Path(tmp) / "db.sqlite"
        shutil.copyfile(path, copy)
        wal = path.with_name(path.name + "-wal")
        if wal.exists():
            shutil.copyfile(wal, Path(tmp) / "db.sqlite-wal")
        try:
            conn = sqlite3.connect(str(copy))
        except sqlite3.Error:
            return
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        except sqlite3.Error:
            conn.close()
            return
        try:
            for t in tables:
                try:
                    rows = conn.execute(f'SELECT * FROM "{t}"').fetchall()
                except sqlite3.Error:
                    continue  # a virtual table whose module is not loaded: its shadow tables are read
                for row in rows:
                    for v in row:
                        if isinstance(v, str | bytes) and v:
                            yield f"sqlite:{t}", v
        finally:
            conn.close()
