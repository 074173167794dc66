"""Erase one request's subject from one target and record it: one step record per (target, tier).

Tiers the target's kind does not hold are recorded as `skipped` with the reason "not applicable",
never as erased. A tier left with items fails the step (a rerun resumes: every kind's `erase` is
idempotent). Other people's items that name the subject are counted and reported as a
`mention_reported` exception of the target (the pack then says erasedWithExceptions).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypedDict

from erasure import requests
from erasure.config import Home
from erasure.engine import open_engine
from erasure.errors import ErasureError
from erasure.exception_kinds import BEYOND_REACH
from erasure.models import StepRecord, StepStatus
from erasure.server_control import ServerControl, quiesced
from erasure.targets import Target
from erasure.tiers import BYTES_SCOPE, CASCADE_ORDER
from tasks.runner import write_steps_jsonl
from tasks.targets.base import epoch_keeper, eraser_for

NOT_APPLICABLE = "not applicable: this target's kind holds no such tier"
MENTION_GROUND = "mention reported: another person's item in this target names the subject (not erased)"


class TargetErased(TypedDict):
    """What one target's erasure of a request did (counts only): per tier [before, after]."""

    target: str
    kind: str
    mentions: int
    tiers: dict[str, list[int]]


class TargetIncomplete(ErasureError):
    """A target still holds items of the subject after its erase."""


def erase_target(request_id: str, target: Target, home: Home) -> TargetErased:
    """Erase the request's subject from `target`; write its step records; return counts only."""
    eraser = eraser_for(target)
    eraser.check(target)
    engine = open_engine(home.engine_db)
    try:
        subject = requests.load_envelope(engine, request_id).subject
        started = datetime.now(UTC)
        # hook (issue 25): a target served by a running server is erased only while it is down.
        with quiesced(server_of(eraser, target), "the erasure") as window:
            mentions = eraser.mentions(target, subject)
            keeper = epoch_keeper(eraser)  # its epoch advances inside the deletes' transaction (issue 26)
            outcomes = keeper.erase(target, subject, request_id) if keeper else eraser.erase(target, subject)
            if window.control is not None and not any(o.after for o in outcomes.values()):
                from tasks.epochs import advance_target

                advance_target(target, home, request_id)  # the epoch lives in the folder: written while down
        ended = datetime.now(UTC)
        left: list[str] = []
        for tier in CASCADE_ORDER:
            if tier not in eraser.tiers:
                record = StepRecord(
                    request_id=request_id,
                    step=tier.value,
                    target=target.name,
                    status=StepStatus.skipped,
                    started_at=started,
                    ended_at=ended,
                    detail={"reason": NOT_APPLICABLE},
                )
            else:
                out = outcomes.get(tier)
                before = out.before if out else 0
                after = out.after if out else 0
                if after:
                    left.append(tier.value)
                status = StepStatus.failed if after or window.start_error else StepStatus.erased
                record = StepRecord(
                    request_id=request_id,
                    step=tier.value,
                    target=target.name,
                    status=status,
                    before_count=before,
                    after_count=after,
                    started_at=started,
                    ended_at=ended,
                    detail={"kind": target.kind, **(out.detail if out else {}), **window.detail()},
                )
            requests.upsert_step(engine, record)
        if mentions:
            requests.open_exception(
                engine,
                request_id,
                BYTES_SCOPE,
                "mention_reported",
                f"target:{target.name}",
                {"target": target.name, "items": mentions},
                MENTION_GROUND,
            )
        record_beyond_reach(engine, request_id, target, eraser)
        write_steps_jsonl(engine, request_id, home.run_dir(request_id))
        window.raise_if_down()  # erased and recorded, but the server did not come back: the step fails
        if left:
            raise TargetIncomplete(f"target {target.name}: items left in {', '.join(left)}: rerun to resume")
        from tasks.epochs import advance_target

        advance_target(target, home, request_id)  # hook (issue 26): the target's erasure epoch, after its erasure
        return {
            "target": target.name,
            "kind": target.kind,
            "mentions": mentions,
            "tiers": {t.value: [o.before, o.after] for t, o in outcomes.items()},
        }
    finally:
        engine.close()


def server_of(eraser: Any, target: Target) -> ServerControl | None:
    """The server that keeps the target's files open, when its kind has one (`server(target)`)."""
    server = getattr(eraser, "server", None)
    return server(target) if server is not None else None


def count_target(target: Target, subject: Any) -> dict[str, int | None]:
    """Per tier of the nine, the subject's items in `target` now (None: the kind holds no such tier)."""
    eraser = eraser_for(target)
    eraser.check(target)
    counts = eraser.count(target, subject)
    return {t.value: (counts.get(t, 0) if t in eraser.tiers else None) for t in CASCADE_ORDER}


# --- what a kind says lies beyond the erasure's reach ------------------------------------------------


def record_beyond_reach(engine: Any, request_id: str, target: Target, eraser: Any) -> int:
    """Open (or close) the target's beyond-reach exceptions (a WAL archive, standbys, replication slots,
    logical replication for PostgreSQL); returns how many are open. A kind's eraser may expose
    `beyond_reach(target) -> list[dict]`, each with `what` (a stable key), `detail` (counts and settings
    only) and `ground` (what the team must do): one exception per `what`, keyed `target:<name>:<what>`;
    those a later run no longer finds are closed. The pack then says `erasedWithExceptions`."""
    probe = getattr(eraser, "beyond_reach", None)
    found: list[dict[str, Any]] = probe(target) if probe is not None else []
    prefix = f"target:{target.name}:"
    keep = set()
    for item in found:
        key = prefix + str(item["what"])
        keep.add(key)
        requests.open_exception(
            engine,
            request_id,
            BYTES_SCOPE,
            BEYOND_REACH,
            key,
            {"target": target.name, "what": item["what"], **item.get("detail", {})},
            str(item["ground"]),
        )
    for e in requests.exceptions(engine, request_id, open_only=True):
        if e.kind == BEYOND_REACH and e.item_key.startswith(prefix) and e.item_key not in keep:
            requests.close_exception(engine, e.exception_id)
    return len(keep)
