"""The red team's judge (tests/redteam_documents_run.py) discounts a two-letter name read by chance in a
database's random bytes, and only that: a name written as text in the same file still counts."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.oracle import Hit, Scan
from tests.oracle33.match import Person33
from tests.oracle33.scan import scan_tree33
from tests.redteam_documents_plants import Scenario
from tests.redteam_documents_run import _beyond_rule_3_3

AL_MA = Person33("usr-1", given="Ma", family="Al", name="Al Ma")


def left_after_judging(root: Path, data: bytes, person: Person33 = AL_MA) -> list[str]:
    """The files the judge still holds against `person` when `store/memory.db` holds `data`."""
    (root / "store").mkdir(parents=True, exist_ok=True)
    (root / "store" / "memory.db").write_bytes(data)
    scan = scan_tree33(root, [person])
    left = _beyond_rule_3_3(Scenario(1, "glued-name", "en_US", person), scan, root)
    return sorted({h.file for h in left.hits if h.kind == "name"})


def test_the_name_split_by_binary_bytes_is_noise(tmp_path: Path) -> None:
    noise = os.urandom(64) + b"\x93al\x01\xfe ma\x00" + os.urandom(64)
    assert scan_tree33_names(tmp_path, noise), "the oracle must read the raw name for this test to mean anything"
    assert left_after_judging(tmp_path, noise) == []


def test_the_name_in_a_run_of_text_counts(tmp_path: Path) -> None:
    text = os.urandom(64) + b"\x05\x17Hello, this is Al Ma: my order 3 is late.\x00" + os.urandom(64)
    assert left_after_judging(tmp_path, text) == ["store/memory.db"]


def test_the_name_escaped_in_a_run_of_text_counts(tmp_path: Path) -> None:
    """A percent- or JSON-escaped name is text too: read in the run's own views, not discounted."""
    for escaped in (b"q=Al%20Ma&x=1", b'{"n":"Al\\u0020Ma"}', b"Al&#32;Ma"):
        data = os.urandom(64) + b"\x00" + escaped + b"\x00" + os.urandom(64)
        assert left_after_judging(tmp_path, data) == ["store/memory.db"], escaped


@pytest.mark.slow  # the oracle reads 100 kB of random bytes in every view twice: about 45 s
def test_random_bytes_that_read_as_the_name_in_any_unescaped_view_are_noise(tmp_path: Path) -> None:
    """Seed 15 of random.Random: 100 kB whose latin-1 reading, and its JSON, percent, QP, form and HTML
    views, hold 'al y 7 i ma' (found by drawing random files, as a database's vectors and hashes are)."""
    import random

    data = random.Random(15).randbytes(100_000)
    assert scan_tree33_names(tmp_path, data)
    assert left_after_judging(tmp_path, data) == []


def test_a_longer_name_is_never_discounted(tmp_path: Path) -> None:
    person = Person33("usr-2", given="Anna", family="Jo", name="Jo Anna")
    noise = b"\x93jo\x01\xfe anna\x00"
    assert left_after_judging(tmp_path, noise, person) == ["store/memory.db"]


def scan_tree33_names(root: Path, data: bytes) -> bool:
    (root / "raw").mkdir(exist_ok=True)
    (root / "raw" / "f.bin").write_bytes(data)
    found = any(h.kind == "name" for h in scan_tree33(root / "raw", [AL_MA]).hits)
    (root / "raw" / "f.bin").unlink()
    return found


@settings(max_examples=25, deadline=None, database=None)
@given(
    before=st.binary(max_size=200),
    after=st.binary(max_size=200),
    sentence=st.sampled_from(
        ["this is Al Ma here", "Al Ma, accounts", "signed: Ma Al (desk)", "dear Al  Ma,", "Al Ma", "MA AL"]
    ),
)
def test_any_text_naming_the_subject_survives_the_discount(before: bytes, after: bytes, sentence: str) -> None:
    """Whatever binary surrounds it, text naming the subject is a find: a sentence, or the name alone."""
    with tempfile.TemporaryDirectory() as tmp:
        data = before + b"\x00" + sentence.encode() + b"\x00" + after
        assert left_after_judging(Path(tmp), data) == ["store/memory.db"]


def sqlite_with(root: Path, rows: list[bytes | str]) -> bytes:
    """The bytes of a SQLite database whose table `audit_merkle` holds `rows` (a blob or a text each)."""
    import apsw

    path = root / "built.db"
    path.unlink(missing_ok=True)
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE audit_merkle(seq INTEGER PRIMARY KEY, node)")
    for row in rows:
        conn.execute("INSERT INTO audit_merkle(node) VALUES (?)", (row,))
    conn.close()
    data = path.read_bytes()
    path.unlink()
    return data


def test_a_hash_blob_in_a_database_table_that_reads_as_the_name_is_noise(tmp_path: Path) -> None:
    """CI (xdist run, 2026-12-05): 'na li' read in `sqlite:audit_merkle>latin-1` of store/memory.db, a
    Merkle node's random bytes. A value's blob read as latin-1 is as much noise as the file's raw bytes."""
    blob = os.urandom(20) + b"\x93Al\x01\xfe ma\x00" + os.urandom(11)
    data = sqlite_with(tmp_path, [os.urandom(32), blob, os.urandom(32)])
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "memory.db").write_bytes(data)
    views = {h.view for h in scan_tree33(tmp_path, [AL_MA]).hits if h.kind == "name"}
    assert any(v.startswith("sqlite:audit_merkle") for v in views), (
        views
    )  # the oracle reads it: the test means something
    assert left_after_judging(tmp_path, data) == []


def test_the_name_as_text_in_a_database_table_counts(tmp_path: Path) -> None:
    data = sqlite_with(tmp_path, [os.urandom(32), "note: Al Ma called about order 7", os.urandom(32)])
    assert left_after_judging(tmp_path, data) == ["store/memory.db"]


@pytest.mark.parametrize("raw", ["utf-8", "latin-1", "nul-stripped", "utf-16-le@1", "utf-32-be@2"])
def test_a_name_read_in_any_raw_decoding_of_a_compressed_pack_is_noise(raw: str) -> None:
    """CI-size run (2026-12-05, shard 2): 'li d a ہy ma' read in the `utf-8` view of a proof.tar.gz's
    compressed bytes, for a subject Li Ma. The pack's members are read decompressed (`gzip@0>...`), and
    those readings still count; a raw decoding of deflate output is chance (latin-1 alone was discounted)."""
    pack = "evidence/erasure/req-d-002/proof.tar.gz"
    scan = Scan(
        [
            Hit(pack, raw, "name", "al d a y ma", AL_MA.id),
            Hit(pack, "gzip@0>tar:req-d-002/manifest.json>utf-8", "name", "al ma", AL_MA.id),
        ]
    )
    left = _beyond_rule_3_3(Scenario(1, "glued-name", "en_US", AL_MA), scan)
    assert [h.view for h in left.hits] == ["gzip@0>tar:req-d-002/manifest.json>utf-8"]
