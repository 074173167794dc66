"""One payload, identified and read by the reader made for its format (the dispatch of
`probes.documents`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from probes.documents import formats as fmt
from probes.documents.containers import DECODE_ERRORS, Room, TooLarge, Unread, brotli_payload, decompress, members
from probes.documents.images import metadata, ocr
from probes.documents.markup import html_records, xml_records
from probes.documents.msgpack import read_msgpack
from probes.documents.office import spreadsheet_rows
from probes.documents.pdf import read_pdf
from probes.documents.pickles import read_pickle
from probes.documents.textual import TextReading, email_records, json_records, rtf_records, vcard_records

Part = bytes | Unread | str
"""What a container yields: a payload to read again, a part not read (and why), or a record (a member's
name)."""


@dataclass
class Reading:
    """What one payload is and holds.

    `format`: its format (`probes.documents.formats`); `text`: the payload as text, when it is text (the
    caller matches it, and reads the escapes and runs in it); `records`: the text its parser produced,
    one string per record; `parts`: payloads inside it to read again (lazily, for archives), parts not
    read, and names; `ocr`: text read from its pixels by OCR (matched by docs/matching.md 1.5, look-alike
    characters folded)."""

    format: str
    text: str | None = None
    records: list[str] = field(default_factory=list)
    ocr: list[str] = field(default_factory=list)
    parts: Iterable[Part] = ()


def _text_reading(kind: str, data: bytes, text: str) -> TextReading:
    if kind == fmt.HTML:
        return TextReading(html_records(text))
    if kind == fmt.XML:
        return TextReading(xml_records(data if not data.startswith((b"\xff", b"\xfe", b"\x00")) else text) or [])
    if kind == fmt.JSON:
        return json_records(text)
    if kind == fmt.RTF:
        return rtf_records(text)
    if kind == fmt.VCARD:
        return vcard_records(text)
    return TextReading()


def _decompressed(kind: str, data: bytes, room: Room) -> Iterator[Part]:
    try:
        yield decompress(kind, data, room())
    except TooLarge:
        yield Unread("container-too-large", data, len(data))
    except DECODE_ERRORS:
        yield Unread("container-corrupt", data, len(data))


def _unidentified(data: bytes, room: Room) -> Reading:
    """What no check identified: msgpack, when the whole payload is one document; brotli, when the whole
    payload decompresses as brotli to something identified; else an image puremagic names (read by OCR);
    else declared."""
    packed = read_msgpack(data)
    if packed is not None:
        return Reading("msgpack", records=packed.records, parts=list(packed.payloads))
    out = brotli_payload(data, room())
    if out is not None and fmt.identify(out) not in (None, fmt.EMPTY):
        return Reading("brotli", parts=[out])
    is_image, _name = fmt.named_by_puremagic(data)
    if is_image:
        return _image(data)
    return Reading("unidentified", parts=[Unread("unidentified-format", data, len(data))])


def _image(data: bytes) -> Reading:
    records, payloads = metadata(data)
    text = ocr(data)
    if text is None:
        return Reading(fmt.IMAGE, records=records, parts=[*payloads, Unread("image-not-read", data, len(data))])
    return Reading(fmt.IMAGE, records=records, ocr=[text], parts=payloads)


def _guarded(parts: Iterable[Part], data: bytes) -> Iterator[Part]:
    """`parts`, until a parser fails on them: then `parse-error` for the payload, never a failed scan."""
    it = iter(parts)
    while True:
        try:
            part = next(it)
        except StopIteration:
            return
        except Exception:  # any library's own error on hostile or damaged bytes: declared
            yield Unread("parse-error", data, len(data))
            return
        yield part


def read(data: bytes, room: Room, *, guess: bool = False) -> Reading:
    """Identify `data` by its content and read it with its format's parser. `room()`: the largest
    decoded member allowed now (past it a member is `container-too-large`). `guess`: `data` is a decoding
    guessed inside other bytes (a base64 run): when no explicit check identifies it, brotli and puremagic
    are not tried (they cost milliseconds, and a store has thousands of such runs). A parser that fails
    in a way of its own makes the payload `parse-error` (declared), never a failed scan."""
    try:
        reading = _read(data, room, guess)
    except Exception:  # any library's own error on hostile or damaged bytes: declared
        return Reading("unreadable", parts=[Unread("parse-error", data, len(data))])
    reading.parts = _guarded(reading.parts, data)
    return reading


def _read(data: bytes, room: Room, guess: bool) -> Reading:
    kind = fmt.identify(data)
    if kind == fmt.ZLIB:
        try:
            return Reading(kind, parts=[decompress(kind, data, room())])
        except TooLarge:
            return Reading(kind, parts=[Unread("container-too-large", data, len(data))])
        except DECODE_ERRORS:
            kind = None  # two bytes that only looked like a zlib header
    if kind is None:
        if guess:
            return Reading("unidentified", parts=[Unread("unidentified-format", data, len(data))])
        return _unidentified(data, room)
    if kind == fmt.EMAIL:  # the bytes, not a decoding: each part has its own charset and transfer encoding
        mail = email_records(data)
        return Reading(kind, text=fmt.decode_text(data), records=mail.records, parts=list(mail.payloads))
    if kind in fmt.TEXT_FORMATS:
        text = fmt.decode_text(data)
        assert text is not None  # identified as text: it decodes
        reading = _text_reading(kind, data, text)
        return Reading(kind, text=text, records=reading.records, parts=list(reading.payloads))
    if kind in fmt.COMPRESSORS:
        return Reading(kind, parts=_decompressed(kind, data, room))
    if kind in fmt.ARCHIVES:
        rows = spreadsheet_rows(data) if kind == fmt.ZIP else []
        return Reading(kind, records=rows, parts=members(kind, data, room))
    if kind == fmt.PDF:
        pdf = read_pdf(data, ocr)
        return Reading(kind, records=pdf.records, ocr=pdf.ocr, parts=[*pdf.payloads, *pdf.unread])
    if kind == fmt.IMAGE:
        return _image(data)
    if kind == fmt.PICKLE:
        got = read_pickle(data)
        if got is None:
            return Reading(kind, parts=[Unread("container-corrupt", data, len(data))])
        return Reading(kind, records=got.records, parts=list(got.payloads))
    return Reading(kind)  # empty, and SQLite's files: the caller reads their pages and values
