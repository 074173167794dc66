"""Default deny (`probes.views` over `probes.documents`): what is not positively identified and read is
declared (`Unscanned`: digest, size, reason), never certified, and never silent; there is no entropy
threshold and no "looks like text". The files the supported store kinds write themselves (SQLite and its
WAL, journal and shared-memory files, Chroma's HNSW segment files and id map) stay identified."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import os
import sqlite3
import zipfile
from collections.abc import Callable
from pathlib import Path

import brotli
import py7zr
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import probes.view_payloads as view_payloads
import probes.views as views
from probes.documents import identify, images
from probes.documents.formats import SQLITE, SQLITE_JOURNAL, SQLITE_WAL
from probes.views import scan_views
from tests import documents_fixtures as docs
from tests.documents_fixtures import CONTAINERS, NEEDLES


def _declared(tmp: Path, data: bytes) -> list[tuple[str, int, str, str]]:
    (tmp / "blobs").mkdir(parents=True, exist_ok=True)
    (tmp / "blobs" / "x").write_bytes(data)
    report = scan_views(tmp, NEEDLES)
    return [(u.reason, u.size, u.sha256, u.folder) for u in report.unscanned]


def _whole(data: bytes, reason: str) -> list[tuple[str, int, str, str]]:
    return [(reason, len(data), hashlib.sha256(data).hexdigest(), "blobs")]


def test_random_bytes_of_one_kib_are_declared(tmp_path: Path) -> None:
    data = os.urandom(1024)
    assert _declared(tmp_path, data) == _whole(data, "unidentified-format")


def test_a_small_high_entropy_file_under_the_old_threshold_is_declared(tmp_path: Path) -> None:
    """The old views declared unknown bytes only from 4 KiB up and at 7.9 bits per byte or more."""
    data = bytes(range(256)) * 12  # 3 KiB, 8 bits per byte
    assert _declared(tmp_path, data) == _whole(data, "unidentified-format")
    low = b"\x01\x02\x03\xfe" * 600  # low entropy, not text either
    assert _declared(tmp_path / "low", low) == _whole(low, "unidentified-format")


def test_brotli_of_what_nothing_identifies_is_declared(tmp_path: Path) -> None:
    data = bytes(brotli.compress(os.urandom(2000)))
    assert _declared(tmp_path, data) == _whole(data, "unidentified-format")


def test_an_image_without_tesseract_is_declared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no `tesseract` on PATH a BMP (and any image) is `image-not-read`."""
    data = docs.bmp()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    images.tesseract_present.cache_clear()
    try:
        assert _declared(tmp_path, data) == _whole(data, "image-not-read")
    finally:
        monkeypatch.undo()
        images.tesseract_present.cache_clear()


def test_an_image_ocr_cannot_open_is_declared(tmp_path: Path) -> None:
    data = b"\x89PNG\r\n\x1a\n" + os.urandom(2000)
    assert _declared(tmp_path, data) == _whole(data, "image-not-read")


def _encrypted_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("a.txt", b"hello")
    data = bytearray(buf.getvalue())
    data[6] |= 1  # the local header's "encrypted" flag
    data[data.rfind(b"PK\x01\x02") + 8] |= 1  # and the central directory's
    return bytes(data)


def _encrypted_7z() -> bytes:
    buf = io.BytesIO()
    with py7zr.SevenZipFile(buf, "w", password="secret") as z:
        z.writestr(docs.html(), "page.html")
    return buf.getvalue()


def _encrypted_pdf() -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(docs.pdf_tj())))
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="AES-128")
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


