"""Real documents, archives and images built by real libraries, for the tests of `probes.documents`: each
writer takes the text to plant and returns a file's bytes. A planted name is split the way its format
splits text (tags, runs, kerned pieces, folded lines, encoded words)."""

from __future__ import annotations

import bz2
import email.policy
import gzip
import io
import itertools
import lzma
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from email.message import EmailMessage

import brotli
import lz4.frame
import py7zr
import zstandard

GIVEN, FAMILY = "Ilse", "Vandermeer"
NAME = f"{GIVEN} {FAMILY}"
NEEDLES = [("identifier", NAME)]


def html(given: str = GIVEN, family: str = FAMILY) -> bytes:
    """The name split by inline tags, in a page with other paragraphs."""
    return (
        "<!DOCTYPE html><html><head><title>Ticket</title></head><body>"
        f"<p>Opened by <b>{given}</b> <i>{family}</i> on Monday.</p><div>Status: closed</div></body></html>"
    ).encode()


def html_table(given: str = GIVEN, family: str = FAMILY) -> bytes:
    """The name's parts in two cells of one table row."""
    return (
        f"<html><body><table><tr><th>Given</th><th>Family</th></tr><tr><td>{given}</td><td>{family}</td></tr>"
        "</table></body></html>"
    ).encode()


def xml(given: str = GIVEN, family: str = FAMILY) -> bytes:
    """The name's parts in two elements of one flat record."""
    record = f'<contact id="7"><given>{given}</given><family>{family}</family></contact>'
    return f'<?xml version="1.0"?><crm>{record}</crm>'.encode()


def docx(given: str = GIVEN, family: str = FAMILY, cuts: tuple[int, ...] = (2, 7)) -> bytes:
    """A DOCX (python-docx) whose paragraph holds the name in runs (cut at `cuts`) that split its words."""
    import docx as python_docx

    doc = python_docx.Document()
    doc.add_paragraph("Customer file")
    p = doc.add_paragraph("Holder: ")
    full = f"{given} {family}"
    cut = [0, *sorted({c for c in cuts if 0 < c < len(full)}), len(full)]
    for a, b in itertools.pairwise(cut):
        run = p.add_run(full[a:b])
        run.bold = len(p.runs) % 2 == 0
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


def _package(parts: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in parts.items():
            z.writestr(name, text)
    return buf.getvalue()


def odt(given: str = GIVEN, family: str = FAMILY) -> bytes:
    """An ODF text document whose paragraph splits the name in spans."""
    content = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
        ' xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:text>'
        f"<text:p>Holder: <text:span>{given[:2]}</text:span>{given[2:]}"
        f"<text:s/><text:span>{family}</text:span></text:p>"
        "</office:text></office:body></office:document-content>"
    )
    return _package({"mimetype": "application/vnd.oasis.opendocument.text", "content.xml": content})


def pptx_slide(given: str = GIVEN, family: str = FAMILY) -> bytes:
    """A presentation's slide part (DrawingML a:p with a:r runs splitting the name), in its zip."""
    slide = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<p:sld xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
        ' xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><p:cSld><p:spTree><p:sp><p:txBody>'
        f"<a:p><a:r><a:t>{given[:3]}</a:t></a:r><a:r><a:t>{given[3:]} {family[:4]}</a:t></a:r>"
        f"<a:r><a:t>{family[4:]}</a:t></a:r></a:p>"
        "</p:txBody></p:sp></p:spTree></p:cSld></p:sld>"
    )
    return _package({"[Content_Types].xml": "<Types/>", "ppt/slides/slide1.xml": slide})


def xlsx(given: str = GIVEN, family: str = FAMILY) -> bytes:
    """A spreadsheet (SpreadsheetML written by hand: no writer library in the lock) whose row holds the
    name's parts in two cells, each a pointer into the shared-string table."""
    ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    strings = "".join(f"<si><t>{t}</t></si>" for t in ("Given", "Family", family, given))
    cells = '<c r="A2" t="s"><v>3</v></c><c r="B2" t="s"><v>2</v></c><c r="C2"><v>42</v></c>'
    return _package(
        {
            "[Content_Types].xml": "<Types/>",
            "xl/workbook.xml": f'<workbook {ns}><sheets><sheet name="People" sheetId="1"/></sheets></workbook>',
            "xl/sharedStrings.xml": f'<sst {ns} count="4">{strings}</sst>',
            "xl/worksheets/sheet1.xml": f'<worksheet {ns}><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c>'
            f'<c r="B1" t="s"><v>1</v></c></row><row r="2">{cells}</row></sheetData></worksheet>',
        }
    )


