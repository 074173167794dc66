"""Text an image carries beside its pixels is read (docs/matching.md 8: images are read, not only seen).

Found by an adversary's second look at issue 33 (family 4, files nobody reads): a bystander attached a
PNG whose `Author` text chunk held the subject's address, and a JPEG whose EXIF `Artist` held their name.
OCR read the pixels (nothing), nobody read the metadata, and each request ended all clear (`erased`) with
the person in the blob store. The class: every text an image format stores beside its pixels (PNG tEXt,
zTXt and iTXt chunks, EXIF strings of every IFD, JPEG and GIF comments, the XMP packet), in every format
Pillow writes them in. The oracle is the plant, and tests/oracle33 where the text is stored plainly.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.views import scan_views
from tests import budget
from tests.oracle33.match import Person33
from tests.oracle33.scan import scan_bytes33

GIVEN, FAMILY, EMAIL = "Ilse", "Vandermeer", "ilse.vandermeer@mail.example"
NEEDLES = [("identifier", f"{GIVEN} {FAMILY}"), ("identifier", EMAIL)]


def _png(text: str, chunk: str) -> bytes:
    from PIL import Image, PngImagePlugin

    info = PngImagePlugin.PngInfo()
    if chunk == "tEXt":
        info.add_text("Author", text)
    elif chunk == "zTXt":
        info.add_text("Comment", text, zip=True)
    else:
        info.add_itxt("Description", text, lang="en", tkey="Description", zip=chunk == "iTXt-z")
    buf = io.BytesIO()
    Image.new("L", (8, 8), 255).save(buf, "PNG", pnginfo=info)
    return buf.getvalue()


def _exif(text: str, fmt: str) -> bytes:
    from PIL import Image

    image = Image.new("RGB", (8, 8), (255, 255, 255))
    exif = image.getexif()
    exif[0x013B] = text  # Artist
    exif[0x010E] = "walnut shelves"  # ImageDescription
    buf = io.BytesIO()
    image.save(buf, fmt, exif=exif)
    return buf.getvalue()


def _comment(text: str, fmt: str) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("L" if fmt == "GIF" else "RGB", (8, 8), 255).save(buf, fmt, comment=text.encode())
    return buf.getvalue()


def _xmp(text: str) -> bytes:
    from PIL import Image

    packet = (
        '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
        f'<rdf:Description xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:creator>{text}</dc:creator>'
        "</rdf:Description></rdf:RDF></x:xmpmeta>"
    )
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (255, 255, 255)).save(buf, "JPEG", xmp=packet.encode())
    return buf.getvalue()


WRITERS: dict[str, Callable[[str], bytes]] = {
    "png-tEXt": lambda t: _png(t, "tEXt"),
    "png-zTXt": lambda t: _png(t, "zTXt"),
    "png-iTXt": lambda t: _png(t, "iTXt"),
    "png-iTXt-compressed": lambda t: _png(t, "iTXt-z"),
    "jpeg-exif-artist": lambda t: _exif(t, "JPEG"),
    "webp-exif-artist": lambda t: _exif(t, "WEBP"),
    "tiff-exif-artist": lambda t: _exif(t, "TIFF"),
    "jpeg-comment": lambda t: _comment(t, "JPEG"),
    "gif-comment": lambda t: _comment(t, "GIF"),
    "jpeg-xmp-creator": _xmp,
}


def _found(tmp: Path, data: bytes) -> set[int]:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "attachment").write_bytes(data)
    return scan_views(tmp, NEEDLES).found_indexes()


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize(("needle", "text"), [(0, f"{GIVEN} {FAMILY}"), (1, f"Contact: {EMAIL}")])
def test_text_stored_beside_the_pixels_is_read(tmp_path: Path, writer: str, needle: int, text: str) -> None:
    data = WRITERS[writer](text)
    assert needle in _found(tmp_path, data), writer


def test_the_oracle_sees_the_plainly_stored_ones() -> None:
    """The control: where the text is stored plainly, the issue-33 oracle sees it in the bytes too."""
    who = Person33("x", EMAIL, GIVEN, FAMILY, None, f"{GIVEN} {FAMILY}")
    for writer in ("png-tEXt", "jpeg-exif-artist", "jpeg-comment", "gif-comment", "jpeg-xmp-creator"):
        assert scan_bytes33(WRITERS[writer](EMAIL), [who]).hits, writer


@settings(max_examples=budget.examples(60), deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    writer=st.sampled_from(sorted(WRITERS)),
    before=st.sampled_from(["", "Photo by ", "(c) 2026 ", "Scan of the card of "]),
    what=st.sampled_from([f"{GIVEN} {FAMILY}", f"{FAMILY}, {GIVEN}", EMAIL, EMAIL.upper()]),
)
def test_generated_image_metadata_is_read(
    tmp_path_factory: pytest.TempPathFactory, writer: str, before: str, what: str
) -> None:
    data = WRITERS[writer](before + what)
    assert _found(tmp_path_factory.mktemp("img"), data), (writer, before, what)