UNREAD: dict[str, tuple[Callable[[], bytes], str]] = {
    "random": (lambda: os.urandom(1024), "unidentified-format"),
    "ole-compound": (lambda: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + os.urandom(1500), "unidentified-format"),
    "latin-1-text": (lambda: "Café Müller, Straße ".encode("latin-1") * 20, "unidentified-format"),
    "png-noise": (lambda: b"\x89PNG\r\n\x1a\n" + os.urandom(600), "image-not-read"),
    "encrypted-zip": (_encrypted_zip, "encrypted-archive"),
    "encrypted-7z": (_encrypted_7z, "encrypted-archive"),
    "encrypted-pdf": (_encrypted_pdf, "encrypted-pdf"),
    "corrupt-gzip": (lambda: b"\x1f\x8b\x08\x00" + os.urandom(500), "container-corrupt"),
    "corrupt-zstd": (lambda: b"\x28\xb5\x2f\xfd" + os.urandom(500), "container-corrupt"),
    "corrupt-lz4": (lambda: b"\x04\x22\x4d\x18" + os.urandom(500), "container-corrupt"),
    "corrupt-bz2": (lambda: bz2.compress(b"x" * 1000)[:40], "container-corrupt"),
    "corrupt-7z": (lambda: b"7z\xbc\xaf\x27\x1c" + os.urandom(500), "container-corrupt"),
    "not-a-pdf": (lambda: b"%PDF-1.7 scanned form\n" + os.urandom(800), "container-corrupt"),
}
"""Every kind of payload no reader reads, and the reason it is declared with."""


@pytest.mark.parametrize("kind", sorted(UNREAD))
def test_each_unread_kind_is_declared_with_its_reason(tmp_path: Path, kind: str) -> None:
    make, reason = UNREAD[kind]
    data = make()
    assert _declared(tmp_path, data) == _whole(data, reason), kind


def test_an_unread_member_is_declared_with_the_members_digest(tmp_path: Path) -> None:
    member = os.urandom(700)
    declared = _declared(tmp_path, CONTAINERS["zip"](member))
    assert declared == [("unidentified-format", 700, hashlib.sha256(member).hexdigest(), "blobs")]


def test_a_container_past_the_depth_limit_is_declared(tmp_path: Path) -> None:
    data = docs.html()
    for _ in range(views.MAX_DEPTH + 2):
        data = gzip.compress(data)
    report = scan_views(tmp_path, NEEDLES) if (tmp_path / "deep").write_bytes(data) else None
    assert report is not None and 0 not in report.found
    assert [u.reason for u in report.unscanned] == ["container-too-deep"]


def test_a_member_past_the_size_limit_is_declared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(view_payloads, "MAX_MEMBER", 4096)
    for name in ("gzip", "zstd", "tar", "7z"):
        data = CONTAINERS[name](docs.html() + b" " * 10_000)
        assert [r for r, *_ in _declared(tmp_path / name, data)] == ["container-too-large"], name


