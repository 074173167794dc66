"""Images read by OCR: Tesseract through pytesseract, where the `tesseract` binary is installed (Debian's
`tesseract-ocr`; `make ocr`). Without it, or when it fails on an image, the image is not read: the
caller declares it (`image-not-read`)."""

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
