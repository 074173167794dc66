"""The decoded views read a file content once per window (`probes.views.ViewCache`): a blob's replica, or a
copy of a file in another folder of the home, is not decoded again; and a reading is never reused where it
could answer differently (a reading that skipped a needle already found). The generator checks the cached
scan against each file read alone, with no copy beside it to reuse (the slow path as the oracle)."""

from __future__ import annotations

import base64
import gzip
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes import views
from probes.views import ViewCache, scan_views
from tests import budget

NAME, EMAIL = "Farid Quillfeather", "farid.q@mail.example"
NEEDLES = [("identifier", NAME), ("identifier", EMAIL)]


def _b64(text: str) -> bytes:
    return b"note: " + base64.b64encode(text.encode()) + b" end\n"


def test_a_blob_replica_is_decoded_once_and_found_in_both(tmp_path: Path) -> None:
    one = tmp_path / "alone"
    (one / "primary").mkdir(parents=True)
    (one / "primary" / "blob").write_bytes(_b64(f"Dear {NAME}, your parcel"))
    alone = scan_views(one, NEEDLES)
    both = tmp_path / "both"
    shutil.copytree(one, both)
    (both / "replica").mkdir()
    shutil.copy(both / "primary" / "blob", both / "replica" / "blob")
    report = scan_views(both, NEEDLES)
    assert alone.decoded > 0 and alone.found == {0: 1}
    assert report.decoded == alone.decoded  # the replica's base64 run was not decoded again
    assert report.reused == 1 and report.files == 2
    assert report.found == {0: 2}


def test_a_copy_in_another_folder_of_the_window_is_not_decoded_again(tmp_path: Path) -> None:
    for folder in ("store", "home"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "doc.json.gz").write_bytes(gzip.compress(json.dumps({"to": EMAIL}).encode()))
    cache = ViewCache()
    first = scan_views(tmp_path / "store", NEEDLES, cache=cache)
    second = scan_views(tmp_path / "home", NEEDLES, cache=cache)
    assert first.found == second.found == {1: 1}
    assert (first.reused, second.reused) == (0, 1) and second.decoded == 0


def test_a_reading_that_skipped_a_found_needle_is_read_again_where_that_needle_is_wanted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One thread, largest file first: the big file finds the name, so the small one is read for the email
    # alone (a verdict needs one occurrence). A later scan that has not found the name must read it again.
    monkeypatch.setattr(views, "MAX_WORKERS", 1)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "big.txt").write_bytes(f"{NAME}\n".encode() + b"filler text\n" * 200)
    small = _b64(f"{NAME} <{EMAIL}>")
    (tmp_path / "a" / "small.txt").write_bytes(small)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "copy.txt").write_bytes(small)
    cache = ViewCache()
    assert set(scan_views(tmp_path / "a", NEEDLES, cache=cache).found) == {0, 1}
    again = scan_views(tmp_path / "b", NEEDLES, cache=cache)
    assert set(again.found) == {0, 1}
    assert again.reused == 0  # what the first reading never looked for is looked for here


CONTENTS = [
    b"plain text, nothing of anyone\n",
    f"Hello {NAME}\n".encode(),
    _b64(f"mail {EMAIL} today"),
    gzip.compress(f"{NAME} wrote".encode()),
    json.dumps({"n": NAME.replace("a", "\\u0061")}).encode(),
    bytes(range(256)) * 4,  # read by nothing: declared
    b"",
]


@settings(max_examples=budget.examples(100), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(st.sampled_from(["", "blobs/p", "blobs/r", "corpora"]), st.integers(0, len(CONTENTS) - 1)),
        min_size=1,
        max_size=8,
    ),
    st.booleans(),
)
def test_generated_copies_read_with_the_cache_as_each_file_alone(
    tmp_path_factory: pytest.TempPathFactory, files: list[tuple[str, int]], two_scans: bool
) -> None:
    root = tmp_path_factory.mktemp("tree")
    for k, (folder, which) in enumerate(files):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / f"f{k}").write_bytes(CONTENTS[which])
    cache = ViewCache()
    if two_scans:  # the window's first scan (the store) read some of the same contents
        first = tmp_path_factory.mktemp("first")
        for k, (_folder, which) in enumerate(files[::2]):
            (first / f"g{k}").write_bytes(CONTENTS[which])
        scan_views(first, NEEDLES, cache=cache)
    got = scan_views(root, NEEDLES, cache=cache)
    # The oracle: every file read alone, in a folder of its own (nothing to reuse).
    found: set[int] = set()
    unscanned: Counter[tuple[str, int, str, str]] = Counter()
    for k, (folder, _which) in enumerate(files):
        alone = tmp_path_factory.mktemp("alone")
        (alone / folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(root / folder / f"f{k}", alone / folder / f"f{k}")
        one = scan_views(alone, NEEDLES, cache=ViewCache())
        found |= set(one.found)
        unscanned.update((u.sha256, u.size, u.reason, u.folder) for u in one.unscanned)
    assert set(got.found) == found
    assert Counter((u.sha256, u.size, u.reason, u.folder) for u in got.unscanned) == unscanned
