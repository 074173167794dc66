"""A store folder holding one planted text, for the decoded views' tests (tests/probes/test_views_*.py):
in a plain file, or as a SQLite value, which SQLite writes glued on its page to the column before it."""

from __future__ import annotations

import shutil
from pathlib import Path

from erasure.sqlite import connect
from erasure.subject import Subject
from probes.identity import spellings
from probes.views import scan_views


def planted(tmp: Path, text: str, where: str, *, line: str = "{}", codec: str = "utf-8") -> Path:
    """A fresh folder `tmp/store` holding `text`: `where` 'file', inside `line` in `notes.txt` encoded in
    `codec`; 'sqlite', the whole value of a row of `app.db` after a bystander's id."""
    folder = tmp / "store"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    if where == "file":
        (folder / "notes.txt").write_bytes(line.format(text).encode(codec))
    else:
        conn = connect(folder / "app.db", journal_mode="delete")
        conn.execute("CREATE TABLE notes(owner TEXT, body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('byst-0001', ?)", (text,))
        conn.close()
    return folder


def found_in_views(tmp: Path, text: str, where: str, subject: Subject, kind: str) -> bool:
    """Whether the decoded views find `subject`'s `kind` of identifier (its spellings) in `text` planted in a
    bystander's note (`planted`)."""
    store = planted(tmp, text, where, line="Bystander's note: {} tomorrow.\n")
    needles = [(f"identifier:{k}", v) for k, v in spellings(subject, [subject.id]) if k == kind]
    return bool(scan_views(store, needles).found)
