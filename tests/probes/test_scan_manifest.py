"""The scan manifest (issue 27): the byte scan lists every file it read with its size and SHA-256, paths
that could name someone as keyed hashes, and two manifests tell which files changed in between.

The oracle walks and hashes the files itself (hashlib over `Path.read_bytes`), and the generator draws
trees of small files (one scan per batch), one-segment files and files of several segments (scanned
in parallel pieces, hashed by one more read), then which of them change between the two scans.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes import manifest
from probes.bytescan import SMALL_FILE, scan_tree
from tests import budget

KEY = b"k" * 32
SEGMENT = SMALL_FILE + 4096
"""Files above SMALL_FILE are segments; above SEGMENT, several segments."""


def oracle(root: Path) -> dict[str, tuple[int, str]]:
    """Every regular file under `root`: relative posix path -> (size, sha256), by our own walk."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            if p.is_file() and not p.is_symlink():
                data = p.read_bytes()
                out[p.relative_to(root).as_posix()] = (len(data), hashlib.sha256(data).hexdigest())
    return out


SIZES = st.sampled_from([0, 1, 100, SMALL_FILE, SMALL_FILE + 1, SEGMENT + 1, 2 * SEGMENT + 17])
NAMES = st.sampled_from(
    ["memory.db", "a.bin", "Jane Doe.txt", "sessions/s1.json", "blobs/x/y.bin", "corpora/c/v2.jsonl"]
)


def _content(seed: int, size: int) -> bytes:
    return (hashlib.sha256(str(seed).encode()).digest() * (size // 32 + 1))[:size]


@st.composite
def trees(draw: st.DrawFn) -> tuple[dict[str, int], dict[str, str]]:
    """A tree (path -> size) and what happens to each path before the second scan: keep, modify (same
    size, other bytes, or other size), remove; and files added."""
    names = draw(st.lists(NAMES, min_size=1, max_size=6, unique=True))
    tree = {n: draw(SIZES) for n in names}
    fate = {n: draw(st.sampled_from(["keep", "modify", "grow", "remove"])) for n in names}
    for extra in draw(st.lists(st.sampled_from(["new.bin", "inbox/Müller.eml", "blobs/" + "ab" * 16]), unique=True)):
        if extra not in tree:
            fate[extra] = "add"
    return tree, fate


def _write(root: Path, rel: str, data: bytes) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)


def _manifest(root: Path) -> list[manifest.ManifestEntry]:
    report = scan_tree(root, [b"needle"], manifest=True, segment_size=SEGMENT, workers=3)
    got = {f.rel: (f.size, f.sha256) for f in report.files}
    assert got == oracle(root)  # every file the scan read, with the oracle's size and digest
    return manifest.entries(KEY, {"store": report.files})


@settings(max_examples=budget.examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=trees())
def test_a_rescan_reports_exactly_the_files_that_changed(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[dict[str, int], dict[str, str]]
) -> None:
    tree, fate = case
    root = tmp_path_factory.mktemp("tree")
    for i, (rel, size) in enumerate(tree.items()):
        _write(root, rel, _content(i, size))
    before_files = oracle(root)
    before = _manifest(root)
    for i, (rel, what) in enumerate(fate.items()):
        if what == "modify" and tree[rel]:
            _write(root, rel, _content(1000 + i, tree[rel]))
        elif what == "grow":
            _write(root, rel, _content(i, tree[rel]) + b"+")
        elif what == "remove":
            (root / rel).unlink()
        elif what == "add":
            _write(root, rel, b"added")
    after_files = oracle(root)
    changes = manifest.diff(before, _manifest(root))

    def lab(rel: str) -> str:
        return manifest.label(KEY, "store", rel)

    assert changes.added == sorted(lab(r) for r in after_files.keys() - before_files.keys())
    assert changes.removed == sorted(lab(r) for r in before_files.keys() - after_files.keys())
    assert changes.modified == sorted(
        lab(r) for r in before_files.keys() & after_files.keys() if before_files[r] != after_files[r]
    )
    assert changes.unchanged == sum(
        1 for r in before_files.keys() & after_files.keys() if before_files[r] == after_files[r]
    )


def test_a_path_that_could_name_someone_is_a_keyed_hash() -> None:
    assert manifest.label(KEY, "store", "memory.db-wal") == "store/memory.db-wal"
    assert manifest.label(KEY, "store", "blobs/" + "0f" * 16) == "store/blobs/" + "0f" * 16
    assert manifest.label(KEY, "store", "corpora/support/v3.jsonl").startswith("hmac:")  # a corpus name
    for rel in ("sessions/jane-doe.json", "blobs/Annabel Quist.pdf", "inbox/annabel.quist@example.org.eml"):
        got = manifest.label(KEY, "store", rel)
        assert got.startswith("hmac:") and len(got) == 5 + 64
        assert got == manifest.label(KEY, "store", rel)  # stable: two scans compare
        assert got != manifest.label(b"other key" * 4, "store", rel)  # keyed: no dictionary of names
    assert manifest.label(KEY, "store", "a/b") != manifest.label(KEY, "inbox", "a/b")


def test_a_file_that_vanishes_or_cannot_be_read_is_not_listed(tmp_path: Path) -> None:
    _write(tmp_path, "ok.bin", b"fine")
    _write(tmp_path, "locked.bin", b"secret")
    (tmp_path / "locked.bin").chmod(0)
    try:
        report = scan_tree(tmp_path, [b"x"], manifest=True)
    finally:
        (tmp_path / "locked.bin").chmod(0o600)
    listed = {f.rel for f in report.files}
    if os.geteuid() == 0:  # root reads it anyway
        assert listed == {"ok.bin", "locked.bin"}
    else:
        assert listed == {"ok.bin"} and report.unreadable == ["locked.bin"]


def test_without_manifest_the_scan_lists_no_files(tmp_path: Path) -> None:
    _write(tmp_path, "a", b"abc")
    assert scan_tree(tmp_path, [b"b"]).files == []


def test_a_manifest_too_long_to_inline_is_read_from_its_file_only_when_its_digest_matches(tmp_path: Path) -> None:
    for i in range(5):
        _write(tmp_path / "tree", f"f{i}.bin", bytes([i]) * (i + 1))
    files = scan_tree(tmp_path / "tree", [b"x"], manifest=True).files
    doc = manifest.to_json(manifest.entries(KEY, {"store": files}))
    (tmp_path / manifest.FILE).write_bytes(manifest.document_bytes(doc))
    inline = manifest.summary(doc)
    assert inline["inline"] and manifest.from_json(inline) == manifest.entries(KEY, {"store": files})
    named = manifest.summary(doc, inline_max=4)
    assert not named["inline"] and "files" not in named and named["file_count"] == 5
    assert manifest.from_json(named) is None  # no folder to read the file from
    assert manifest.from_json(named, tmp_path) == manifest.entries(KEY, {"store": files})
    changed = dict(doc, files=doc["files"][1:])  # a file dropped from the manifest
    (tmp_path / manifest.FILE).write_bytes(manifest.document_bytes(changed))
    assert manifest.from_json(named, tmp_path) is None
