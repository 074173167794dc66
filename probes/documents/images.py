"""Images read by OCR: Tesseract through pytesseract, where the `tesseract` binary is installed (Debian's
`tesseract-ocr`; `make ocr`). Without it, or when it fails on an image, the image is not read: the
caller declares it (`image-not-read`).

What an image stores beside its pixels is read whatever OCR can do (`metadata`): PNG text chunks (tEXt,
zTXt, iTXt, decompressed), JPEG and GIF comments, the strings of every EXIF directory, and the XMP packet
(a payload, read again as XML). Found by an adversary's second look at issue 33: a PNG `Author` chunk and
a JPEG EXIF `Artist` held the subject, OCR saw blank pixels, and the request ended all clear."""

from __future__ import annotations

import functools
import io
import shutil

MAX_PIXELS = 40_000_000
"""Larger images are not read (OCR time grows with the pixels; a decompression bomb is refused)."""
OCR_SECONDS = 60


@functools.cache
def tesseract_present() -> bool:
    """Whether the `tesseract` binary is on PATH."""
    return shutil.which("tesseract") is not None


def ocr(data: bytes) -> str | None:
    """The text Tesseract reads in an image's bytes (any format Pillow opens); None when it cannot."""
    if not tesseract_present():
        return None
    try:
        import pytesseract
        from PIL import Image

        with Image.open(io.BytesIO(data)) as image:
            if image.width * image.height > MAX_PIXELS:
                return None
            image.load()
            rgb = image.convert("RGB")
        return str(pytesseract.image_to_string(rgb, timeout=OCR_SECONDS))
    except Exception:  # Pillow or Tesseract could not read it: the image is declared, never certified
        return None


_EXIF_DIRECTORIES = (0x8769, 0x8825, 0xA005)
"""EXIF's own directory, GPS, interoperability: read beside the main one."""


def _strings(value: object) -> list[str]:
    if isinstance(value, bytes):
        return [value.decode("utf-8", "replace")]
    if isinstance(value, str):
        return [value]
    if isinstance(value, tuple | list):
        return [s for v in value for s in _strings(v)]
    return []


def metadata(data: bytes) -> tuple[list[str], list[bytes]]:
    """(records, payloads) of the text an image stores beside its pixels: one record per text value
    (PNG text chunks, comments, EXIF strings of every directory), the XMP packet as a payload; ([], [])
    when Pillow cannot open the image."""
    try:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as image:
            image.load()
            info = dict(image.info)
            exif = image.getexif()
            values = [*exif.values()]
            for ifd in _EXIF_DIRECTORIES:
                values += [*exif.get_ifd(ifd).values()]
    except Exception:  # Pillow could not read it: the caller's OCR verdict (or its absence) stands
        return [], []
    payloads = [x for x in (info.pop("xmp", None), info.pop("XML:com.adobe.xmp", None)) if x]
    info.pop("exif", None)  # the raw EXIF block: read above, value by value
    records = [s for v in (*info.values(), *values) for s in _strings(v) if s.strip()]
    return records, [p.encode("utf-8") if isinstance(p, str) else p for p in payloads if isinstance(p, str | bytes)]
