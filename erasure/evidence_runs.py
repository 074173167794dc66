"""A request's evidence folder is append-only (issue 34, finding 11): each run of the request keeps its
loose working files (steps.jsonl, verification.json, request.json, the receipts, the audit log's
redaction, the manifest, SHA256SUMS, attestation.txt, signatures/*) in a folder of its own, so a rerun
of a reopened request never rewrites what the earlier run left.

Run n belongs to the pack `proof.history.pack_file(n)` names: the first run's files are in the
request's folder itself (beside `proof.tar.gz`, where they always were), run n >= 2's in `run-<n>/`
(its pack, `proof-<n>.tar.gz`, stays beside the others). A run folder is started by the run that will
write its pack (`proof.history.start_run`); the current run is the newest folder. Only the current run,
while its pack still awaits attestation, rewrites its own files (a rerun of that same run)."""

from __future__ import annotations

import re
from pathlib import Path

RUN_DIR = re.compile(r"run-([1-9][0-9]{0,5})")
"""A run folder's name: `run-<n>`, n >= 2 (the first run's files are in the request's folder)."""


def run_dir(evidence_dir: Path, n: int) -> Path:
    """Where run `n`'s loose files are: the request's folder for the first run, `run-<n>/` after."""
    return Path(evidence_dir) if n <= 1 else Path(evidence_dir) / f"run-{n}"


def run_number(evidence_dir: Path) -> int:
    """The number of the request's current (newest) run: its highest `run-<n>` folder (a real folder,
    never a link), else 1."""
    found = [1]
    folder = Path(evidence_dir)
    for p in folder.iterdir() if folder.is_dir() else ():
        m = RUN_DIR.fullmatch(p.name)
        if m and int(m.group(1)) >= 2 and p.is_dir() and not p.is_symlink():
            found.append(int(m.group(1)))
    return max(found)


def current_run_dir(evidence_dir: Path) -> Path:
    """The folder of the request's current run: where its working files are written and read."""
    return run_dir(evidence_dir, run_number(evidence_dir))