def test_text_that_stops_decoding_in_a_large_file_is_declared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large file read in chunks is plain text only if it decodes to its end."""
    monkeypatch.setattr(views, "CHUNK", 1 << 16)
    data = b"plain words " * 20_000 + b"\xff\xfe\x00binary" + b"more words " * 100
    assert [r for r, *_ in _declared(tmp_path, data)] == ["unidentified-format"]
    assert _declared(tmp_path / "clean", b"plain words " * 20_000) == []


UNREAD_CHEAP = sorted(set(UNREAD) - {"encrypted-pdf", "encrypted-7z"})


@settings(max_examples=50, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(UNREAD_CHEAP),
    nesting=st.lists(st.sampled_from(["gzip", "zstd", "lz4", "zip", "tar", "7z", "xz"]), max_size=2),
    beside=st.sampled_from(["", "html", "docx"]),
)
def test_generated_nothing_unread_is_silent(tmp_path: Path, kind: str, nesting: list[str], beside: str) -> None:
    """Oracle: what was planted. An unread payload, inside up to two containers and beside readable
    files, is declared with its reason; the readable files beside it are not."""
    make, reason = UNREAD[kind]
    data = make()
    for container in nesting:
        data = CONTAINERS[container](data)
    folder = tmp_path / os.urandom(6).hex()
    folder.mkdir()
    (folder / "item").write_bytes(data)
    if beside:
        (folder / "readable").write_bytes(docs.DOCUMENTS[beside](docs.GIVEN, docs.FAMILY))
    report = scan_views(folder, NEEDLES)
    assert [u.reason for u in report.unscanned] == [reason], (kind, nesting)
    assert (0 in report.found) is bool(beside)


# --- the store kinds' own files stay identified ------------------------------------------------------------


def test_sqlite_magics_are_identified() -> None:
    for head, kind in [
        (b"SQLite format 3\x00", SQLITE),
        (b"\x37\x7f\x06\x82", SQLITE_WAL),
        (b"\x37\x7f\x06\x83", SQLITE_WAL),
        (b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7", SQLITE_JOURNAL),
    ]:
        assert identify(head + os.urandom(600)) == kind


def test_sqlite_files_with_their_wal_and_shared_memory_are_identified(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "db.sqlite")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t(x)")
    conn.executemany("INSERT INTO t VALUES (?)", [(os.urandom(3000),) for _ in range(20)])
    conn.commit()
    try:
        assert {p.name for p in tmp_path.iterdir()} == {"db.sqlite", "db.sqlite-wal", "db.sqlite-shm"}
        assert scan_views(tmp_path, NEEDLES).unscanned == []
    finally:
        conn.close()


@pytest.mark.parametrize("mode", ["PERSIST", "DELETE"])
def test_a_rollback_journal_is_identified(tmp_path: Path, mode: str) -> None:
    """A journal whose header is still (in flight) or again (`journal_mode=PERSIST`) zeroed is identified
    by its database beside it and its page records (one with its magic, by the magic)."""
    conn = sqlite3.connect(tmp_path / "db.sqlite")
    conn.execute(f"PRAGMA journal_mode={mode}")
    conn.execute("CREATE TABLE t(x)")
    conn.executemany("INSERT INTO t VALUES (?)", [(f"row {i} " * 200,) for i in range(20)])
    conn.commit()
    if mode == "DELETE":  # a transaction in flight: its journal is there, with its magic
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE t SET x = 'changed'")
        journal = (tmp_path / "db.sqlite-journal").read_bytes()
        conn.rollback()
        (tmp_path / "db.sqlite-journal").write_bytes(journal)
    else:
        conn.execute("UPDATE t SET x = 'changed'")
        conn.commit()
    conn.close()
    assert (tmp_path / "db.sqlite-journal").read_bytes()[:8] == b"\x00" * 8  # magic written at commit only
    assert scan_views(tmp_path, NEEDLES).unscanned == []
    (tmp_path / "other.bin").write_bytes(b"\x00" * 28 + os.urandom(1000))  # zeros, but no database beside it
    assert [u.reason for u in scan_views(tmp_path, NEEDLES).unscanned] == ["unidentified-format"]


@pytest.fixture(scope="module")
def chroma_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.chroma_fixtures import build_memory

    root = tmp_path_factory.mktemp("chroma")
    build_memory(root, per_collection=150)
    return root


def test_chroma_segment_files_are_identified_by_their_layout(chroma_dir: Path) -> None:
    names = {p.name for p in chroma_dir.rglob("*") if p.is_file()}
    assert {"header.bin", "data_level0.bin", "length.bin", "link_lists.bin", "index_metadata.pickle"} <= names
    assert scan_views(chroma_dir, NEEDLES).unscanned == []


def test_a_segment_file_beside_no_valid_header_is_declared(chroma_dir: Path, tmp_path: Path) -> None:
    """The layout is checked against the content: the same names, with a header that is not hnswlib's,
    identify nothing."""
    folder = max((p.parent for p in chroma_dir.rglob("header.bin")), key=lambda f: (f / "length.bin").stat().st_size)
    copy = tmp_path / "segment"
    copy.mkdir()
    for p in folder.iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    (copy / "header.bin").write_bytes(os.urandom(100))
    reasons = sorted(u.reason for u in scan_views(copy, NEEDLES).unscanned)
    # A file whose bytes are all below 0x80 (a preallocated list, mostly NULs) decodes as UTF-8: it is read
    # whole as text; every other one is declared.
    binary = [
        n for n in ("data_level0.bin", "length.bin", "link_lists.bin") if identify((copy / n).read_bytes()) is None
    ]
    assert "data_level0.bin" in binary
    assert reasons == ["unidentified-format"] * (len(binary) + 1)


def test_a_postgresql_data_directory_is_identified_by_its_layout() -> None:
    """A live cluster's files (relations, WAL, SLRU, control and state files, configuration and log):
    nothing declared; a relation file whose pages are not PostgreSQL's is."""
    from tests.pg_cluster import cluster, debian_bindir, embedded_bindir

    bindir = embedded_bindir() or debian_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL binaries (make postgres)")
    with cluster(bindir, wal_segsize_mb=1) as c:
        c.psql(
            "CREATE TABLE notes(id int, body text); INSERT INTO notes SELECT g, 'Note: Ilse Vandermeer wrote ' || g"
            " FROM generate_series(1, 3000) g; CHECKPOINT;"
        )
        report = scan_views(c.data, NEEDLES)
        assert report.files > 500
        assert report.unscanned == []
        assert 0 in report.found  # the tuples' text, read raw from the relation's pages
        oid = c.psql("SELECT pg_relation_filepath('notes')").strip()
        relation = c.data / oid
        data = bytearray(relation.read_bytes())
        data[12:20] = os.urandom(8)  # the first page's header: not PostgreSQL's
        relation.write_bytes(bytes(data))
        assert [u.reason for u in scan_views(c.data, NEEDLES).unscanned] == ["unidentified-format"]


