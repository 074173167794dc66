"""A hard link inside the JSONL file's folder is refused like a symlink out of it (issue 14, second
half; issue 23): a hard link has no "real" path to check, its other name can be any file of the same
file system (another user's), so an attachment must be a regular file with one link. Through the real
`erasure ingest`: exit 2, one line naming the field, and nothing written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from erasure.config import Home
from erasure.errors import InputError
from memory.blobs import BlobData, open_source
from tests.cli_fixtures import erasure, snapshot

NOBODY = 65534
ALICE = {"id": "user-0001", "email": "alice@example.org", "name": "Alice Example"}
SECRET = b"another user's private notes, outside the folder"


@pytest.fixture
def store_home(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    assert erasure("store", "init", "--home", str(home.root)).code == 0
    return home


def hard_link_to_another_users_file(tmp_path: Path) -> tuple[Path, Path]:
    """items/files/receipt.txt is a hard link to other-user/notes.txt (owned by nobody when root)."""
    outside = tmp_path / "other-user" / "notes.txt"
    outside.parent.mkdir()
    outside.write_bytes(SECRET)
    if os.geteuid() == 0:
        os.chown(outside, NOBODY, NOBODY)
    items = tmp_path / "items"
    (items / "files").mkdir(parents=True)
    os.link(outside, items / "files" / "receipt.txt")
    return items, outside


def test_a_hard_linked_attachment_is_refused_and_nothing_is_written(store_home: Home, tmp_path: Path) -> None:
    items, outside = hard_link_to_another_users_file(tmp_path)
    path = items / "items.jsonl"
    path.write_text(
        json.dumps(
            {
                "source": "chat",
                "source_ref": "conv-1",
                "subject": ALICE,
                "content": "About billing.",
                "attachments": ["files/receipt.txt"],
            }
        )
        + "\n"
    )
    before = snapshot(store_home.root)

    res = erasure("ingest", str(path), "--home", str(store_home.root))

    assert res.code == 2, res
    assert res.err.startswith(f"error: {path}:1: attachments.0: ") and "link" in res.err, res.err
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err
    assert SECRET.decode() not in res.out + res.err and "receipt" not in res.err
    assert snapshot(store_home.root) == before
    assert outside.read_bytes() == SECRET


def test_a_hard_link_made_after_the_check_is_refused_at_copy_time(tmp_path: Path) -> None:
    """The copy re-checks the opened file: a second link made between check and copy is refused."""
    f = tmp_path / "receipt.txt"
    f.write_bytes(b"a receipt")
    st = f.stat()
    blob = BlobData(filename=f.name, path=f, identity=(st.st_dev, st.st_ino))
    with open_source(blob) as src:
        assert src.read() == b"a receipt"
    os.link(f, tmp_path / "elsewhere.txt")
    with pytest.raises(InputError):
        open_source(blob)
