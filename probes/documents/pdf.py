"""PDF read by pypdf: each page's text (pypdf joins the pieces a TJ array or several Tj operators draw,
kerned or not), the document information values, and every stream by its role:

- page content streams: their text is the page's text (above);
- embedded files and XMP metadata: payloads, read again through the pipeline;
- images: payloads when OCR can read them (pypdf gives each page's images as PNG/JPEG files), else
  `image-not-read`; fonts, colour profiles, object and cross-reference streams: structure, no text of
  anyone's;
- any other stream (a form, or content no page lists): its decoded bytes, read again as a payload.

Encrypted (and not openable with the empty user password): `encrypted-pdf`. Not readable by pypdf at
all: `container-corrupt`.
"""

from __future__ import annotations

import io
import logging
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from pypdf import PdfReader
from pypdf.errors import PdfReadError, PyPdfError
from pypdf.generic import ArrayObject, DictionaryObject, IndirectObject, StreamObject

from probes.documents.containers import Unread

_STRUCTURE_TYPES = frozenset({"/ObjStm", "/XRef", "/FontFile", "/FontDescriptor"})
_FONT_SUBTYPES = frozenset({"/Type1C", "/CIDFontType0C", "/OpenType"})

MAX_STREAM = 64 << 20
"""Largest stream decoded by the fallback reader (the caller's limits apply to what it returns)."""

logging.getLogger("pypdf").setLevel(logging.ERROR)


@dataclass
class PdfReading:
    """What a PDF holds: records (page texts, information values), its images' text read by OCR, payloads
    to read again, and what was not read."""

    records: list[str] = field(default_factory=list)
    ocr: list[str] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    unread: list[Unread] = field(default_factory=list)


def _ids(obj: object) -> set[int]:
    if isinstance(obj, IndirectObject):
        return {obj.idnum}
    if isinstance(obj, ArrayObject):
        return {o.idnum for o in obj if isinstance(o, IndirectObject)}
    return set()


def _font_streams(reader: PdfReader) -> set[int]:
    out: set[int] = set()
    for num, _gen in _objects(reader):
        try:
            obj = reader.get_object(num)
        except (PyPdfError, ValueError, KeyError, TypeError):
            continue
        if isinstance(obj, DictionaryObject) and not isinstance(obj, StreamObject):
            for key in ("/FontFile", "/FontFile2", "/FontFile3"):
                out |= _ids(obj.raw_get(key)) if key in obj else set()
    return out


def _objects(reader: PdfReader) -> list[tuple[int, int]]:
    return sorted({(num, gen) for gen, nums in reader.xref.items() for num in nums} | set(_objstm(reader)))


def _objstm(reader: PdfReader) -> list[tuple[int, int]]:
    return [(num, 0) for num in getattr(reader, "xref_objStm", {})]


def _role(obj: StreamObject, num: int, contents: set[int], fonts: set[int]) -> str:
    kind = str(obj.get("/Type", ""))
    subtype = str(obj.get("/Subtype", ""))
    if num in contents:
        return "content"
    if num in fonts or kind in _STRUCTURE_TYPES or subtype in _FONT_SUBTYPES or "/Length1" in obj:
        return "structure"
    if subtype == "/Image":
        return "image"
    if "/N" in obj and ("/Alternate" in obj or "/Range" in obj):
        return "structure"  # an ICC colour profile
    return "payload"


_OBJECT = re.compile(rb"\d+\s+\d+\s+obj\b(?P<body>.*?)\bendobj\b", re.S)
_STREAM = re.compile(rb"<<(?P<dict>.*?)>>\s*stream\r?\n", re.S)


def _objects_without_xref(data: bytes, out: PdfReading) -> None:
    """A PDF pypdf cannot open (no cross-reference table to find, as hand-written and truncated files
    have): its objects by their own syntax (`N G obj ... endobj`); an object's dictionary is a record,
    its stream decoded (`FlateDecode` or none) is a payload, a stream in another filter is not read.
    No object at all: `container-corrupt`."""
    found = False
    for m in _OBJECT.finditer(data):
        found = True
        body = m.group("body")
        stream = _STREAM.search(body)
        head = body[: stream.start() if stream else len(body)]
        out.records.append(head.decode("latin-1"))
        if stream is None:
            continue
        end = body.rfind(b"endstream")
        raw = body[stream.end() : end if end >= 0 else len(body)].rstrip(b"\r\n")
        filters = stream.group("dict")
        if b"/Filter" not in filters:
            out.payloads.append(raw)
        elif re.search(rb"/Filter\s*\[?\s*/(?:FlateDecode|Fl)\s*\]?", filters) and b"/DecodeParms" not in filters:
            try:
                out.payloads.append(zlib.decompressobj().decompress(raw, MAX_STREAM))
            except zlib.error:
                out.unread.append(Unread("container-corrupt", raw, len(raw)))
        else:
            out.unread.append(Unread("pdf-stream-unreadable-filter", raw, len(raw)))
    if not found:
        out.unread.append(Unread("container-corrupt", data, len(data)))


def read_pdf(data: bytes, ocr: Callable[[bytes], str | None]) -> PdfReading:
    """Read a PDF (see the module docstring); `ocr` reads an image's bytes (None: not read)."""
    out = PdfReading()
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            out.unread.append(Unread("encrypted-pdf", data, len(data)))
            return out
        pages = list(reader.pages)
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        if b"/Encrypt" in data:
            out.unread.append(Unread("encrypted-pdf", data, len(data)))
        else:
            _objects_without_xref(data, out)
        return out
    except NotImplementedError:  # an encryption algorithm pypdf does not implement
        out.unread.append(Unread("encrypted-pdf", data, len(data)))
        return out
    contents: set[int] = set()
    images_read = True
    for page in pages:
        try:
            out.records.append(page.extract_text())
            contents |= _ids(page.raw_get("/Contents")) if "/Contents" in page else set()
        except Exception:  # pypdf raises what a damaged page makes it meet: its streams are read below
            continue
        try:
            for image in page.images:
                text = ocr(image.data)
                if text is None:
                    images_read = False
                else:
                    out.ocr.append(text)
        except Exception:
            images_read = False
    try:
        info = reader.metadata
        out.records += [str(v) for v in (info or {}).values() if str(v).strip()]
        for blobs in reader.attachments.values():
            out.payloads += [bytes(b) for b in blobs]
    except Exception:  # a damaged information dictionary or name tree: the streams below still hold it
        pass
    fonts = _font_streams(reader)
    for num, _gen in _objects(reader):
        try:
            obj = reader.get_object(num)
        except Exception:
            continue
        if not isinstance(obj, StreamObject):
            continue
        role = _role(obj, num, contents, fonts)
        if role in ("content", "structure"):
            continue
        if role == "image":
            if not images_read or not pages:
                raw = bytes(obj._data)
                out.unread.append(Unread("image-not-read", raw, len(raw)))
            continue
        try:
            out.payloads.append(obj.get_data())
        except Exception:  # a filter pypdf does not decode
            raw = bytes(obj._data)
            out.unread.append(Unread("pdf-stream-unreadable-filter", raw, len(raw)))
    return out
