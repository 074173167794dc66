"""Ingest attachments: an attachment is a regular file inside the JSONL file's folder after resolving
symlinks. Anything else (an absolute path, `../`, a symlink out of the folder, a process's files
under /proc, a directory, a FIFO) rejects the whole file with exit 2 and writes nothing. Blob copies
are private: files 0600, their folders 0700."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from erasure.config import Home
from erasure.errors import InputError
from memory.items import read_jsonl
from tests.cli_fixtures import erasure, snapshot

ALICE = {"id": "user-0001", "email": "alice@example.org", "name": "Alice Example"}
SECRET = "contents-of-a-file-outside-the-folder"


def blob_files(home: Home) -> list[Path]:
    return (
        [p for p in (home.store_dir / "blobs").rglob("*") if p.is_file()] if (home.store_dir / "blobs").exists() else []
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """tmp/items/ holds the JSONL file and its attachments; tmp/secret is outside it."""
    items = tmp_path / "items"
    (items / "files").mkdir(parents=True)
    (items / "files" / "receipt.txt").write_text("a receipt")
    (tmp_path / "secret").write_text(SECRET)
    return items


@pytest.fixture
def store_home(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    res = erasure("store", "init", "--home", str(home.root))
    assert res.code == 0, res.err
    return home


def _line(ref: str, attachments: list[str]) -> str:
    return json.dumps(
        {"source": "chat", "source_ref": ref, "subject": ALICE, "content": "About billing.", "attachments": attachments}
    )


def _hostile(folder: Path) -> dict[str, str]:
    """name -> the attachment string a hostile line carries (symlinks are made here)."""
    outside = folder.parent / "secret"
    (folder / "files" / "link-out").symlink_to(outside)
    (folder / "files" / "link-environ").symlink_to("/proc/self/environ")
    (folder / "files" / "link-dir").symlink_to(folder.parent)
    (folder / "loop-a").symlink_to(folder / "loop-b")
    (folder / "loop-b").symlink_to(folder / "loop-a")
    (folder / "files" / "sub").mkdir()
    os.mkfifo(folder / "files" / "fifo")
    return {
        "absolute path to the password file": "/etc/passwd",
        "dot-dot out of the folder": "../secret",
        "dot-dot that comes back through the parent": f"../{folder.name}/../secret",
        "symlink out of the folder": "files/link-out",
        "symlink to the process environment": "files/link-environ",
        "the process environment under proc": "/proc/self/environ",
        "a file through a symlinked folder": "files/link-dir/secret",
        "a directory": "files/sub",
        "the folder itself": ".",
        "a fifo": "files/fifo",
        "a symlink loop": "loop-a",
        "a missing file": "files/missing.txt",
        "a NUL byte": "files/receipt.txt\x00.pdf",
    }


HOSTILE = [
    "absolute path to the password file",
    "dot-dot out of the folder",
    "dot-dot that comes back through the parent",
    "symlink out of the folder",
    "symlink to the process environment",
    "the process environment under proc",
    "a file through a symlinked folder",
    "a directory",
    "the folder itself",
    "a fifo",
    "a symlink loop",
    "a missing file",
    "a NUL byte",
]


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_attachment_rejects_the_whole_file_and_writes_nothing(
    store_home: Home, folder: Path, case: str
) -> None:
    attachment = _hostile(folder)[case]
    path = folder / "items.jsonl"
    path.write_text(_line("conv-1", ["files/receipt.txt"]) + "\n" + _line("conv-2", [attachment]) + "\n")
    before = snapshot(store_home.root)

    res = erasure("ingest", str(path), "--home", str(store_home.root))

    assert res.code == 2, res
    assert res.err.startswith(f"error: {path}:2: attachments.0: "), res.err
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err
    assert SECRET not in res.out + res.err and "alice" not in (res.out + res.err).lower()
    assert snapshot(store_home.root) == before
    assert blob_files(store_home) == []


@pytest.mark.parametrize("case", HOSTILE)
def test_read_jsonl_refuses_a_hostile_attachment(folder: Path, case: str) -> None:
    attachment = _hostile(folder)[case]
    path = folder / "items.jsonl"
    path.write_text(_line("conv-1", [attachment]) + "\n")
    with pytest.raises(InputError, match=rf"^{path}:1: attachments\.0: "):
        read_jsonl(path)


def test_a_symlink_or_an_absolute_path_that_stays_inside_the_folder_is_an_attachment(folder: Path) -> None:
    (folder / "alias.txt").symlink_to(folder / "files" / "receipt.txt")
    path = folder / "items.jsonl"
    path.write_text(
        _line("conv-1", ["alias.txt", "./files/../files/receipt.txt", str(folder / "files" / "receipt.txt")]) + "\n"
    )
    [item] = read_jsonl(path)
    real = str((folder / "files" / "receipt.txt").resolve())
    assert item.attachments == [real, real, real]


def test_blob_copies_are_private(store_home: Home, folder: Path) -> None:
    path = folder / "items.jsonl"
    path.write_text(_line("conv-1", ["files/receipt.txt"]) + "\n")
    res = erasure("ingest", str(path), "--home", str(store_home.root), "--json")
    assert res.code == 0, res.err
    copies = blob_files(store_home)
    assert len(copies) == 2  # primary and replica
    for copy in copies:
        assert copy.read_text() == "a receipt"
        assert stat.S_IMODE(copy.stat().st_mode) == 0o600, copy
        for d in (copy.parent, copy.parent.parent, copy.parent.parent.parent):  # ab/, primary/, blobs/
            assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


@pytest.mark.parametrize("swap", ["symlink out", "folder symlinked out"])
def test_an_attachment_swapped_after_the_check_is_refused_and_nothing_is_written(
    store_home: Home, folder: Path, swap: str
) -> None:
    from memory.ingest import ingest
    from memory.schema import open_store
    from memory.store_census import table_counts

    path = folder / "items.jsonl"
    path.write_text(_line("conv-1", ["files/receipt.txt"]) + "\n")
    items = read_jsonl(path)  # checked: a regular file inside the folder
    receipt = folder / "files" / "receipt.txt"
    if swap == "symlink out":
        receipt.unlink()
        receipt.symlink_to(folder.parent / "secret")
    else:
        (folder / "files").rename(folder / "files-old")
        (folder.parent / "elsewhere").mkdir()
        (folder.parent / "elsewhere" / "receipt.txt").write_text(SECRET)
        (folder / "files").symlink_to(folder.parent / "elsewhere")
    conn = open_store(store_home.store_dir)
    try:
        with pytest.raises(InputError, match=r"attachments\.0"):
            ingest(conn, store_home.store_dir, items)
        assert all(v == 0 for v in table_counts(conn).values())
    finally:
        conn.close()
    assert blob_files(store_home) == []
