"""The agent memories a request erases from (`erasure targets ...`): each target's tiers, whether its
files are reachable and whether it was restored; how much of a request's subject each holds now."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import ErasureError
from erasure.targets import Target, Targets


def _tiers_and_files(target: Target) -> tuple[list[str], list[Path]]:
    from tasks.targets.eraser import eraser_for

    eraser = eraser_for(target)
    eraser.check(target)
    return [t.value for t in eraser.tiers], eraser.files(target)


def target_rows(h: Home, found: Targets) -> list[dict[str, Any]]:
    """Each target: its kind, the tiers it holds, whether its files are reachable (else which are
    missing, or the error that says why not), and whether it was restored (`to_replay`: the original
    request ids it waits to replay)."""
    from tasks.epochs import epochs  # only when listing: tasks is heavy for the CLI's start

    rows: list[dict[str, Any]] = []
    for t in found.targets:
        try:
            tiers, files = _tiers_and_files(t)
            missing = [str(f) for f in files if not f.exists()]
            rows.append(
                {
                    "name": t.name,
                    "kind": t.kind,
                    "tiers": tiers,
                    "reachable": not missing,
                    "missing": missing,
                    "error": None,
                }
            )
        except ErasureError as exc:
            rows.append(
                {"name": t.name, "kind": t.kind, "tiers": [], "reachable": False, "missing": [], "error": str(exc)}
            )
    by_name = {e.target: e for e in epochs(h, found)}  # hook (issue 26): restored stores and what they wait for
    for row in rows:
        e = by_name.get(row["name"])
        row["restored"] = bool(e and e.restored)
        row["to_replay"] = list(e.pending) if e else []
    return rows


def subject_counts(engine: Engine, h: Home, found: Targets, request_id: str) -> dict[str, dict[str, int | None]]:
    """Per target and tier, how many items the request's subject has there now (nothing is erased;
    None: the kind holds no such tier)."""
    from tasks.targets.runner import count_target

    with engine.lent() as conn:
        subject = request_records.load_envelope(conn, request_id).subject
    out: dict[str, dict[str, int | None]] = {}
    for t in found.targets:
        out[t.name] = count_target(t, subject, request_id, h)
    return out
