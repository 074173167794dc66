"""Packs are append-only: the proof packs of one request, numbered, each naming the one before.

A request's first pack is `proof.tar.gz`. Once the DPO has attested (sealed) a pack, nothing of the
product rewrites or removes it: a rerun of the request (it was reopened: a re-verification found the
subject again) writes `proof-2.tar.gz` beside it, then `proof-3.tar.gz`, and so on, and each later
pack's manifest.json names the pack before it (`previous_pack`: its file and its name, the sha256 of its
engine statement, which the verifier reports). Only a pack still awaiting attestation, which never left
the engine, is replaced by a rerun of its own run.

Each run's loose working files are kept apart the same way (`erasure.evidence_runs`): the first run's in
the request's folder, run n's in `run-<n>/` (`start_run`, `run_of`), so nothing a sealed run left is
rewritten either.

Each pack has its own chain of re-verification statements: `reverify-<n>.intoto.json` for the first,
`proof-<k>.reverify-<n>.intoto.json` for the k-th (`statement_prefix`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from erasure.evidence_runs import run_dir
from proof import verify
from wire.format import DPO_ENVELOPE, ENGINE_ENVELOPE, MANIFEST, PACK_FILE

PACK_NAME = "proof.tar.gz"


def pack_file(n: int) -> str:
    """The file name of a request's n-th pack."""
    return PACK_NAME if n == 1 else f"proof-{n}.tar.gz"


def packs(evidence_dir: Path) -> list[tuple[int, Path]]:
    """The request's packs, (n, path), oldest first (regular files only)."""
    found = []
    for p in Path(evidence_dir).iterdir() if Path(evidence_dir).is_dir() else ():
        m = PACK_FILE.fullmatch(p.name)
        if m and not p.is_symlink() and p.is_file():
            n = int(m.group(1) or 1)
            if n != 1 or m.group(1) is None:  # proof-1.tar.gz is not a name the product writes
                found.append((n, p))
    return sorted(found)


def current_pack(evidence_dir: Path) -> Path:
    """The request's newest pack (the one signed off, re-verified and exported as current); the first
    pack's path when there is none yet."""
    found = packs(evidence_dir)
    return found[-1][1] if found else Path(evidence_dir) / PACK_NAME


def statement_prefix(pack: Path) -> str:
    """The prefix of the re-verification statements of `pack`: none for the first, `proof-<k>.` after."""
    return "" if pack.name == PACK_NAME else pack.name.removesuffix(".tar.gz") + "."


def _files(pack: Path) -> dict[str, bytes]:
    _top, files = verify.extract(verify.read_pack(pack))
    return files


def pack_name_of(pack: Path) -> str:
    """A pack's name: the sha256 of its engine statement (`VerifyResult.pack_name`)."""
    _t, payload, _k = verify.unverified_payload(_files(pack)[ENGINE_ENVELOPE], ENGINE_ENVELOPE)
    return hashlib.sha256(payload).hexdigest()


def previous_of(pack: Path) -> dict[str, Any] | None:
    """The `previous_pack` a pack's manifest names (None for a first pack)."""
    doc = json.loads(_files(pack)[MANIFEST])
    prev = doc.get("previous_pack") if isinstance(doc, dict) else None
    return dict(prev) if isinstance(prev, dict) else None


def sealed_again(
    evidence_dir: Path, target: Path, statement_for: Callable[[dict[str, Any] | None], bytes]
) -> Path | None:
    """The newest, sealed pack when `target` would follow it but the evidence signs the very statement it
    holds again (`statement_for(previous)`: an identical rerun): that pack stands, and nothing is written."""
    found = packs(evidence_dir)
    if not found or found[-1][1] == target:
        return None
    newest = found[-1][1]
    same = hashlib.sha256(statement_for(previous_of(newest))).hexdigest() == pack_name_of(newest)
    return newest if same else None


def is_sealed(pack: Path) -> bool:
    """Whether the DPO has attested `pack` (its DPO envelope is in it)."""
    return DPO_ENVELOPE in _files(pack)


def next_target(evidence_dir: Path) -> tuple[Path, dict[str, Any] | None]:
    """Where a new pack of the request goes, and the `previous_pack` its manifest names: the newest pack
    when it awaits attestation (replaced), else the next number beside the sealed ones."""
    found = packs(evidence_dir)
    if not found:
        return Path(evidence_dir) / PACK_NAME, None
    n, newest = found[-1]
    target = n + 1 if is_sealed(newest) else n
    before = dict(found).get(target - 1)
    previous = {"file": before.name, "pack_name": pack_name_of(before)} if before is not None else None
    return Path(evidence_dir) / pack_file(target), previous


def pack_number(pack: Path) -> int:
    """The n of a pack named `proof.tar.gz` (1) or `proof-<n>.tar.gz`; 1 for any other name."""
    m = PACK_FILE.fullmatch(Path(pack).name)
    return int(m.group(1)) if m and m.group(1) else 1


def run_of(pack: Path) -> Path:
    """The folder of the loose files of the run that wrote `pack` (`erasure.evidence_runs.run_dir`)."""
    return run_dir(Path(pack).parent, pack_number(pack))


def start_run(evidence_dir: Path) -> Path:
    """Start the folder of the run about to write the request's next pack (`next_target`): `run-<n>/`
    beside a sealed pack, so the rerun of a reopened request leaves every file of the earlier runs as
    it is; the current folder when the newest pack still awaits attestation (its own run again)."""
    target, _previous = next_target(evidence_dir)
    folder = run_dir(Path(evidence_dir), pack_number(target))
    folder.mkdir(parents=True, exist_ok=True)
    return folder
