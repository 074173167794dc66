"""The byte scanner: every file, all needles, one streaming pass (real hyperscan, real files)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure.errors import InputError
from probes.bytescan import MAX_NEEDLE_BYTES, naive_scan_tree, scan_tree
from tests import budget


def _write(root: Path, rel: str, data: bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_needles_with_nul_bytes_are_matched_whole(tmp_path: Path) -> None:
    # the binding's literal compiler would cut this needle at the NUL and match "ab" alone
    _write(tmp_path, "a.bin", b"xx ab\x00cd yy")
    _write(tmp_path, "b.bin", b"ab\x00zz ab")
    report = scan_tree(tmp_path, [b"ab\x00cd", b"\x00\x00\x00\x00"])
    assert report.hit_count(0) == 1
    assert report.found[0].files == ["a.bin"]
    assert report.hit_count(1) == 0


def test_regex_metacharacters_are_literal(tmp_path: Path) -> None:
    _write(tmp_path, "f", b"price: $5.00 (a|b)* [x] a.c")
    needles = [b"$5.00", b"(a|b)*", b"[x]", b"a.c", b"a+c", b"\\d"]
    report = scan_tree(tmp_path, needles)
    assert report.found_indexes() == {0, 1, 2, 3}


def test_needle_straddling_the_read_buffer_is_found(tmp_path: Path) -> None:
    needle = b"straddling-needle-0123456789"
    for offset in range(1, len(needle)):
        data = b"-" * (64 - offset) + needle + b"-" * 100  # the needle starts `offset` bytes before 64
        _write(tmp_path, f"s{offset:02d}", data)
    report = scan_tree(tmp_path, [needle], buffer_size=64)
    assert report.hit_count(0) == len(needle) - 1
    assert len(report.found[0].files) == len(needle) - 1


def test_needles_across_segment_boundaries_are_counted_once(tmp_path: Path) -> None:
    needle = b"segment-straddler"
    data = b"".join(os.urandom(40) + needle for _ in range(50))
    _write(tmp_path, "big", data)
    for segment_size in (7, 16, 17, 64, 1000):
        report = scan_tree(tmp_path, [needle, b"segment"], buffer_size=5, segment_size=segment_size, workers=3)
        assert (report.hit_count(0), report.hit_count(1)) == (50, 50)
        assert report.bytes_scanned == len(data) and report.files_scanned == 1


def test_needle_longer_than_the_buffer_is_found(tmp_path: Path) -> None:
    needle = os.urandom(300)
    _write(tmp_path, "f", os.urandom(1000) + needle + os.urandom(10))
    assert scan_tree(tmp_path, [needle], buffer_size=7).hit_count(0) == 1


def test_wal_journal_and_nested_files_are_scanned(tmp_path: Path) -> None:
    _write(tmp_path, "memory.db", b"clean")
    _write(tmp_path, "memory.db-wal", b"....dana.ortiz@example.org....")
    _write(tmp_path, "memory.db-journal", b"..Dana Ortiz..")
    _write(tmp_path, "blobs/replica-nobody-listed/ab/abcdef", b"\x01\x02dana.ortiz@example.org")
    _write(tmp_path, ".hidden/deeper/still/x", b"Dana Ortiz")
    report = scan_tree(tmp_path, [b"dana.ortiz@example.org", b"Dana Ortiz"])
    assert report.found[0].files == ["blobs/replica-nobody-listed/ab/abcdef", "memory.db-wal"]
    assert report.found[1].files == [".hidden/deeper/still/x", "memory.db-journal"]
    assert report.files_scanned == 5
    assert report.bytes_scanned == sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())


def test_clean_data_finds_nothing(tmp_path: Path) -> None:
    for i in range(5):
        _write(tmp_path, f"d{i}/f", os.urandom(50_000))
    needles = [os.urandom(16) for _ in range(150)]
    report = scan_tree(tmp_path, needles, buffer_size=4096)
    assert report.found == []
    assert report.needles == 150
    assert report.bytes_scanned == 250_000


def test_report_holds_indexes_never_needle_bytes(tmp_path: Path) -> None:
    secret = b"subject-secret-needle"
    _write(tmp_path, "f", secret)
    report = scan_tree(tmp_path, [secret])
    assert report.found_indexes() == {0}
    assert b"subject-secret" not in report.model_dump_json().encode()


def test_symlinks_and_fifos_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    root = tmp_path / "root"
    _write(outside, "f", b"needle")
    root.mkdir()
    (root / "link").symlink_to(outside / "f")
    os.mkfifo(root / "fifo")
    report = scan_tree(root, [b"needle"])
    assert report.found == []
    assert report.skipped_not_regular == 2


def test_bad_needles_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        scan_tree(tmp_path, [b""])
    with pytest.raises(InputError):
        scan_tree(tmp_path, [b"x" * (MAX_NEEDLE_BYTES + 1)])
    with pytest.raises(InputError):
        scan_tree(tmp_path / "missing", [b"x"])


def test_no_needles_still_reads_every_file(tmp_path: Path) -> None:
    _write(tmp_path, "a", b"12345")
    report = scan_tree(tmp_path, [])
    assert (report.files_scanned, report.bytes_scanned, report.found) == (1, 5, [])


_alphabet = st.sampled_from([b"a", b"b", b"\x00", b".", b"*"])
_text = st.lists(_alphabet, max_size=300).map(b"".join)


@settings(max_examples=budget.examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(_text, min_size=1, max_size=4),
    needles=st.lists(st.lists(_alphabet, min_size=1, max_size=6).map(b"".join), min_size=1, max_size=8),
    buffer_size=st.integers(min_value=1, max_value=40),
    segment_size=st.integers(min_value=1, max_value=90),
    workers=st.integers(min_value=1, max_value=3),
)
def test_matches_naive_find(
    tmp_path_factory: pytest.TempPathFactory,
    files: list[bytes],
    needles: list[bytes],
    buffer_size: int,
    segment_size: int,
    workers: int,
) -> None:
    root = tmp_path_factory.mktemp("prop")
    for i, data in enumerate(files):
        _write(root, f"f{i}", data)
    fast = scan_tree(root, needles, buffer_size=buffer_size, segment_size=segment_size, workers=workers)
    slow = naive_scan_tree(root, needles, buffer_size=buffer_size)
    assert fast.found == slow.found
    expected = [sum(_overlapping(d, n) for d in files) for n in needles]
    assert [fast.hit_count(i) for i in range(len(needles))] == expected


def _overlapping(data: bytes, needle: bytes) -> int:
    return sum(1 for i in range(len(data) - len(needle) + 1) if data[i : i + len(needle)] == needle)


def test_small_files_are_scanned_in_batches_without_matches_across_two_files(tmp_path: Path) -> None:
    """Small files share one scan buffer: a needle made of one file's tail and the next file's head is
    in no file, and must not be reported; each real hit names its own file."""
    from probes.bytescan import SMALL_BATCH_FILES

    root = tmp_path / "store"
    (root / "blobs").mkdir(parents=True)
    (root / "blobs" / "a").write_bytes(b"xx tail-of-a:")
    (root / "blobs" / "b").write_bytes(b"head-of-b yy needle-in-b")
    (root / "blobs" / "empty").write_bytes(b"")
    for i in range(SMALL_BATCH_FILES + 10):  # more than one batch
        (root / "blobs" / f"f{i:05d}").write_bytes(b"filler %d " % i + (b"\x00needle-late\x00" if i == 4100 else b""))
    report = scan_tree(root, [b"tail-of-a:head-of-b", b"needle-in-b", b"\x00needle-late\x00"])
    assert report.hit_count(0) == 0
    assert report.hit_count(1) == 1 and report.found[0].files == ["blobs/b"]
    assert report.hit_count(2) == 1 and [h.files for h in report.found if h.index == 2] == [["blobs/f04100"]]
    assert report.files_scanned == SMALL_BATCH_FILES + 10 + 3
