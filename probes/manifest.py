"""The scan manifest: every file the byte scan read, by path, size and SHA-256, so a later
re-verification (or a third party with access to the folders) can tell what changed since.

A path can name someone (a blob, session or upload file named after a person, a folder a user made),
so a path is written in plaintext only when every part of it is a name the stores themselves use
(`SAFE_PARTS`) or a random token; any other path is written as its keyed hash,
`hmac:` + HMAC-SHA256(key, "<root>/<path>") hex, under a key kept outside every scanned folder. The
same key gives the same label on the next scan, so two manifests compare by label; a third party
without the key compares by content digest and size.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from probes.bytescan import ScannedFile

FORMAT = "scan-manifest/v1"

SAFE_PARTS = frozenset(
    {
        # the reference store's own files and folders (memory/schema.py)
        "memory.db",
        "memory.db-wal",
        "memory.db-shm",
        "memory.db-journal",
        "blobs",
        "replicas",
        "sessions",
        "corpora",
        "lineage.json",
        # the home's own folders (erasure/config.py)
        "store",
        "evidence",
        "erasure",
        "inbox",
        "rejected",
        "prefect",
        "ledger",
        "erasures.db",
        "erasures.db-wal",
        "erasures.db-shm",
        "server",
        "state.json",
        "prefect.db",
        "prefect.db-wal",
        "prefect.db-shm",
        "metrics",
        # a PostgreSQL target's folders, by role (probes.targets.langgraph_postgres), and PostgreSQL's own
        "data_dir",
        "log_dir",
        "log_directory",
        "base",
        "global",
        "pg_wal",
        "log",
        "pg_log",
    }
)
"""Names our software (or the database it erases) gives files and folders: they cannot name a person."""

_TOKEN = re.compile(r"[0-9a-f]{16,128}(\.[a-z0-9]{1,8}){0,2}")
"""A random token (blob keys are `secrets.token_hex`): hex digits alone spell no one."""

_SAFE_FILE = re.compile(r"v[0-9]{1,9}\.jsonl")
"""A corpus version's file (`corpora/<name>/v<n>.jsonl`; the corpus name is a name someone chose)."""


_PG_LOG = re.compile(r"postgresql(-[0-9]{1,6})*(-main)?(_[0-9]{4,6})?\.(log|csv|json)(\.[0-9]{1,3})?")
"""A PostgreSQL server log: `log_filename`'s default (`postgresql-%Y-%m-%d_%H%M%S.log`) or Debian's
`postgresql-<version>-main.log` (and its rotations): digits and names PostgreSQL gives."""


def _safe_part(part: str) -> bool:
    return (
        part in SAFE_PARTS
        or bool(_TOKEN.fullmatch(part))
        or bool(_SAFE_FILE.fullmatch(part))
        or bool(_PG_LOG.fullmatch(part))
    )


def label(key: bytes, root: str, rel: str) -> str:
    """How the manifest names the file `rel` under the scanned folder `root`: `<root>/<rel>` when every
    part is a name our software gives, else `hmac:<hex>` of it under `key`."""
    full = f"{root}/{rel}"
    if all(_safe_part(p) for p in full.split("/")):
        return full
    return "hmac:" + hmac.new(key, f"path:{full}".encode(), hashlib.sha256).hexdigest()


class ManifestEntry(BaseModel):
    """One file of the manifest: its label (`label`), size and SHA-256."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    size: int
    sha256: str


def entries(key: bytes, scanned: Mapping[str, Sequence[ScannedFile]]) -> list[ManifestEntry]:
    """The manifest's entries from what each scanned folder's scan read (folder label -> files),
    sorted by label."""
    out = [
        ManifestEntry(path=label(key, root, f.rel), size=f.size, sha256=f.sha256)
        for root, files in scanned.items()
        for f in files
    ]
    return sorted(out, key=lambda e: e.path)


FILE = "scan-manifest.json"
"""The whole manifest, beside the pack in the evidence folder; `verification.json` (in the pack) names
its SHA-256, and holds its entries too when there are at most `INLINE_MAX`."""
INLINE_MAX = 4000
"""Entries `verification.json` carries itself: a pack file may hold at most 4 MiB (the verifier's limit)
and a store of a million frames has tens of thousands of files."""


def to_json(items: Iterable[ManifestEntry]) -> dict[str, Any]:
    """The whole manifest document (`scan-manifest.json`)."""
    files = [e.model_dump() for e in items]
    return {
        "format": FORMAT,
        "path_rule": "a path of names our software gives is plain; any other is hmac: + HMAC-SHA256(key,"
        " 'path:<folder>/<path>'); the key stays outside every scanned folder",
        "files": files,
        "file_count": len(files),
        "bytes": sum(int(f["size"]) for f in files),
    }


def document_bytes(doc: dict[str, Any]) -> bytes:
    """The manifest file's bytes: compact JSON, sorted keys, one final newline."""
    return (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode()


def summary(doc: dict[str, Any], inline_max: int = INLINE_MAX) -> dict[str, Any]:
    """The `scan_manifest` object of `verification.json`: the manifest with the name and SHA-256 of its
    file; without its entries when there are more than `inline_max` (then the file beside the pack,
    matched by that digest, holds them)."""
    out = {**doc, "file": FILE, "sha256": hashlib.sha256(document_bytes(doc)).hexdigest()}
    out["inline"] = len(doc["files"]) <= inline_max
    if not out["inline"]:
        del out["files"]
    return out


def from_json(doc: Any, beside: Path | None = None) -> list[ManifestEntry] | None:
    """The entries of a `scan_manifest` object: inline, or from the manifest file in `beside` (a
    folder) when its SHA-256 is the one the object names. None when there is none to be had (a
    verification written before manifests existed, or the file is gone or changed)."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return None
    if isinstance(doc.get("files"), list):
        return [ManifestEntry.model_validate(f) for f in doc["files"]]
    if beside is None:
        return None
    try:
        data = (beside / FILE).read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != doc.get("sha256"):
        return None
    whole = json.loads(data)
    return from_json(whole) if isinstance(whole, dict) and isinstance(whole.get("files"), list) else None


class Changes(BaseModel):
    """What changed between two manifests, by label: files added, removed, modified (same label, other
    size or digest), and how many stayed byte for byte the same."""

    model_config = ConfigDict(frozen=True)

    added: list[str]
    removed: list[str]
    modified: list[str]
    unchanged: int

    @property
    def any(self) -> bool:
        """Whether anything changed."""
        return bool(self.added or self.removed or self.modified)


def diff(before: Iterable[ManifestEntry], after: Iterable[ManifestEntry]) -> Changes:
    """Compare the manifest of an earlier scan with a later one (labels made with the same key)."""
    old = {e.path: (e.size, e.sha256) for e in before}
    new = {e.path: (e.size, e.sha256) for e in after}
    return Changes(
        added=sorted(new.keys() - old.keys()),
        removed=sorted(old.keys() - new.keys()),
        modified=sorted(p for p in old.keys() & new.keys() if old[p] != new[p]),
        unchanged=sum(1 for p in old.keys() & new.keys() if old[p] == new[p]),
    )
