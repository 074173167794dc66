"""A SQLite file's freed pages are read (issue 33 family 4): a value deleted without `secure_delete`
stays in the freelist, and a long one is split over overflow pages by 4-byte page pointers. The probes
join freed overflow chains with the pointers removed, so the subject is found whole."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from probes.views import scan_views

NEEDLES = [("identifier:email", "jana.weiss@post.example"), ("identifier:name", "Jana Weißmüller")]


def _db_with_freed(path: Path, value: str, filler: int, tail: int | None = None) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA secure_delete = OFF")
    conn.execute("PRAGMA page_size = 1024")
    conn.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute(
        "INSERT INTO notes(body) VALUES (?)",
        ("x" * filler + " " + value + " " + "y" * (filler if tail is None else tail),),
    )
    conn.execute("INSERT INTO notes(body) VALUES ('stays')")
    conn.commit()
    conn.execute("DELETE FROM notes WHERE body != 'stays'")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("filler", [0, 1000, 3000])
def test_a_deleted_value_in_freed_pages_is_found(tmp_path: Path, filler: int) -> None:
    _db_with_freed(tmp_path / "left-behind.db", "note for jana.weiss@post.example", filler)
    raw = (tmp_path / "left-behind.db").read_bytes()
    assert b"jana.weiss@post.example" in raw or filler > 0  # the value is in the file's bytes, maybe split
    assert 0 in scan_views(tmp_path, NEEDLES).found


def test_a_value_split_by_a_page_pointer_is_found(tmp_path: Path) -> None:
    """Placements where the name straddles two freed overflow pages in the file's bytes (found by building
    the database with the name at every offset of a page and keeping those where its bytes are not whole):
    each is found, once the pages are joined without their pointers."""
    name = "Jana Weißmüller".encode()
    split = 0
    for filler in range(1100, 2200, 3):
        folder = tmp_path / str(filler)
        folder.mkdir()
        _db_with_freed(folder / "x.db", "Jana Weißmüller wrote", filler, tail=3300 - filler)  # one length
        raw = (folder / "x.db").read_bytes()
        if name in raw:
            continue
        split += 1
        assert 1 in scan_views(folder, NEEDLES).found, filler
    assert split >= 2  # the loop did place the name across a page pointer


def test_a_database_without_the_subject_has_nothing_found(tmp_path: Path) -> None:
    _db_with_freed(tmp_path / "other.db", "note for jan.weiss@post.example", 2000)
    assert not scan_views(tmp_path, NEEDLES).found


def test_a_short_value_glued_to_its_neighbour_columns_is_read_as_its_own_text(tmp_path: Path) -> None:
    """On a page SQLite writes a row's columns with nothing between them: `summary` + an id + the text make
    one run of letters in the file's bytes, where no word is the subject's. Each value is read through SQL."""
    conn = sqlite3.connect(tmp_path / "store.db")
    conn.execute("CREATE TABLE frames(kind TEXT, subject TEXT, content TEXT)")
    conn.execute("INSERT INTO frames VALUES ('summary', 'usr5', 'Jana Weißmüller called')")
    conn.execute("INSERT INTO frames VALUES ('summary', 'usr6', 'ask jana.weiss@post.example')")
    conn.commit()
    conn.close()
    raw = (tmp_path / "store.db").read_bytes()
    assert b"usr5Jana" in raw and b"usr6ask" in raw  # glued in the bytes
    assert {0, 1} <= set(scan_views(tmp_path, NEEDLES).found)
