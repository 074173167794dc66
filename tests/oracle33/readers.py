"""The oracle's own readers of documents and containers (issue 33), with libraries other than the product's.

The product reads PDF with pypdf, HTML/XML with lxml and RTF with striprtf; here PDF is read with
pdfminer.six (and a content-stream reader of our own that joins `Tj`/`TJ` pieces), HTML/XML with
BeautifulSoup's `html.parser`, DOCX with python-docx and with zipfile + a regular expression (runs joined
per paragraph), RTF with the small un-escaper below, EML with the standard library's `email` (default
policy), zstd / lz4 / brotli / 7z / tar with their own libraries, images with the `tesseract` command
(when installed), JSON records as the values of one object joined, vCard/iCalendar unfolded, and SQLite
files' freed pages with their 4-byte page pointers removed, so that a value split across pages joins.
Every reader returns (view name, text or bytes); a reader that fails yields nothing.
"""

from __future__ import annotations

import contextlib
import email
import email.policy
import html
import io
import json
import logging
import re
import shutil
import subprocess
import tarfile
import tempfile
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import brotli
import lz4.frame
import zstandard

MAX_OUT = 64 * 1024 * 1024
"""At most this many bytes come out of one decompression."""
MAX_DOC = 8 * 1024 * 1024
"""Texts and files larger than this are not parsed as documents (their decoded views are still read)."""

View = tuple[str, str | bytes]

_TAG = re.compile(r"<[A-Za-z!?/][^<>]{0,2000}>")
_HEADER = re.compile(rb"\A(?:[A-Za-z][A-Za-z0-9-]{0,60}:[^\r\n]*\r?\n(?:[ \t][^\r\n]*\r?\n)*){2,}\r?\n")
_IMAGE_MAGIC = (b"BM", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"II*\x00", b"MM\x00*")
_KNOWN_MAGIC = (*_IMAGE_MAGIC, b"%PDF", b"PK\x03\x04", b"\x1f\x8b", b"7z\xbc\xaf\x27\x1c", b"\x28\xb5\x2f\xfd")

logging.getLogger("pdfminer").setLevel(logging.ERROR)


# --- text documents -------------------------------------------------------------------------------


def html_text(text: str) -> Iterator[View]:
    """HTML/XML text content, tags as separators, and each table row as one record."""
    from bs4 import BeautifulSoup
    from bs4.exceptions import ParserRejectedMarkup

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            soup = BeautifulSoup(text, "html.parser")
        except ParserRejectedMarkup:  # bytes that only look like markup (a decoding of random bytes):
            return  # the text itself is read by the other views
    yield "html-text", soup.get_text(" ")
    rows = [" ".join(c.get_text(" ") for c in tr.find_all(["td", "th"])) for tr in soup.find_all("tr")]
    if rows:
        yield "html-rows", "\n".join(rows)


_RTF_TOKEN = re.compile(r"\\'([0-9a-fA-F]{2})|\\u(-?\d+)\s?|\\([a-zA-Z]+)(-?\d+)? ?|\\([^a-zA-Z])|([{}])|([^\\{}]+)")
_RTF_SKIP = {"fonttbl", "colortbl", "stylesheet", "pict", "themedata", "datastore", "latentstyles", "rsidtbl"}


def rtf_text(rtf: str) -> str:
    """The text of an RTF document: `\\'hh` in its ANSI code page, `\\uN` (then skipping `\\ucN` fallback
    characters), `\\par`/`\\line` as new lines, `\\tab` as a tab, control words and skipped groups dropped."""
    codepage = "cp1252"
    out: list[str] = []
    stack: list[tuple[bool, int]] = []
    skip_group, uc, pending_skip = False, 1, 0
    for m in _RTF_TOKEN.finditer(rtf):
        hexb, uni, word, arg, sym, brace, plain = m.groups()
        if brace == "{":
            stack.append((skip_group, uc))
            continue
        if brace == "}":
            skip_group, uc = stack.pop() if stack else (False, 1)
            continue
        if pending_skip and (hexb or plain):
            if plain:
                n = min(pending_skip, len(plain))
                pending_skip -= n
                plain = plain[n:]
                if not plain:
                    continue
            else:
                pending_skip -= 1
                continue
        if skip_group:
            continue
        if word:
            if word in _RTF_SKIP:
                skip_group = True
            elif word == "ansicpg" and arg:
                codepage = f"cp{arg}"
            elif word == "uc" and arg:
                uc = int(arg)
            elif word in ("par", "line", "row", "sect", "page"):
                out.append("\n")
            elif word in ("tab", "cell"):
                out.append("\t")
        elif sym == "*":
            skip_group = True
        elif sym is not None:
            out.append({"~": "\u00a0", "-": "\u00ad", "_": "\u2011"}.get(sym, sym))
        elif hexb:
            try:
                out.append(bytes([int(hexb, 16)]).decode(codepage, "replace"))
            except LookupError:
                out.append(bytes([int(hexb, 16)]).decode("cp1252", "replace"))
        elif uni:
            out.append(chr(int(uni) % 65536))
            pending_skip = uc
        elif plain:
            out.append(plain.replace("\r", "").replace("\n", ""))
    return "".join(out)


