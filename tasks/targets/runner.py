"""Erase a window's subjects from one target and record it: one step record per (request, target, tier).

Tiers the target's kind does not hold are recorded as `skipped` with the reason "not applicable",
never as erased. A tier left with items fails the step (a rerun resumes: every kind's `erase` is
idempotent). Other people's items that name the subject are counted and reported as a
`mention_reported` exception of the target (the pack then says erasedWithExceptions).
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import ErasureError
from erasure.exception_kinds import BEYOND_REACH
from erasure.models import StepRecord, StepStatus
from erasure.server_control import Window, quiesced, with_outage
from erasure.target_kinds import server_of
from erasure.targets import Target
from erasure.tiers import BYTES_SCOPE, CASCADE_ORDER, Tier
from tasks.runner import write_steps_jsonl
from tasks.targets.eraser import epoch_keeper, eraser_for

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


@dataclass
class _Erased:
    """One request's erasure of the target, done while its server was down, not yet recorded."""

    started: datetime
    ended: datetime
    mentions: int
    outcomes: dict[Tier, Any]


def erase_target_window(request_ids: list[str], target: Target, home: Home) -> dict[str, TargetErased | Exception]:
    """Erase every request's subject from `target`, one after another; write their step records; per
    request its counts, or the error that stopped it (the others go on). A target served by a running
    server (issue 25) is erased only while it is down, and the server is stopped once for the whole
    window (issue 37): every request's step records carry that outage, and fail when the server did not
    come back. An error before anything is touched (the kind's check, a server that will not stop)
    raises for the window as a whole."""
    eraser = eraser_for(target)
    eraser.check(target)
    borrowed = ExitStack()  # the run's engine, for the whole window
    engine = borrowed.enter_context(Engine.borrow(home.engine_db))
    out: dict[str, TargetErased | Exception] = {}
    try:
        subjects: dict[str, Any] = {}
        for rid in request_ids:
            try:
                subjects[rid] = request_records.load_envelope(engine, rid).subject
            except Exception as exc:  # one request's failure must not stop the window
                out[rid] = exc
        erased: dict[str, _Erased] = {}
        # hook (issue 25): a target served by a running server is erased only while it is down.
        server = server_of(target) if subjects else None  # nothing to erase: no stop
        with quiesced(server, "the erasure", tuple(subjects)) as window:
            for rid, subject in subjects.items():
                try:
                    erased[rid] = _erase_one(rid, subject, target, eraser, home, served=window.control is not None)
                except Exception as exc:
                    out[rid] = exc
        for rid, done in erased.items():
            try:
                out[rid] = _record(engine, rid, target, eraser, home, done, window)
            except Exception as exc:
                out[rid] = exc
        return {rid: out[rid] for rid in request_ids}
    finally:
        borrowed.close()


def _erase_one(rid: str, subject: Any, target: Target, eraser: Any, home: Home, *, served: bool) -> _Erased:
    started = datetime.now(UTC)
    mentions = eraser.mentions(target, subject)
    keeper = epoch_keeper(eraser)  # its epoch advances inside the deletes' transaction (issue 26)
    outcomes = keeper.erase(target, subject, rid) if keeper else eraser.erase(target, subject)
    if served and not any(o.after for o in outcomes.values()):
        from tasks.epochs import advance_target

        advance_target(target, home, rid)  # the epoch lives in the folder: written while down
    return _Erased(started, datetime.now(UTC), mentions, outcomes)


def _record(
    engine: Any, request_id: str, target: Target, eraser: Any, home: Home, done: _Erased, window: Window
) -> TargetErased:
    """One request's step records (with the window's outage) and exceptions; raises when the server did
    not come back or items are left."""
    outcomes = done.outcomes
    left: list[str] = []
    for tier in CASCADE_ORDER:
        if tier not in eraser.tiers:
            record = StepRecord(
                request_id=request_id,
                step=tier.value,
                target=target.name,
                status=StepStatus.skipped,
                started_at=done.started,
                ended_at=done.ended,
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
                started_at=done.started,
                ended_at=done.ended,
                detail=with_outage({"kind": target.kind, **(out.detail if out else {})}, window),
            )
        request_records.upsert_step(engine, record)
    if done.mentions:
        request_records.open_exception(
            engine,
            request_id,
            BYTES_SCOPE,
            "mention_reported",
            f"target:{target.name}",
            {"target": target.name, "items": done.mentions},
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
        "mentions": done.mentions,
        "tiers": {t.value: [o.before, o.after] for t, o in outcomes.items()},
    }


def record_outage(home: Home, request_ids: list[str], target: Target, window: Window) -> None:
    """Add an outage of the target's server (the verification's) to the step records of every request it
    covered, and rewrite their steps.jsonl: the pack then states every outage, not the first only."""
    if window.control is None:
        return
    with Engine.borrow(home.engine_db) as engine:
        for rid in request_ids:
            steps = [
                s
                for s in request_records.target_steps(engine, rid)
                if s.target == target.name and s.status is not StepStatus.skipped
            ]
            for s in steps:
                failed = s.status is StepStatus.failed or window.start_error is not None
                request_records.upsert_step(
                    engine,
                    s.model_copy(
                        update={
                            "detail": with_outage(s.detail, window),
                            "status": StepStatus.failed if failed else s.status,
                        }
                    ),
                )
            if steps:
                write_steps_jsonl(engine, rid, home.run_dir(rid))


def count_target(target: Target, subject: Any, request_id: str, home: Home) -> dict[str, int | None]:
    """Per tier of the nine, the request's subject's items in `target` now (None: the kind holds no such
    tier; a tier the request's data classes leave out: None too, where the kind counts per request)."""
    eraser = eraser_for(target)
    eraser.check(target)
    per_request = getattr(eraser, "count_request", None)  # the reference store counts the cascade's footprint
    if per_request is not None:
        found: dict[str, int] = per_request(target, request_id, home)
        return {t.value: found.get(t.value) for t in CASCADE_ORDER}
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
        request_records.open_exception(
            engine,
            request_id,
            BYTES_SCOPE,
            BEYOND_REACH,
            key,
            {"target": target.name, "what": item["what"], **item.get("detail", {})},
            str(item["ground"]),
        )
    for e in request_records.exceptions(engine, request_id, open_only=True):
        if e.kind == BEYOND_REACH and e.item_key.startswith(prefix) and e.item_key not in keep:
            request_records.close_exception(engine, e.exception_id)
    return len(keep)
