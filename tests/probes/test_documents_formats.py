"""Parse, then match (`probes.documents` through `probes.views.scan_views`): each format's parser joins
what the format splits (tags, runs, kerned TJ pieces, folded lines, encoded words, compressed and
archived members), and puts U+001E between records. The oracle is the plant: a name planted in a real
file written by a real library is found, and the raw text of that file alone would not have shown it
to the matcher."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.documents import RS, read
from probes.documents.images import tesseract_present
from probes.matcher import Matcher
from probes.views import scan_views
from tests import documents_fixtures as docs
from tests.documents_fixtures import CONTAINERS, DOCUMENTS, NAME, NEEDLES

ROOM = 64 << 20

SPLIT_FORMATS = sorted(set(DOCUMENTS) - {"vcard", "utf-16", "eml-encoded-word", "html", "html-table", "xml"})
"""Formats whose raw text does not show the name to the matcher at all (a vCard's N property does, in
reverse order; UTF-16 and an encoded word are views of the old text pipeline too; and HTML and XML text
is read by the matching rule's own structure view, docs/matching.md 1.3.2, with its tags blanked)."""


def _scan(tmp: Path, files: dict[str, bytes]) -> tuple[set[int], list[str]]:
    tmp.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    report = scan_views(tmp, NEEDLES)
    return report.found_indexes(), [u.reason for u in report.unscanned]


def _raw_text_shows(data: bytes) -> bool:
    hits: dict[int, int] = {}
    Matcher(NEEDLES).match_text(data.decode("utf-8", "replace"), hits)
    return bool(hits)


@pytest.mark.parametrize("fmt", sorted(DOCUMENTS))
def test_a_name_split_by_its_format_is_found(tmp_path: Path, fmt: str) -> None:
    data = DOCUMENTS[fmt](docs.GIVEN, docs.FAMILY)
    assert _scan(tmp_path, {"attachment": data}) == ({0}, []), fmt


@pytest.mark.parametrize("fmt", SPLIT_FORMATS)
def test_the_raw_text_alone_does_not_show_the_split_name(fmt: str) -> None:
    """The control: without the parser the matcher would not have found it."""
    assert not _raw_text_shows(DOCUMENTS[fmt](docs.GIVEN, docs.FAMILY)), fmt


@pytest.mark.parametrize("container", sorted(CONTAINERS))
def test_every_compressor_and_archive_is_opened(tmp_path: Path, container: str) -> None:
    data = CONTAINERS[container](docs.html())
    assert _scan(tmp_path, {"blob": data}) == ({0}, []), container


def _records(data: bytes) -> list[str]:
    """Every record a payload and (recursively) its parts produce."""
    reading = read(data, lambda: ROOM)
    out = list(reading.records)
    for part in reading.parts:
        if isinstance(part, bytes):
            out += _records(part)
        elif isinstance(part, str):
            out.append(part)
    return out


def test_html_blocks_end_records_and_inline_tags_are_spaces() -> None:
    records = _records(
        b'<html><body><p>Opened by <b>Ilse</b><i>Vandermeer</i></p><div>Status</div><img alt="Alt Text" src="x.png">'
        b"<table><tr><td>Ilse</td><td>Vandermeer</td></tr><tr><td>Other</td><td>Row</td></tr></table></body></html>"
    )
    assert "Opened by Ilse Vandermeer" in records
    assert "Status" in records and "Alt Text" in records
    assert "Ilse Vandermeer" in records and "Other Row" in records  # one record per table row
    assert not any("Status" in r and "Vandermeer" in r for r in records)


def test_docx_runs_are_joined_into_their_paragraph() -> None:
    records = _records(docs.docx())
    assert f"Holder: {NAME}" in records
    assert "Customer file" in records


def test_a_spreadsheet_row_is_one_record_with_its_shared_strings_resolved() -> None:
    records = _records(docs.xlsx())
    assert f"{NAME} 42" in records and "Given Family" in records


def test_pdf_tj_pieces_are_joined() -> None:
    assert any(NAME in r for r in _records(docs.pdf_tj()))


def test_vcard_and_icalendar_lines_are_unfolded() -> None:
    assert NAME in _records(docs.vcard())
    assert NAME in _records(docs.ics())


def test_mail_headers_are_decoded_records() -> None:
    records = _records(docs.eml_header())
    assert any(r.startswith("From: ") and NAME in r for r in records)
    assert "To: desk@example.org" in records


def test_json_objects_are_records() -> None:
    records = _records(b'[{"given": "Ilse", "family": "Vandermeer"}, {"given": "Other", "family": "Person"}]')
    assert records == ["given Ilse family Vandermeer", "given Other family Person"]


def test_records_reach_the_matcher_with_a_record_separator(tmp_path: Path) -> None:
    """The contract with the matcher: U+001E between records (the token rule never matches across it),
    none added to plain text."""
    seen: list[str] = []

    class Recording(Matcher):
        def match_text(self, text: str, hits: dict[int, int], *, ocr: bool = False) -> None:
            seen.append(text)
            super().match_text(text, hits, ocr=ocr)

    import probes.views as views

    original = views.Matcher
    views.Matcher = Recording  # type: ignore[misc]
    try:
        _scan(tmp_path / "a", {"page.html": b"<html><body><p>one</p><p>two</p></body></html>"})
        _scan(tmp_path / "b", {"note.gz": CONTAINERS["gzip"](b"one two\nthree")})
    finally:
        views.Matcher = original  # type: ignore[misc]
    assert f"one{RS}two" in seen
    assert "one two\nthree" in seen


@pytest.mark.skipif(not tesseract_present(), reason="tesseract is not installed (make ocr)")
@pytest.mark.parametrize("writer", [docs.png, docs.bmp])
def test_an_image_is_read_by_ocr(tmp_path: Path, writer: Callable[..., bytes]) -> None:
    assert _scan(tmp_path, {"scan": writer()}) == ({0}, [])


@pytest.mark.skipif(not tesseract_present(), reason="tesseract is not installed (make ocr)")
def test_an_image_inside_a_docx_is_read_by_ocr(tmp_path: Path) -> None:
    import io

    import docx as python_docx

    doc = python_docx.Document()
    doc.add_paragraph("Scan attached")
    doc.add_picture(io.BytesIO(docs.png()))
    buf = io.BytesIO()
    doc.save(buf)
    assert _scan(tmp_path, {"scan.docx": buf.getvalue()}) == ({0}, [])


def test_zip_member_names_are_records(tmp_path: Path) -> None:
    import io

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(f"exports/{NAME}.txt", b"nothing here")
    assert _scan(tmp_path, {"a.zip": buf.getvalue()})[0] == {0}


NAMES = [("Ilse", "Vandermeer"), ("Maren", "Okafor"), ("Tomasz", "Wrzesniewski"), ("Keiko", "Abernathy")]
NESTABLE = sorted(set(DOCUMENTS) - {"pdf-fpdf2", "docx"})
"""Documents cheap enough to draw many times (docx and fpdf2 are written once each above)."""


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    who=st.sampled_from(NAMES),
    fmt=st.sampled_from(NESTABLE),
    nesting=st.lists(st.sampled_from(sorted(CONTAINERS)), max_size=3),
    planted=st.booleans(),
)
def test_generated_format_nesting_split(
    tmp_path: Path, who: tuple[str, str], fmt: str, nesting: list[str], planted: bool
) -> None:
    """Oracle: what was planted. A name split by its format, inside up to three compressors or archives
    (any order), is found when it is the subject's and not when it is someone else's; nothing in it is
    left unread."""
    given_name, family = who if planted else ("Brunhilde", "Castellanos")
    data = DOCUMENTS[fmt](given_name, family)
    for container in nesting:
        data = CONTAINERS[container](data)
    needles = [("identifier", f"{who[0]} {who[1]}")]
    folder = tmp_path / os.urandom(6).hex()
    folder.mkdir()
    (folder / "item").write_bytes(data)
    report = scan_views(folder, needles)
    assert report.unscanned == [], (fmt, nesting)
    assert (0 in report.found) is planted, (who, fmt, nesting)