def _json_records(obj: Any, out: list[str], depth: int = 0) -> None:
    if depth > 40:
        return
    if isinstance(obj, dict):
        out.append(" ".join(str(v) for v in obj.values() if isinstance(v, str | int | float)))
        for v in obj.values():
            _json_records(v, out, depth + 1)
    elif isinstance(obj, list):
        for v in obj:
            _json_records(v, out, depth + 1)
    elif isinstance(obj, str) and obj[:1] in "{[":
        with contextlib.suppress(ValueError):
            _json_records(json.loads(obj), out, depth + 1)


def json_records(text: str) -> Iterator[View]:
    """The values of each JSON object found in the text (the whole text, a line of JSON Lines, or an
    object pasted inside prose) joined: one record."""
    docs: list[Any] = []
    decoder = json.JSONDecoder()
    pos = 0
    for _ in range(1000):
        pos = min((p for p in (text.find("{", pos), text.find("[", pos)) if p >= 0), default=-1)
        if pos < 0:
            break
        try:
            obj, end = decoder.raw_decode(text, pos)
        except ValueError:
            pos += 1
            continue
        docs.append(obj)
        pos = end
    records: list[str] = []
    for d in docs:
        _json_records(d, records)
    if records:
        yield "json-records", "\n".join(records)


def text_documents(text: str, maybe: Callable[[str], bool] = lambda _: True) -> Iterator[View]:
    """Every document reading of a text view. `maybe`: a quick test of whether a text can name anyone
    (the markup is parsed only when its tags-as-spaces text passes it)."""
    if len(text) > MAX_DOC:
        return
    head = text.lstrip()[:16]
    if head.startswith("{\\rtf"):
        yield "rtf", rtf_text(text)
    if ("{" in text or "[" in text) and '"' in text:
        yield from json_records(text)
    if _TAG.search(text) and maybe(html.unescape(_TAG.sub(" ", text))):
        yield from html_text(text)
    if "BEGIN:VCARD" in text or "BEGIN:VCALENDAR" in text:
        yield "unfolded", re.sub(r"\r?\n[ \t]", "", text)


# --- byte documents -------------------------------------------------------------------------------


def _pdf_string(lit: bytes) -> bytes:
    out = bytearray()
    i = 0
    esc = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}
    while i < len(lit):
        c = lit[i : i + 1]
        if c == b"\\" and i + 1 < len(lit):
            n = lit[i + 1 : i + 2]
            octal = re.match(rb"[0-7]{1,3}", lit[i + 1 : i + 4])
            if octal:
                out.append(int(octal.group(0), 8) & 0xFF)
                i += 1 + len(octal.group(0))
                continue
            out += esc.get(n, n)
            i += 2
            continue
        out += c
        i += 1
    return bytes(out)


_PDF_SHOW = re.compile(rb"\[([^\[\]]{0,20000})\]\s*TJ|\(((?:\\.|[^\\)]){0,20000})\)\s*T[j']")
_PDF_PIECE = re.compile(rb"\(((?:\\.|[^\\)])*)\)|<([0-9A-Fa-f\s]*)>|(-?\d+(?:\.\d*)?|-?\.\d+)")
WORD_KERN = 150
"""A `TJ` number of -WORD_KERN or less (a gap of that many thousandths of an em) reads as a space."""


