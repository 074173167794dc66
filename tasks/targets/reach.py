"""What a target's kind says lies beyond the erasure's reach (a WAL archive, standbys, replication
slots, logical replication for PostgreSQL), recorded as open exceptions of the request: the pack then
says `erasedWithExceptions`, naming each with what the team must do.

A kind's eraser may expose `beyond_reach(target) -> list[dict]`, each with `what` (a stable key),
`detail` (counts and settings only) and `ground` (what the team must do). One exception per `what`,
keyed `target:<name>:<what>`; those a later run no longer finds are closed.
"""

from __future__ import annotations

from typing import Any

from erasure import requests
from erasure.targets import Target
from erasure.tiers import BYTES_SCOPE

BEYOND_REACH = "beyond_reach"


def record_beyond_reach(engine: Any, request_id: str, target: Target, eraser: Any) -> int:
    """Open (or close) the target's beyond-reach exceptions; returns how many are open."""
    probe = getattr(eraser, "beyond_reach", None)
    found: list[dict[str, Any]] = probe(target) if probe is not None else []
    prefix = f"target:{target.name}:"
    keep = set()
    for item in found:
        key = prefix + str(item["what"])
        keep.add(key)
        requests.open_exception(engine, request_id, BYTES_SCOPE, BEYOND_REACH, key,
                                {"target": target.name, "what": item["what"], **item.get("detail", {})},
                                str(item["ground"]))
    for e in requests.exceptions(engine, request_id, open_only=True):
        if e.kind == BEYOND_REACH and e.item_key.startswith(prefix) and e.item_key not in keep:
            requests.close_exception(engine, e.exception_id)
    return len(keep)