def pdf_tj(
    given: str = GIVEN, family: str = FAMILY, cuts: tuple[int, ...] = (2, 6, 9), kerns: tuple[int, ...] = (-30, 12, -45)
) -> bytes:
    """A PDF written by hand whose page draws the name as a TJ array of pieces (cut at `cuts`, each
    followed by its kerning in `kerns`), in a FlateDecode content stream, with a correct cross-reference
    table."""
    full = f"{given} {family}"
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(full)}), len(full)]
    pieces = [full[a:b] for a, b in itertools.pairwise(bounds)]
    tj = " ".join(f"({p}) {k}" for p, k in zip(pieces, (*kerns, *([0] * len(pieces))), strict=False))
    content = zlib.compress(f"BT /F1 14 Tf 72 720 Td [{tj}] TJ ET".encode())
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >>"
        b" /Contents 4 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def pdf_fpdf(given: str = GIVEN, family: str = FAMILY) -> bytes:
    """A PDF written by fpdf2 (compressed content stream), the name drawn as two pieces of text."""
    from fpdf import FPDF

    doc = FPDF()
    doc.add_page()
    doc.set_font("helvetica", size=14)
    doc.text(20, 30, f"Holder: {given}")
    doc.text(20 + doc.get_string_width(f"Holder: {given} "), 30, family)
    return bytes(doc.output())


def rtf(given: str = GIVEN, family: str = FAMILY) -> bytes:
    """RTF with the name split by a group and an escaped character."""
    first = given[:-1] + f"\\'{ord(given[-1]):02x}"
    return (
        "{\\rtf1\\ansi{\\fonttbl\\f0 Arial;}\\f0 Holder: " + first + " {\\b " + family + "}\\par Done\\par}"
    ).encode()


def eml(given: str = GIVEN, family: str = FAMILY) -> bytes:
    """A mail whose HTML part (base64) splits the name by tags; its subject holds an encoded word."""
    msg = EmailMessage(policy=email.policy.default)
    msg["From"] = "desk@example.org"
    msg["To"] = "archive@example.org"
    msg["Subject"] = "Ticket 7"
    msg.set_content("See the HTML part.")
    msg.add_alternative(html(given, family).decode(), subtype="html", cte="base64")
    return msg.as_bytes()


def eml_header(given: str = GIVEN, family: str = FAMILY) -> bytes:
    """A mail whose From header's display name is an RFC 2047 encoded word (base64)."""
    import base64

    word = base64.b64encode(f"{given} {family}".encode()).decode()
    return (
        f"From: =?utf-8?b?{word}?= <x@example.org>\r\nTo: desk@example.org\r\nSubject: hi\r\n"
        "MIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\nbody\r\n"
    ).encode()


def vcard(given: str = GIVEN, family: str = FAMILY) -> bytes:
    """A vCard whose FN line is folded inside the family name."""
    fn = f"FN:{given} {family[:5]}\r\n {family[5:]}"
    return f"BEGIN:VCARD\r\nVERSION:3.0\r\n{fn}\r\nN:{family};{given};;;\r\nEND:VCARD\r\n".encode()


def ics(given: str = GIVEN, family: str = FAMILY) -> bytes:
    """An iCalendar event whose attendee's CN parameter is folded with a tab."""
    return (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nSUMMARY:Review\r\n"
        f'ATTENDEE;CN="{given} {family[:3]}\r\n\t{family[3:]}":mailto:a@example.org\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n'
    ).encode()


def utf16(given: str = GIVEN, family: str = FAMILY) -> bytes:
    """Plain text in UTF-16 with a byte order mark."""
    return f"Note: {given} {family} called.".encode("utf-16")


def png(given: str = GIVEN, family: str = FAMILY, fmt: str = "PNG") -> bytes:
    """The name drawn large, black on white (OCR reads it)."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (900, 160), "white")
    font = ImageFont.load_default(size=64)
    ImageDraw.Draw(image).text((30, 40), f"{given} {family}", fill="black", font=font)
    buf = io.BytesIO()
    image.save(buf, format=fmt)
    return buf.getvalue()


def bmp(given: str = GIVEN, family: str = FAMILY) -> bytes:
    """`png`, as a BMP."""
    return png(given, family, "BMP")


DOCUMENTS: dict[str, Callable[[str, str], bytes]] = {
    "html": html,
    "html-table": html_table,
    "xml": xml,
    "docx": docx,
    "odt": odt,
    "pptx-slide": pptx_slide,
    "xlsx": xlsx,
    "pdf-tj": pdf_tj,
    "pdf-fpdf2": pdf_fpdf,
    "rtf": rtf,
    "eml": eml,
    "eml-encoded-word": eml_header,
    "vcard": vcard,
    "ics": ics,
    "utf-16": utf16,
}
"""Every document format, each splitting the name as it does."""


def _zip(data: bytes) -> bytes:
    return _package_bytes({"attachments/file.bin": data})


def _package_bytes(parts: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in parts.items():
            z.writestr(name, data)
    return buf.getvalue()


def _tar(data: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        info = tarfile.TarInfo("export/file.bin")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _7z(data: bytes) -> bytes:
    buf = io.BytesIO()
    with py7zr.SevenZipFile(buf, "w") as z:
        z.writestr(data, "file.bin")
    return buf.getvalue()


CONTAINERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "zlib": zlib.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "zstd": lambda d: zstandard.ZstdCompressor().compress(d),
    "lz4": lambda d: bytes(lz4.frame.compress(d)),
    "brotli": lambda d: bytes(brotli.compress(d)),
    "zip": _zip,
    "tar": _tar,
    "7z": _7z,
}
"""Every compressor and archive: each wraps a payload."""