def pdf_shown_text(stream: bytes) -> Iterator[View]:
    """The strings a content stream shows (`Tj`, `'`, `TJ` arrays with their kerning numbers dropped),
    joined with nothing and with spaces, in Latin-1 (the standard fonts' encoding)."""
    pieces: list[bytes] = []
    for m in _PDF_SHOW.finditer(stream):
        if m.group(1) is not None:
            parts = []
            for p in _PDF_PIECE.finditer(m.group(1)):
                if p.group(1) is not None:
                    parts.append(_pdf_string(p.group(1)))
                elif p.group(2) is not None:
                    hexs = re.sub(rb"\s", b"", p.group(2)).decode()
                    parts.append(bytes.fromhex(hexs + "0" * (len(hexs) % 2)))
                elif float(p.group(3)) <= -WORD_KERN:
                    parts.append(b" ")  # a displacement as wide as a word space
            pieces.append(b"".join(parts))
        else:
            pieces.append(_pdf_string(m.group(2)))
    if pieces:
        yield "pdf-shown", b"".join(pieces).decode("latin-1")
        yield "pdf-shown-spaced", b" ".join(pieces).decode("latin-1")


def pdf_text(data: bytes) -> Iterator[View]:
    """pdfminer.six's text of a PDF file."""
    from pdfminer.high_level import extract_text

    try:
        yield "pdfminer", extract_text(io.BytesIO(data))
    except Exception:
        return


def docx_text(data: bytes) -> Iterator[View]:
    """OOXML: python-docx paragraphs and table rows (runs joined), and every XML member's text with
    `</w:p>` / `</a:p>` as new lines (zipfile + regular expression)."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        names = zf.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return
    if "word/document.xml" in names:
        try:
            import docx

            doc = docx.Document(io.BytesIO(data))
            lines = [p.text for p in doc.paragraphs]
            for t in doc.tables:
                for row in t.rows:
                    lines.append(" ".join(c.text for c in row.cells))
            yield "python-docx", "\n".join(lines)
        except Exception:
            pass
    for name in names:
        if not name.endswith(".xml") or zf.getinfo(name).file_size > MAX_DOC:
            continue
        xml = zf.read(name).decode("utf-8", "replace")
        xml = re.sub(r"</(?:w|a|text):p>|<w:br/>|<w:tab/>", "\n", xml)
        yield f"ooxml:{name}", html.unescape(re.sub(r"<[^>]*>", "", xml))


def eml_parts(data: bytes) -> Iterator[View]:
    """A MIME message by the standard library (default policy): every header decoded, every part's
    content (text as text, the rest as bytes), attachments' file names."""
    msg = email.message_from_bytes(data, policy=email.policy.default)
    if not isinstance(msg, EmailMessage) or not msg.keys():
        return
    yield "eml-headers", "\n".join(f"{k}: {v}" for k, v in msg.items())
    for part in msg.walk():
        if part.is_multipart():
            continue
        try:
            content = part.get_content()
        except (LookupError, ValueError, AssertionError, KeyError):
            content = part.get_payload(decode=True)
        if isinstance(content, (str, bytes)):
            yield "eml-part", content
        elif isinstance(content, EmailMessage):
            yield "eml-message", content.as_bytes()
        fname = part.get_filename()
        if fname:
            yield "eml-filename", fname


def _zstd(data: bytes) -> bytes:
    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as r:
        return r.read(MAX_OUT)


def sevenzip_members(data: bytes) -> Iterator[View]:
    import py7zr

    with tempfile.TemporaryDirectory(prefix="oracle33-7z-") as tmp:
        try:
            with py7zr.SevenZipFile(io.BytesIO(data), "r") as z:
                z.extractall(path=tmp)
        except Exception:
            return
        for p in sorted(Path(tmp).rglob("*")):
            if p.is_file() and not p.is_symlink():
                yield f"7z:{p.name}", p.read_bytes()
                yield f"7z-name:{p.name}", p.name


def tar_members(data: bytes) -> Iterator[View]:
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
            for m in tf.getmembers():
                yield f"tar-name:{m.name}", m.name
                f = tf.extractfile(m) if m.isfile() else None
                if f is not None:
                    yield f"tar:{m.name}", f.read(MAX_OUT)
    except (tarfile.TarError, OSError, ValueError):
        return