def test_an_image_in_a_base64_run_is_declared_when_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A base64 run is a guess; one that decodes to a positively identified image is an attachment, and
    not read (no tesseract) it is declared."""
    import base64

    image = docs.png()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    images.tesseract_present.cache_clear()
    try:
        data = b'{"attachment": "' + base64.b64encode(image) + b'"}'
        declared = _declared(tmp_path, data)
    finally:
        monkeypatch.undo()
        images.tesseract_present.cache_clear()
    assert declared == [("image-not-read", len(image), hashlib.sha256(image).hexdigest(), "blobs")]


def test_a_large_file_of_no_known_format_is_declared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(views, "CHUNK", 1 << 16)
    data = os.urandom(200_000)
    assert _declared(tmp_path, data) == _whole(data, "unidentified-format")


REASONS = {
    "unidentified-format",
    "image-not-read",
    "encrypted-archive",
    "encrypted-pdf",
    "container-corrupt",
    "container-too-large",
    "container-too-deep",
    "pdf-stream-unreadable-filter",
    "parse-error",
}


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fmt=st.sampled_from(sorted(set(docs.DOCUMENTS) - {"docx", "pdf-fpdf2"})),
    container=st.sampled_from(["", *sorted(CONTAINERS)]),
    cuts=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=6),
    truncate=st.floats(0.2, 1.0),
)
def test_generated_damaged_files_never_fail_the_scan(
    tmp_path: Path, fmt: str, container: str, cuts: list[tuple[float, int]], truncate: float
) -> None:
    """Real files with bytes overwritten and cut short: the scan never raises, and whatever it does not
    read it declares with one of the known reasons."""
    data = bytearray(docs.DOCUMENTS[fmt](docs.GIVEN, docs.FAMILY))
    if container:
        data = bytearray(CONTAINERS[container](bytes(data)))
    for where, byte in cuts:
        data[min(len(data) - 1, int(where * len(data)))] = byte
    folder = tmp_path / os.urandom(6).hex()
    folder.mkdir()
    (folder / "item").write_bytes(bytes(data[: max(1, int(truncate * len(data)))]))
    report = scan_views(folder, NEEDLES)
    assert {u.reason for u in report.unscanned} <= REASONS
