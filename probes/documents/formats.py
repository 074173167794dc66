"""What a payload is, by its bytes alone (never a file name): explicit magic checks first, then
clean decoding as text (UTF-8, or UTF-16/32 by a byte order mark or by the pattern of NULs), then the
text's own structure (markup, mail, vCard, iCalendar, JSON, RTF). `puremagic` names what the explicit
checks leave (an image format without its own check, or a format no reader here reads, for the reason
it is declared with).

A result of None means: not positively identified. The caller declares such a payload
(`unidentified-format`), never reads it as text by guess.
"""

from __future__ import annotations

import codecs
import json
import re
import struct

import puremagic

# Formats (the labels `probes.documents.read` dispatches on).
EMPTY = "empty"
TEXT = "text"
HTML = "html"
XML = "xml"
JSON = "json"
RTF = "rtf"
EMAIL = "email"
VCARD = "vcard"
GZIP, ZLIB, BZ2, XZ, ZSTD, LZ4 = "gzip", "zlib", "bz2", "xz", "zstd", "lz4"
ZIP, TAR, SEVENZ = "zip", "tar", "7z"
PDF = "pdf"
IMAGE = "image"
PICKLE = "pickle"
SQLITE, SQLITE_WAL, SQLITE_JOURNAL, SQLITE_SHM = "sqlite", "sqlite-wal", "sqlite-journal", "sqlite-shm"

COMPRESSORS = frozenset({GZIP, ZLIB, BZ2, XZ, ZSTD, LZ4})
ARCHIVES = frozenset({ZIP, TAR, SEVENZ})
TEXT_FORMATS = frozenset({TEXT, HTML, XML, JSON, RTF, EMAIL, VCARD})
SQLITE_FILES = frozenset({SQLITE, SQLITE_WAL, SQLITE_JOURNAL, SQLITE_SHM})

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"SQLite format 3\x00", SQLITE),
    (b"\x37\x7f\x06\x82", SQLITE_WAL),
    (b"\x37\x7f\x06\x83", SQLITE_WAL),
    (b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7", SQLITE_JOURNAL),
    (b"\xfd7zXZ\x00", XZ),
    (b"\x28\xb5\x2f\xfd", ZSTD),
    (b"\x04\x22\x4d\x18", LZ4),
    (b"7z\xbc\xaf\x27\x1c", SEVENZ),
    (b"PK\x03\x04", ZIP),
    (b"PK\x05\x06", ZIP),
    (b"%PDF-", PDF),
    (b"\x89PNG\r\n\x1a\n", IMAGE),
    (b"\xff\xd8\xff", IMAGE),
    (b"GIF87a", IMAGE),
    (b"GIF89a", IMAGE),
    (b"II*\x00", IMAGE),
    (b"MM\x00*", IMAGE),
    (b"{\\rtf", RTF),
)
_SHM_VERSION = struct.pack("<I", 3007000)
"""A `-shm` file (SQLite's WAL index) begins with the WAL-index version 3007000 in native byte order
(little-endian on the machines this runs on), twice: in the header and in its copy."""

_IMAGE_MIME = re.compile(r"^image/")


def _image(data: bytes) -> bool:
    """BMP and WebP by their own checks (a BMP's header sizes agree with the file), other image formats by
    puremagic's MIME type."""
    if data[:2] == b"BM" and len(data) >= 26:
        size, _r, offset, header = struct.unpack_from("<IIII", data, 2)
        return offset < len(data) and header in (12, 40, 52, 56, 64, 108, 124) and size in (0, len(data))
    return data[:4] == b"RIFF" and data[8:12] == b"WEBP"


def _gzip(data: bytes) -> bool:
    return len(data) >= 10 and data[:3] == b"\x1f\x8b\x08" and not data[3] & 0xE0


def _zlib(data: bytes) -> bool:
    return len(data) > 2 and data[0] & 0x0F == 8 and data[0] >> 4 <= 7 and (data[0] << 8 | data[1]) % 31 == 0


def _tar(data: bytes) -> bool:
    return len(data) >= 512 and data[257:262] == b"ustar"


def _bz2(data: bytes) -> bool:
    return data[:3] == b"BZh" and data[3:4] in b"123456789" and data[4:10] in (b"1AY&SY", b"\x17rE8P\x90")


def _pickle(data: bytes) -> bool:
    """A pickle of protocol 2 or later: PROTO, then (protocol 4 and 5) a FRAME, ending in STOP."""
    return len(data) >= 3 and data[0] == 0x80 and 2 <= data[1] <= 5 and data.rstrip(b"\x00")[-1:] == b"."


def _shm(data: bytes) -> bool:
    return len(data) >= 136 and data[:4] == _SHM_VERSION and data[48:52] == _SHM_VERSION


_BY_FIRST_BYTE: dict[int, list[tuple[bytes, str]]] = {}
for _magic, _fmt in _MAGIC:
    _BY_FIRST_BYTE.setdefault(_magic[0], []).append((_magic, _fmt))
"""`_MAGIC` by first byte, in its order: a payload is checked against the magics that begin as it does
(base64-looking runs of a store, each tried at four alignments, are checked a few hundred thousand times)."""