def image_text(data: bytes) -> Iterator[View]:
    """OCR by the `tesseract` command (not the product's pytesseract), when it is installed."""
    exe = shutil.which("tesseract")
    if exe is None:
        return
    with tempfile.TemporaryDirectory(prefix="oracle33-ocr-") as tmp:
        img = Path(tmp) / "image"
        img.write_bytes(data)
        try:
            res = subprocess.run([exe, str(img), "stdout"], capture_output=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return
        if res.returncode == 0:
            yield "ocr", res.stdout.decode("utf-8", "replace")


def sqlite_freed(data: bytes) -> bytes | None:
    """The freed pages of a SQLite file (freelist trunks and leaves), each without its first 4 bytes (a
    stale overflow pointer or the trunk's link), joined along their stale overflow pointers: a value
    that was split across overflow pages reads whole again."""
    if len(data) < 100 or not data.startswith(b"SQLite format 3\x00"):
        return None
    ps = int.from_bytes(data[16:18], "big")
    ps = 65536 if ps == 1 else ps
    if ps < 512:
        return None
    npages = len(data) // ps

    def page(n: int) -> bytes:
        return data[(n - 1) * ps : n * ps]

    freed: list[int] = []
    trunk, seen = int.from_bytes(data[32:36], "big"), set()
    while 0 < trunk <= npages and trunk not in seen:
        seen.add(trunk)
        tp = page(trunk)
        count = min(int.from_bytes(tp[4:8], "big"), (ps - 8) // 4)
        freed.append(trunk)
        freed += [n for k in range(count) if 0 < (n := int.from_bytes(tp[8 + 4 * k : 12 + 4 * k], "big")) <= npages]
        trunk = int.from_bytes(tp[0:4], "big")
    if not freed:
        return None
    fset = set(freed)
    nxt = {n: int.from_bytes(page(n)[0:4], "big") for n in fset}
    pointed = {v for v in nxt.values() if v in fset}
    used: set[int] = set()
    chains: list[bytes] = []
    for start in sorted(fset - pointed) + sorted(fset):
        n, chain = start, []
        while n in fset and n not in used:
            used.add(n)
            chain.append(page(n)[4:])
            n = nxt[n]
        if chain:
            chains.append(b"".join(chain))
    return b"\n".join(chains)


def png_text_chunks(data: bytes) -> Iterator[View]:
    """The text a PNG keeps beside its pixels, read chunk by chunk here (stdlib only; the product reads
    them with its own code): tEXt (latin-1), zTXt (latin-1, zlib), iTXt (UTF-8, zlib when flagged)."""
    pos = 8
    while pos + 8 <= len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        key, _, rest = body.partition(b"\0")
        try:
            if kind == b"tEXt":
                yield f"png-text:{key.decode('latin-1')}", rest.decode("latin-1")
            elif kind == b"zTXt":
                yield f"png-ztext:{key.decode('latin-1')}", zlib.decompress(rest[1:]).decode("latin-1")
            elif kind == b"iTXt":
                flag, text = rest[:1], rest[2:].split(b"\0", 2)[-1]  # language and translated keyword
                out = zlib.decompress(text) if flag == b"\x01" else text
                yield f"png-itext:{key.decode('latin-1')}", out.decode("utf-8", "replace")
        except (zlib.error, IndexError):
            continue


def byte_documents(data: bytes) -> Iterator[View]:
    """Every document and container reading of a byte view (found by content, never by name)."""
    if len(data) > MAX_OUT:
        return
    head = data[:1024]
    if b"%PDF-" in head:
        yield from pdf_text(data)
    if b"BT" in data and (b"Tj" in data or b"TJ" in data):
        yield from pdf_shown_text(data)
    if data.startswith(b"PK\x03\x04"):
        yield from docx_text(data)
    if data.startswith(b"7z\xbc\xaf\x27\x1c"):
        yield from sevenzip_members(data)
    if data[257:262] == b"ustar":
        yield from tar_members(data)
    if data.startswith(_IMAGE_MAGIC):
        yield from image_text(data)
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        yield from png_text_chunks(data)
    for m in re.finditer(rb"\x28\xb5\x2f\xfd", data):
        try:
            out = _zstd(data[m.start() :])
        except zstandard.ZstdError:
            continue
        if out:
            yield f"zstd@{m.start()}", out
    for m in re.finditer(rb"\x04\x22\x4d\x18", data):
        try:
            out = lz4.frame.decompress(data[m.start() :])
        except RuntimeError:
            continue
        if out:
            yield f"lz4@{m.start()}", out[:MAX_OUT]
    if 4 <= len(data) <= MAX_DOC and not data.startswith((*_KNOWN_MAGIC, b"SQLite format 3\x00")):
        try:  # brotli has no magic number: every unidentified byte view is tried
            out = brotli.decompress(data)
        except brotli.error:
            out = b""
        if out:
            yield "brotli", out[:MAX_OUT]
    if _HEADER.match(data):
        yield from eml_parts(data)
    freed = sqlite_freed(data)
    if freed:
        yield "sqlite-freed-pages", freed
