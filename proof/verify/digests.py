"""Check 4 (`SubjectError`): every subject digest of a signed statement matches its file and every
file is a subject (engine: all but signatures/*; DPO: those plus the engine's envelope).
Check 5 (`ChecksumError`): manifest.json (sizes, sha256, engine keyid) and SHA256SUMS agree with the
files and with each other."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from proof.verify.archive import Blob
from proof.verify.errors import ChecksumError, SubjectError, fail
from proof.verify.strict_json import is_int
from wire.format import MANIFEST, SUMS

_SUMS_LINE = re.compile(r"([0-9a-f]{64})  ([^\n]+)")


# --- 4 subjects ----------------------------------------------------------------------------------


def check_subjects(statement: Mapping[str, Any], digests: Mapping[str, str], covered: set[str], name: str) -> None:
    """Check 4: the subjects are exactly `covered`, each with the sha256 of its file."""
    seen: set[str] = set()
    for s in statement["subject"]:
        path = s.get("name") if isinstance(s, dict) else None
        digest = s.get("digest") if isinstance(s, dict) else None
        want = digest.get("sha256") if isinstance(digest, dict) else None
        if not isinstance(path, str) or not isinstance(want, str):
            fail(SubjectError, f"{name}: a subject has no name or sha256 digest")
        if path in seen:
            fail(SubjectError, f"{name}: subject {path!r} is listed twice")
        seen.add(path)
        if path not in covered:
            fail(SubjectError, f"{name}: subject {path!r} is not a file it may cover")
        if digests[path] != want:
            fail(SubjectError, f"{path} does not match its digest in {name}")
    missing = sorted(covered - seen)
    if missing:
        fail(SubjectError, f"{missing[0]} is not a subject of {name}")


# --- 5 checksums ---------------------------------------------------------------------------------


def check_checksums(manifest: Mapping[str, Any], blobs: Mapping[str, Blob], engine_keyid: str) -> None:
    """Check 5: manifest entries and SHA256SUMS lines match the files and each other."""
    listed: set[str] = set()
    for e in manifest["files"]:
        path = e["path"]
        listed.add(path)
        if not is_int(e.get("size")) or e["size"] != blobs[path].size:
            fail(ChecksumError, f"manifest.json gives the wrong size for {path}")
        if e.get("sha256") != blobs[path].sha256:
            fail(ChecksumError, f"manifest.json gives the wrong sha256 for {path}")
        if not isinstance(e.get("role"), str):
            fail(ChecksumError, f"manifest.json gives no role for {path}")
    if manifest.get("engine_keyid") != engine_keyid:
        fail(ChecksumError, "manifest.json names another engine key")
    try:
        lines = blobs[SUMS].data.decode("ascii").splitlines()
    except UnicodeDecodeError:
        fail(ChecksumError, "SHA256SUMS is not ASCII")
    summed: dict[str, str] = {}
    for line in lines:
        m = _SUMS_LINE.fullmatch(line)
        if m is None:
            fail(ChecksumError, "SHA256SUMS has a line not in `sha256sum` format")
        digest, path = m.group(1), m.group(2)
        if path in summed:
            fail(ChecksumError, f"SHA256SUMS lists {path} twice")
        summed[path] = digest
    if set(summed) != listed | {MANIFEST}:
        odd = sorted(set(summed) ^ (listed | {MANIFEST}))
        fail(ChecksumError, f"SHA256SUMS and manifest.json disagree on the file list ({odd[0]})")
    for path, digest in summed.items():
        if blobs[path].sha256 != digest:
            fail(ChecksumError, f"SHA256SUMS gives the wrong sha256 for {path}")
