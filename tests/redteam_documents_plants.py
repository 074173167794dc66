"""What the issue-33 red team plants: one subject, and the attack of one family bullet of issue 33.

`build(i, attack, locale, seed, variant, used)` returns a `Scenario`: the subject (a `Person33`, name from
a seeded Faker locale unless the attack needs a name of its own), ingest items (the subject's own item and
the attack's items, owned by the subject or by a bystander of this scenario), attachment files to write,
files to drop into the store folder, and for every planted piece whether it names the subject (the
oracle must find it before the erasure) and whether it must come out byte for byte. Plain functions,
no product code: tests/redteam/test_redteam_documents.py draws and runs them,
tests/redteam/test_redteam_documents_cases.py names one of each.
"""

from __future__ import annotations

import hashlib
import io
import sqlite3
import tempfile
import zlib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from tests.oracle33.match import Person33

LOCALES = (
    "en_US", "de_DE", "fr_FR", "es_ES", "pl_PL", "tr_TR", "cs_CZ", "ru_RU", "uk_UA", "bg_BG", "el_GR",
    "ar_AA", "fa_IR", "he_IL", "zh_CN", "ja_JP", "ko_KR", "hi_IN", "th_TH", "vi_VN",
)  # fmt: skip
"""Faker locales of the subjects' names: Latin, Cyrillic, Greek, Arabic, Hebrew, CJK, Devanagari, Thai."""
CJK_LOCALES = ("zh_CN", "ja_JP", "ko_KR")

FAMILIES: dict[str, int] = {
    # 1. marked-up and structured text
    "html-tags": 1, "html-table": 1, "xml-fields": 1, "json-fields": 1, "middle-name": 1,
    "pdf-kerned": 1, "rtf-escapes": 1, "docx-runs": 1,
    # 2. international forms
    "idn-email": 2, "other-digits": 2, "cjk-space": 2, "apostrophe": 2,
    # 3. identifiers derived from the person
    "email-digest": 3, "at-dot": 3,
    # 4. files nobody reads
    "zstd": 4, "lz4": 4, "brotli": 4, "7z": 4, "bmp": 4, "high-entropy": 4, "sqlite-freed": 4,
    "image-metadata": 4,
    # 5. other people's words
    "longer-email": 5, "invoice-number": 5, "everyday-words": 5, "glued-name": 5,
    # 6. requests that must be able to end
    "no-trunk-zero": 6, "curly-apostrophe": 6, "cjk-in-text": 6, "bystander-attachment": 6,
    "conversation-key": 6, "escaped-url": 6,
}  # fmt: skip
"""Every attack, and the family bullet of issue 33 it stands for."""

APOSTROPHE_NAMES = (
    "O'Brien", "O'Neill", "D'Angelo", "O'Connor", "D'Souza", "O'Hara", "Dell'Olio", "L'Estrange",
    "O'Reilly", "D'Arcy", "O'Sullivan", "D'Amico", "O'Donnell", "Dall'Ara", "O'Keefe", "D'Costa",
)  # fmt: skip
EVERYDAY = (
    ("April", "May", "The offer ran from April. May we extend it to June?"),
    ("Rose", "Hill", "The path rose up the hill behind the depot."),
    ("Will", "Wood", "We will order wood for the shed on Monday."),
    ("Grace", "Long", "Say grace before the long dinner, then the speeches."),
    ("Mark", "Price", "Please mark the price on every jar of honey."),
    ("Sandy", "Shore", "A sandy shore lies past the boat ramp."),
    ("Hope", "Bright", "We hope the bright lamps arrive before winter."),
    ("Dawn", "Field", "At dawn the field was white with frost."),
    ("Summer", "Rain", "Summer rain flooded the cellar twice."),
    ("June", "Bell", "In June the bell tower closes for repairs."),
    ("Amber", "Stone", "An amber stone ring was handed in at reception."),
    ("Faith", "Church", "Her faith in the church choir never wavered."),
)
"""Names of everyday words, and a bystander's sentence that uses them as words (not as the name)."""
GLUED = (
    ("Na", "Li", "Lina"), ("Li", "Ma", "Mali"), ("Bel", "Ana", "Anabel"), ("Ma", "Al", "Alma"),
    ("Win", "Ed", "Edwin"), ("Son", "Ali", "Alison"), ("Anna", "Jo", "Joanna"), ("Tin", "Mar", "Martin"),
    ("Bert", "Ro", "Robert"), ("Nah", "Han", "Hannah"), ("Ron", "Ma", "Maron"), ("Ria", "Ma", "Maria"),
)  # fmt: skip
"""(given, family, the two glued into one everyday word a bystander writes)."""
CJK_SENTENCE = {
    "zh_CN": ("我们的客户", "昨天打电话说包裹没有到。"),
    "ja_JP": ("お客様の", "さんから昨日電話がありました。"),
    "ko_KR": ("고객", "님이 어제 전화했습니다."),
}