def test_a_long_msgpack_value_in_a_database_is_read(tmp_path: Path) -> None:
    """A LangGraph checkpoint (msgpack, written by LangGraph's own serializer) longer than a page: the
    database value read through SQL is identified as msgpack and read, its message text a record."""
    import sqlite3

    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    kind, blob = JsonPlusSerializer().dumps_typed(
        {"messages": [HumanMessage(content=f"Hi, this is {NAME}. " + "Weather notes. " * 600)], "step": 3}
    )
    assert kind == "msgpack" and len(blob) > 8192
    conn = sqlite3.connect(tmp_path / "checkpoints.sqlite")
    conn.execute("CREATE TABLE checkpoints(thread_id TEXT, checkpoint BLOB)")
    conn.execute("INSERT INTO checkpoints VALUES ('t-1', ?)", (blob,))
    conn.commit()
    conn.close()
    assert any(NAME in r for r in _records(blob))
    report = scan_views(tmp_path, NEEDLES)
    assert report.found_indexes() == {0} and report.unscanned == []


def test_a_mail_with_an_8bit_latin1_part_is_read(tmp_path: Path) -> None:
    """Not UTF-8 as a whole (its part says its charset): still a mail, each part decoded by its charset."""
    body = f"Grüße von {NAME}\r\n".encode("latin-1")
    data = (
        b"From: desk@example.org\r\nTo: archive@example.org\r\nSubject: hi\r\nMIME-Version: 1.0\r\n"
        b"Content-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: 8bit\r\n\r\n" + body
    )
    assert _scan(tmp_path, {"mail": data}) == ({0}, [])


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    who=st.sampled_from(NAMES),
    cuts=st.lists(st.integers(1, 30), max_size=6),
    kerns=st.lists(st.integers(-100, 100), max_size=7),
    container=st.sampled_from(["", "zip", "gzip", "7z"]),
)
def test_generated_tj_splits_and_kerning(
    tmp_path: Path, who: tuple[str, str], cuts: list[int], kerns: list[int], container: str
) -> None:
    """A PDF's TJ array cut anywhere (inside words too), each piece kerned as a font kerns letters (within
    a tenth of an em; pypdf reads a wider gap as a space): the name is found."""
    data = docs.pdf_tj(who[0], who[1], tuple(cuts), tuple(kerns))
    if container:
        data = CONTAINERS[container](data)
    folder = tmp_path / os.urandom(6).hex()
    folder.mkdir()
    (folder / "scan.pdf").write_bytes(data)
    report = scan_views(folder, [("identifier", f"{who[0]} {who[1]}")])
    assert report.found_indexes() == {0} and report.unscanned == [], (cuts, kerns)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(who=st.sampled_from(NAMES), cuts=st.lists(st.integers(1, 30), max_size=6), zipped=st.booleans())
def test_generated_docx_runs(tmp_path: Path, who: tuple[str, str], cuts: list[int], zipped: bool) -> None:
    """A DOCX paragraph whose runs cut the name anywhere (inside words too, bold every other run): found."""
    data = docs.docx(who[0], who[1], tuple(cuts))
    folder = tmp_path / os.urandom(6).hex()
    folder.mkdir()
    (folder / "file.docx").write_bytes(CONTAINERS["zip"](data) if zipped else data)
    report = scan_views(folder, [("identifier", f"{who[0]} {who[1]}")])
    assert report.found_indexes() == {0} and report.unscanned == [], cuts
