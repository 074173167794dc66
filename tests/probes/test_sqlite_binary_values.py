"""A SQLite store's binary values (Merkle hashes, salts, vectors) are not documents nobody read.

CI found it: the generated red team's windows ended `unscanned_content` at random, for every request of
the window. Each read of a short SQL value was triggered by bytes that only looked like an escape (a
32-byte audit hash holding `=3A=2F`, a salt holding `%41%42`), and the value, read as a whole payload of
its own, was then declared `unidentified-format`. About one in a thousand random 32-byte hashes holds
such a trigger; a window of 45 requests keeps over a thousand. A value inside a SQLite file is part of a
file that is identified and read (its pages raw, its values through SQL): a value that proves to be no
format is matched as text, never declared. A value that IS a document (a gzip, a PDF) is still read, and
what it does not let us read is still declared."""

from __future__ import annotations

import gzip
import hashlib
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from probes.views import scan_views
from tests.budget import examples

NEEDLES = [("identifier:email", "jana.weiss@post.example"), ("identifier:name", "Jana Weißmüller")]

TRIGGER_SHAPES = [b"=3A=2F", b"%41%42", b"7=3A 9", b"&#x41;", b"\\u0041\\u0042", b"\xef\xbc\xa1" * 3, b"&amp;"]
"""Byte runs the probes' generic triggers fire on (escapes, full-width letters), as random bytes hold them."""


def _store(path: Path, blobs: list[bytes], texts: tuple[str, ...] | list[str] = ()) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE audit_merkle(idx INTEGER PRIMARY KEY, hash BLOB)")
    conn.execute("CREATE TABLE frames(id INTEGER PRIMARY KEY, content TEXT)")
    conn.executemany("INSERT INTO audit_merkle(hash) VALUES (?)", [(b,) for b in blobs])
    conn.executemany("INSERT INTO frames(content) VALUES (?)", [(t,) for t in texts])
    conn.commit()
    conn.close()


def test_a_hash_that_looks_like_an_escape_is_not_an_unread_document(tmp_path: Path) -> None:
    blob = hashlib.sha256(b"a").digest()[:13] + b"=3A=2F" + hashlib.sha256(b"b").digest()[:13]
    _store(tmp_path / "memory.db", [hashlib.sha256(bytes([i])).digest() for i in range(50)] + [blob])
    report = scan_views(tmp_path, NEEDLES)
    assert report.unscanned == [] and not report.found


def test_a_document_held_as_a_value_is_still_read(tmp_path: Path) -> None:
    """The positive control: a gzip member stored as a value, with the subject in it, is found."""
    _store(tmp_path / "memory.db", [gzip.compress(b"note for jana.weiss@post.example, urgent")])
    assert 0 in scan_views(tmp_path, NEEDLES).found


@settings(max_examples=examples(60), deadline=None)
@given(
    noise=st.lists(st.binary(min_size=8, max_size=64), min_size=1, max_size=30),
    shape=st.sampled_from(TRIGGER_SHAPES),
    at=st.integers(0, 64),
    which=st.integers(0, 29),
)
def test_binary_values_with_trigger_shaped_bytes_declare_nothing(
    noise: list[bytes], shape: bytes, at: int, which: int
) -> None:
    """The class: any binary value, with any trigger-shaped run anywhere in it, beside the subject's own
    escaped text. Oracle: nothing is declared (no file here is unread), and the subject is still found."""
    i = which % len(noise)
    noise[i] = noise[i][:at] + shape + noise[i][at:]
    with tempfile.TemporaryDirectory() as d:
        _store(Path(d) / "memory.db", noise, ["tool said jana.weiss=40post.example=2E"])
        report = scan_views(Path(d), NEEDLES)
    assert report.unscanned == [] and 0 in report.found