@dataclass
class Plant:
    """One planted piece: an ingest item (and its attachment), or a file dropped into the store."""

    item: dict[str, Any] | None
    names_subject: bool
    """The piece names the subject: the oracle must find them in it before the erasure."""
    exact: bool
    """The piece is a bystander's and must come out byte for byte (not even a redaction)."""
    attachment: tuple[str, bytes] | None = None
    store_file: tuple[str, bytes] | None = None
    opaque: bool = False
    """No reader shows the subject in it (a picture without OCR, an opaque file): the oracle knows it by
    its digest."""


@dataclass
class Scenario:
    """One subject and one attack."""

    i: int
    attack: str
    locale: str
    subject: Person33
    plants: list[Plant] = field(default_factory=list)

    @property
    def family(self) -> int:
        return FAMILIES[self.attack]

    @property
    def request_id(self) -> str:
        return f"req-d-{self.i:03d}"

    def envelope_subject(self) -> dict[str, str]:
        s = self.subject
        out = {"id": s.id}
        out.update({k: v for k, v in (("email", s.email), ("name", s.name), ("phone", s.phone)) if v})
        return out

    def known(self) -> dict[str, str]:
        """sha256 -> subject id of the planted bytes no reader shows the subject in."""
        return {
            hashlib.sha256(p.attachment[1] if p.attachment else p.store_file[1] if p.store_file else b"").hexdigest(): (
                self.subject.id
            )
            for p in self.plants
            if p.opaque
        }


@cache
def _faker(locale: str) -> Any:
    from faker import Faker

    return Faker(locale)


def faker_name(locale: str, seed: int) -> tuple[str, str]:
    """(given, family) from Faker's `locale`, seeded."""
    f = _faker(locale)
    f.seed_instance(seed)
    return str(f.first_name()), str(f.last_name())


def request_name(locale: str, given: str, family: str, spaced: bool = True) -> str:
    """The name as a request spells it: family first in CJK (with or without the space)."""
    if locale in CJK_LOCALES:
        return f"{family} {given}" if spaced else f"{family}{given}"
    return f"{given} {family}"


def latin1(text: str) -> bool:
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


# --- document writers -----------------------------------------------------------------------------


def _pdf_lit(data: bytes) -> bytes:
    out = bytearray(b"(")
    for b in data:
        out += b"\\%03o" % b if b > 126 or b in b"()\\" else bytes([b])
    return bytes(out + b")")


def pdf_kerned(text: str, seed: int, compress: bool) -> bytes:
    """A one-page PDF (Helvetica, WinAnsi) that draws `text` (Latin-1) in a `TJ` array of 1-3 character
    pieces with small kerning numbers between them, the word spaces drawn as -250 displacements."""
    pieces: list[bytes] = []
    k = seed
    for w, word in enumerate(text.split(" ")):
        if w:
            pieces.append(b"-250")
        data = word.encode("latin-1")
        j = 0
        while j < len(data):
            n = 1 + k % 3
            k = k * 1103515245 + 12345 & 0x7FFFFFFF
            pieces.append(_pdf_lit(data[j : j + n]))
            j += n
            if j < len(data):
                pieces.append(str(-(k % 40)).encode() if k % 2 else str(k % 25).encode())
    content = b"BT /F1 12 Tf 72 712 Td (Contact:) Tj 0 -16 Td [" + b" ".join(pieces) + b"] TJ ET"
    stream = zlib.compress(content) if compress else content
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> "
        b"/Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Length %d%s >>\nstream\n" % (len(stream), b" /Filter /FlateDecode" if compress else b"")
        + stream
        + b"\nendstream",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for n, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)


