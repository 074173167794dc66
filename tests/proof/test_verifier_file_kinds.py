"""What the offline verifier reads, as a class (issue 34, finding 6): every kind of path a pack, a key or
a statement beside it can be, at every size around the limit. The oracle, written apart from
`proof.verify.files`: only a regular file that is not a link and is no larger than the limit is read,
and everything else is refused with one message, at once."""

from __future__ import annotations

import os
import socket
import tempfile
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from proof.verify import files
from proof.verify.errors import ReverifyError
from tests import budget

LIMIT = 4096
KINDS = ("regular", "fifo", "directory", "socket", "link-to-regular", "link-to-fifo", "dangling-link", "device")


def make(kind: str, size: int, where: Path) -> Path:
    path = where / "x"
    if kind in ("regular", "link-to-regular"):
        target = where / "target"
        with open(target, "wb") as fh:
            fh.truncate(size)  # sparse: its size, no bytes written
        if kind == "regular":
            return target
        path.symlink_to(target)
    elif kind in ("fifo", "link-to-fifo"):
        os.mkfifo(where / "fifo")
        if kind == "fifo":
            return where / "fifo"
        path.symlink_to(where / "fifo")
    elif kind == "directory":
        path.mkdir()
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    elif kind == "dangling-link":
        path.symlink_to(where / "nowhere")
    else:  # a character device of endless bytes
        return Path("/dev/zero")
    return path


def read_by_the_oracle(kind: str, size: int) -> bool:
    return kind == "regular" and size <= LIMIT


@settings(max_examples=budget.examples(300), deadline=None)
@given(kind=st.sampled_from(KINDS), size=st.sampled_from([0, 1, LIMIT - 1, LIMIT, LIMIT + 1, 6 * 1024**3]))
def test_only_a_regular_file_within_its_limit_is_read(kind: str, size: int) -> None:
    files.reset_ceiling()
    with tempfile.TemporaryDirectory() as tmp:
        path = make(kind, size, Path(tmp))
        start = time.monotonic()
        try:
            data = files.read_regular(path, LIMIT, "the statement", ReverifyError)
        except ReverifyError as exc:
            assert not read_by_the_oracle(kind, size), (kind, size, str(exc))
            assert "\n" not in str(exc)
        else:
            assert read_by_the_oracle(kind, size), (kind, size)
            assert len(data) == size
        assert time.monotonic() - start < 5.0  # never waits on a FIFO or reads a device


def test_the_memory_ceiling_covers_every_file_read_together(tmp_path: Path) -> None:
    """Files each within their own limit, together over the ceiling: the one that would pass it is refused."""
    files.reset_ceiling()
    each = 8 * 1024 * 1024
    made = []
    for i in range(files.MEMORY_CEILING // each + 1):
        p = tmp_path / f"s{i}"
        with open(p, "wb") as fh:
            fh.truncate(each)
        made.append(p)
    for p in made[:-1]:
        files.read_regular(p, each, p.name, ReverifyError)
    try:
        files.read_regular(made[-1], each, made[-1].name, ReverifyError)
    except ReverifyError as exc:
        assert "memory ceiling" in str(exc)
    else:
        raise AssertionError("the ceiling was not kept")
    finally:
        files.reset_ceiling()