def binary_format(data: bytes) -> str | None:
    """The format of `data` by explicit magic (containers, documents, images, SQLite files, pickles)."""
    for magic, fmt in _BY_FIRST_BYTE.get(data[0], ()) if data else ():
        if data.startswith(magic):
            return fmt
    if _gzip(data):
        return GZIP
    if _bz2(data):
        return BZ2
    if _tar(data):
        return TAR
    if _image(data):
        return IMAGE
    if _shm(data):
        return SQLITE_SHM
    if _pickle(data):
        return PICKLE
    if _zlib(data):
        return ZLIB  # two bytes only: the caller falls back to the other checks when it does not inflate
    return None


def wide_codec(data: bytes) -> str | None:
    """`utf-16`/`utf-32` (with a BOM) or `utf-16-le`/`-be`, `utf-32-le`/`-be` (by the NULs of ASCII
    letters in that encoding) when `data` looks like wide text; the caller then decodes it strictly."""
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "utf-32"
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    sample = data[:4096]
    if len(sample) < 8:
        return None
    even, odd = sample[0::2], sample[1::2]
    if odd.count(0) > 0.4 * len(odd) and even.count(0) < 0.1 * len(even):
        return "utf-32-le" if sample[2::4].count(0) > 0.9 * len(sample[2::4]) else "utf-16-le"
    if even.count(0) > 0.4 * len(even) and odd.count(0) < 0.1 * len(odd):
        return "utf-32-be" if sample[1::4].count(0) > 0.9 * len(sample[1::4]) else "utf-16-be"
    return None


def decode_text(data: bytes) -> str | None:
    """`data` as text when it decodes cleanly, whole: UTF-16/32 (by BOM or NUL pattern), else UTF-8 (a
    UTF-8 BOM dropped). None when it does not: it is not text."""
    codec = wide_codec(data)
    if codec is not None:
        if codec.endswith(("-le", "-be")) and len(data) % (4 if "32" in codec else 2):
            return None
        try:
            return data.decode(codec)
        except UnicodeDecodeError:
            pass
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def text_head_is_clean(head: bytes) -> bool:
    """Whether the first bytes of a large file decode as UTF-8 (a character cut at the end allowed)."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3 and exc.reason == "unexpected end of data"
    return True


_HEADER_LINE = re.compile(r"[!-9;-~]+:[^\n]*\n(?:[ \t][^\n]*\n)*")
_MAIL_HEADERS = frozenset(
    {"from", "to", "subject", "date", "message-id", "mime-version", "received", "return-path", "content-type", "cc"}
)


def _email(text: str) -> bool:
    """RFC 5322: a block of header fields at the very start, among them fields mail has."""
    pos, names = 0, set()
    t = text[:65536].replace("\r\n", "\n")
    while (m := _HEADER_LINE.match(t, pos)) is not None:
        names.add(m.group(0).split(":", 1)[0].lower())
        pos = m.end()
    return pos > 0 and (pos >= len(t) or t[pos] == "\n") and len(names & _MAIL_HEADERS) >= 2


def text_format(text: str) -> str:
    """What a text is: markup, mail, a vCard or iCalendar, JSON (a document or JSON lines), RTF, or
    plain text."""
    head = text.lstrip("\ufeff \t\r\n")[:512]
    low = head.lower()
    if low.startswith("{\\rtf"):
        return RTF
    if low.startswith(("begin:vcard", "begin:vcalendar")):
        return VCARD
    if low.startswith(("<!doctype html", "<html")) or (low.startswith("<") and "<html" in low):
        return HTML
    if low.startswith("<?xml"):
        return XML  # XHTML among it: `markup.xml_records` reads an `html` root as HTML
    if low.startswith("<") and re.match(r"<[A-Za-z_][\w.:-]*[\s/>]", head):
        return HTML if re.search(r"<(?:html|head|body|p|div|table|span|br)[\s/>]", low) else XML
    if low.startswith(("{", "[")) and _json(text):
        return JSON
    if _email(text):
        return EMAIL
    return TEXT


def _json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        pass
    lines = [line for line in text.splitlines()[:50] if line.strip()]
    try:
        return bool(lines) and all(isinstance(json.loads(line), dict | list) for line in lines)
    except ValueError:
        return False


def named_by_puremagic(data: bytes) -> tuple[bool, str]:
    """(an image?, a short name of the format) by puremagic's best guess, for what the explicit checks
    leave; ("", False) when it has none."""
    try:
        mime = puremagic.from_string(data[:8192], mime=True)
        ext = puremagic.from_string(data[:8192])
    except (puremagic.PureError, ValueError):
        return False, ""
    return bool(_IMAGE_MIME.match(mime or "")), ext.lstrip(".")


def identify(data: bytes) -> str | None:
    """The format of one whole payload (see the module docstring); None when not positively identified."""
    if not data:
        return EMPTY
    fmt = binary_format(data)
    if fmt is not None and fmt != ZLIB:
        return fmt
    text = decode_text(data)
    if text is not None:
        return text_format(text)
    if fmt is None and _email(data[:65536].decode("latin-1")):
        return EMAIL  # a mail with 8-bit parts in a charset of their own: its headers are ASCII
    return fmt  # ZLIB, or None