def rtf_escaped(given: str, family: str, email: str) -> bytes:
    """An RTF letter naming the person: every non-ASCII character as `\\'hh` (cp1252) or `\\uN?`, the
    given name split by a bold group."""

    def esc(s: str) -> str:
        out = []
        for c in s:
            if c.isascii() and c not in "\\{}":
                out.append(c)
            elif c in "\\{}":
                out.append("\\" + c)
            else:
                try:
                    out.append("\\'{:02x}".format(c.encode("cp1252")[0]))
                except UnicodeEncodeError:
                    n = ord(c)
                    out.append(f"\\u{n if n < 32768 else n - 65536}?")
        return "".join(out)

    half = max(1, len(given) // 2)
    body = (
        "{\\rtf1\\ansi\\ansicpg1252\\deff0{\\fonttbl{\\f0 Calibri;}}{\\colortbl;\\red0\\green0\\blue0;}"
        "\\pard Dear team,\\par Please update the record of {\\b " + esc(given[:half]) + "}" + esc(given[half:])
        + " " + esc(family) + " (" + esc(email) + ").\\par}"
    )  # fmt: skip
    return body.encode("ascii")


def docx_runs(given: str, family: str, seed: int) -> bytes:
    """A DOCX whose one paragraph names the person in runs cut inside the words."""
    import docx

    doc = docx.Document()
    p = doc.add_paragraph()
    text = f"Meeting notes: {given} {family} asked for a refund."
    cuts = sorted({15 + 1 + seed % max(1, len(given) - 1), 15 + len(given) + 2 + seed % max(1, len(family))})
    prev = 0
    for c in [*cuts, len(text)]:
        run = p.add_run(text[prev:c])
        run.bold = bool(prev % 2)
        prev = c
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


def bmp_image(text: str) -> bytes:
    """A BMP picture of `text` (DejaVu Sans 36 pt, black on white)."""
    from PIL import Image, ImageDraw, ImageFont

    try:
        font: Any = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", 36)
    except OSError:
        font = ImageFont.load_default()
    img = Image.new("L", (40 + 24 * len(text), 90), 255)
    ImageDraw.Draw(img).text((20, 20), text, fill=0, font=font)
    buf = io.BytesIO()
    img.save(buf, format="BMP")
    return buf.getvalue()


def image_with_metadata(text: str, jpeg: bool) -> bytes:
    """A blank 8x8 picture whose only trace of `text` is beside its pixels: a PNG `Author` text chunk
    (iTXt where `text` is not Latin-1), or a JPEG's EXIF `Artist`."""
    from PIL import Image, PngImagePlugin

    buf = io.BytesIO()
    if jpeg:
        img = Image.new("RGB", (8, 8), (255, 255, 255))
        exif = img.getexif()
        exif[0x013B] = text
        img.save(buf, format="JPEG", exif=exif)
    else:
        info = PngImagePlugin.PngInfo()
        info.add_text("Author", text)
        Image.new("L", (8, 8), 255).save(buf, format="PNG", pnginfo=info)
    return buf.getvalue()


def opaque_bytes(payload: bytes, seed: int, size: int = 3072) -> bytes:
    """`size` bytes of high entropy that hold `payload` enciphered (a keystream of sha256 blocks)."""
    stream = b"".join(hashlib.sha256(b"%d:%d" % (seed, n)).digest() for n in range(size // 32 + 1))
    body = (payload + stream)[:size]
    return bytes(a ^ b for a, b in zip(body, stream, strict=False))


def _notes_db(path: Path, body: str, delete: bool) -> bytes:
    conn = sqlite3.connect(path)
    conn.executescript(
        "PRAGMA page_size=512; PRAGMA secure_delete=OFF; PRAGMA auto_vacuum=NONE; PRAGMA journal_mode=DELETE;"
        "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT);"
    )
    conn.execute("INSERT INTO notes(body) VALUES ('first note: walnut shelves')")
    conn.execute("INSERT INTO notes(body) VALUES (?)", (body,))
    conn.commit()
    if delete:
        conn.execute("DELETE FROM notes WHERE id = 2")
        conn.commit()
    conn.close()
    data = path.read_bytes()
    path.unlink()
    return data


def sqlite_freed(text: str, seed: int) -> bytes:
    """A SQLite database (512-byte pages, secure_delete off) whose only trace of `text` (ASCII) is in
    freed overflow pages, cut in the middle by the 4-byte pointer at the head of an overflow page (the
    boundary found with a probe value of the same length first)."""
    probe = "".join(f"{k:05d}|" for k in range(400))
    with tempfile.TemporaryDirectory(prefix="plant-sqlite-") as tmp:
        path = Path(tmp) / "cache.db"
        data = _notes_db(path, probe, delete=False)
        starts = sorted(
            probe.find(page[4:16].decode("latin-1"))
            for page in (data[n : n + 512] for n in range(0, len(data), 512))
            if page[4:16].decode("latin-1") in probe
        )
        boundary = starts[2]  # where the third overflow page begins: not the one freed first (a trunk)
        filler = "".join(f"walnut shelves order {seed % 97} " for _ in range(100))
        start = boundary - len(text) // 2
        data = _notes_db(path, (filler[:start] + text + filler)[: len(probe)], delete=True)
    assert text.encode() not in data, "the planted value is not split"
    assert text[: len(text) // 2 - 2].encode() in data and text[len(text) // 2 + 2 :].encode() in data
    return data


def punycode_domain(domain: str) -> str:
    return domain.encode("idna").decode("ascii")
