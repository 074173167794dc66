"""Runs one cascade step for one request: resolve, count, erase in bounded batches, record.

Each batch is one store transaction holding the deletes, the audit entry and the `erased_subjects`
rows; after its commit the WAL is checkpointed (TRUNCATE) so the erased bytes leave the -wal file.
A step is done when its residue is 0. Rerunning a step after a crash anywhere reaches the same end
state with exactly one record per step: the record is upserted, the footprint only grows, and each
erase starts from what still exists.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw

from erasure import epoch, request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import ErasureError, HoldActive
from erasure.identity import Identity
from erasure.models import StepRecord, StepStatus, removed_digest
from erasure.sqlite import checkpoint_truncate, transaction
from erasure.tiers import ALWAYS_RUN, CASCADE_ORDER, Tier
from memory import audit, holds, keyed, suppression
from memory.schema import open_store
from tasks import mentions
from tasks.audit_log import AuditLogStep
from tasks.crash import maybe_crash
from tasks.derivatives import DerivativesStep
from tasks.episodic import EpisodicStep
from tasks.fine_tune import FineTuneStep
from tasks.identity import StoreIds, resolve_store_ids
from tasks.resolve import archive_ids, derived_closure, primary_frames, quoting_frames, subject_items, subject_sources
from tasks.scrub import scrub_store
from tasks.semantic import SemanticStep
from tasks.subprocessors import SubprocessorsStep, call_processors
from tasks.tier_step import ExceptionSpec, Keys, StepContext, TierStep
from tasks.uploads import UploadsStep
from tasks.vectors import VectorsStep
from tasks.working import WorkingStep

STEPS: dict[Tier, TierStep] = {
    Tier.working: WorkingStep(),
    Tier.episodic: EpisodicStep(),
    Tier.semantic: SemanticStep(),
    Tier.vectors: VectorsStep(),
    Tier.fine_tune: FineTuneStep(),
    Tier.uploads: UploadsStep(),
    Tier.derivatives: DerivativesStep(),
    Tier.subprocessors: SubprocessorsStep(),
    Tier.audit_log: AuditLogStep(),
}
MAX_BATCHES = 100_000
FINISHED = frozenset({StepStatus.erased, StepStatus.exception})
ACTOR = "erasure-engine"


class StepIncomplete(ErasureError):
    """A step ended with residue or a retryable exception: the run must not count it as done."""


_WINDOW: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("erasure_window", default=())


@contextmanager
def window(request_ids: list[str]) -> Iterator[None]:
    """Steps run inside this block know the other requests of their erasure window (`StepContext.co_requests`)."""
    token = _WINDOW.set(tuple(request_ids))
    try:
        yield
    finally:
        _WINDOW.reset(token)


_RESOLVED: dict[tuple[str, str], StoreIds | None] = {}
"""Inside `shared_mentions`: each request's store ids once resolved (None until then), by store and request."""


@contextmanager
def shared_mentions(request_ids: list[str], home: Home) -> Iterator[None]:
    """Inside this block the mention searches of these requests' subjects share one index of the store
    (`tasks.mentions.shared`): the text sources are read once for all of them, not once per step; and
    each request's store ids are resolved once (the first resolution holds every id the run erases; an
    alias that appears later is for the next run, and the probes, which resolve on their own, see it)."""
    with Engine.borrow(home.engine_db) as engine:
        whos = [Identity.of(request_records.load_envelope(engine, rid).subject) for rid in request_ids]
    keys = [(str(home.store_dir), rid) for rid in request_ids]
    _RESOLVED.update(dict.fromkeys(keys))
    try:
        with mentions.shared(home.store_dir, whos):
            yield
    finally:
        for key in keys:
            _RESOLVED.pop(key, None)


def _store_ids(
    store: apsw.Connection, engine: apsw.Connection, request_id: str, identity: Identity, store_dir: Path
) -> StoreIds:
    """The subject's store ids (`resolve_store_ids`), resolved once per request inside `shared_mentions`."""
    key = (str(store_dir), request_id)
    found = _RESOLVED.get(key)
    if found is None:
        found = resolve_store_ids(
            store, identity, confirmed_aliases=request_records.confirmed_aliases(engine, request_id)
        )
        if key in _RESOLVED:
            _RESOLVED[key] = found
    return found


def _now() -> datetime:
    return datetime.now(UTC)


@contextmanager
def open_context(
    request_id: str, home: Home, *, batch_size: int = 10_000, quoting: bool = True, frames: bool = True
) -> Iterator[StepContext]:
    """Open the engine and the store, load the subject from the vault, and gather what is known of
    the subject's sources and frames (footprint first, then a live resolution).

    `quoting` adds the derived frames that quote the subject without a reference (a search of the
    text): `prepare` writes them to the footprint, and the derivatives step, which deletes them, finds
    them again itself, so the other steps reach them through the footprint and skip the search.
    `frames=False` leaves `ctx.frames` empty (the scrub needs only the subject's ids)."""
    with Engine.borrow(home.engine_db) as engine:
        store = open_store(home.store_dir)
        try:
            envelope = request_records.load_envelope(engine, request_id)
            subject = envelope.subject
            identity = Identity.of(subject)
            found = _store_ids(store, engine, request_id, identity, home.store_dir)
            known_ids = request_records.store_ids(engine, request_id)
            if set(found.all()) - known_ids:
                request_records.add_store_ids(engine, request_id, sorted(set(found.all()) - known_ids))
            subject_ids = tuple(sorted({subject.id, *known_ids, *found.all()}))
            stored = {
                tuple(json.loads(k)) for k in request_records.footprint(engine, request_id, Tier.episodic, "source")
            }
            live: set[tuple[str, str]] = set()
            for sid in subject_ids:
                live |= subject_sources(store, sid)
            if live - stored:
                request_records.add_footprint(
                    engine, request_id, Tier.episodic, "source", [json.dumps(list(s)) for s in sorted(live - stored)]
                )
            sources = sorted(stored | live)
            secret = keyed.identity_secret(store)
            known_items = {
                tuple(json.loads(k)) for k in request_records.footprint(engine, request_id, Tier.episodic, "item")
            }
            live_items: set[tuple[str, str, str]] = set()
            for sid in subject_ids:
                live_items |= subject_items(store, secret, sid)
            if live_items - known_items:
                request_records.add_footprint(
                    engine,
                    request_id,
                    Tier.episodic,
                    "item",
                    [json.dumps(list(i)) for i in sorted(live_items - known_items)],
                )
            ctx = StepContext(
                request_id=request_id,
                subject=subject,
                store_dir=home.store_dir,
                store=store,
                engine=engine,
                evidence_dir=home.run_dir(request_id),
                sources=[(str(a), str(b)) for a, b in sources],
                batch_size=batch_size,
                subject_ids=subject_ids,
                identity=identity,
                co_requests=tuple(r for r in _WINDOW.get() if r != request_id),
                items=[(str(a), str(b), str(c)) for a, b, c in sorted(known_items | live_items)],
            )
            if frames:
                known = {int(f) for f in request_records.footprint(engine, request_id, Tier.episodic, "frame")}
                known |= {int(f) for f in request_records.footprint(engine, request_id, Tier.derivatives, "derived")}
                primary: set[int] = set()
                for sid in subject_ids:
                    primary |= primary_frames(store, sid, archive_ids(store, sid))
                quoted = quoting_frames(store, identity) if quoting else set()
                ctx.frames = known | primary | quoted | derived_closure(store, known | primary | quoted)
            yield ctx
        finally:
            store.close()


def _tier_keys(ctx: StepContext, tier: Tier, step: TierStep) -> Keys:
    """Footprint ∪ live resolution for one tier; new keys are added to the footprint."""
    live = step.resolve(ctx)
    keys: Keys = {}
    for kind in sorted(set(live) | _kinds(ctx, tier)):
        stored = request_records.footprint(ctx.engine, ctx.request_id, tier, kind)
        new = live.get(kind, set()) - stored
        if new:
            request_records.add_footprint(ctx.engine, ctx.request_id, tier, kind, sorted(new))
        keys[kind] = stored | live.get(kind, set())
    return keys


def _kinds(ctx: StepContext, tier: Tier) -> set[str]:
    return {
        r[0]
        for r in ctx.engine.execute(
            "SELECT DISTINCT kind FROM footprint WHERE request_id = ? AND tier = ?", (ctx.request_id, tier.value)
        )
    }


def prepare(request_id: str, home: Home) -> dict[str, int]:
    """Resolve the subject's whole footprint before the first deletion; returns item counts per tier."""
    envelope_tiers = set(_data_classes(request_id, home))
    with open_context(request_id, home) as ctx:
        request_records.add_footprint(
            ctx.engine, request_id, Tier.episodic, "frame", sorted(str(f) for f in ctx.frames)
        )
        out: dict[str, int] = {}
        for tier in CASCADE_ORDER:
            if tier in envelope_tiers or tier in ALWAYS_RUN:
                step = STEPS[tier]
                out[tier.value] = step.count(ctx, _tier_keys(ctx, tier, step))
        return out


def preview(request_id: str, home: Home) -> dict[str, Any]:
    """What a run of the request would meet now, erasing nothing (`erasure mcp`'s preview): per tier
    the subject's items (`items`, as `prepare` counts them) and the mentions in other people's items it
    would report rather than redact (`reported`: ambiguous, unredactable, or every one under the
    `report` policy), and the active holds on the subject's store ids (`holds`). Counts only. It writes
    the request's footprint, so the caller runs it on a scratch engine.

    Raises `IdentityConflict` when the request's email also belongs to other subject ids of the store."""
    envelope_tiers = set(_data_classes(request_id, home))
    items: dict[str, int] = {}
    reported: dict[str, int] = {}
    with open_context(request_id, home) as ctx:
        held = sum(holds.active_holds(ctx.store, sid) for sid in ctx.ids())
        for tier in CASCADE_ORDER:
            if tier in envelope_tiers or tier in ALWAYS_RUN:
                step = STEPS[tier]
                keys = _tier_keys(ctx, tier, step)
                items[tier.value] = step.count(ctx, keys)
                reported[tier.value] = sum(
                    int(e.detail.get("mentions", sum(v for v in e.detail.values() if isinstance(v, int))))
                    for e in step.exceptions(ctx, keys)
                    if e.kind.startswith("mention_")
                )
    return {"items": items, "reported": reported, "holds": held}


def call_subprocessors(request_id: str, home: Home) -> None:
    """Step 8's HTTP calls (`tasks.subprocessors.call_processors`), made before the run takes the
    store's lock: no lock of ours held, nothing written to the store. Skipped when the request's data
    classes leave subprocessors out; `HoldActive` (nothing asked) when the subject is under a hold."""
    if Tier.subprocessors not in _data_classes(request_id, home):
        return
    with open_context(request_id, home, quoting=False, frames=False) as ctx:
        held = sum(holds.active_holds(ctx.store, sid) for sid in ctx.ids())
        if held:
            raise HoldActive(f"subprocessor calls refused: {held} active litigation hold(s) on the subject")
        found: set[int] = set()
        if mentions.policy() == "redact":  # other people's archive rows naming the subject, with a processor's copy
            own: set[int] = set()
            for sid in ctx.ids():
                own |= archive_ids(ctx.store, sid)
            found = {
                int(a) for a in request_records.footprint(ctx.engine, request_id, Tier.episodic, "mention_archive")
            }
            who = ctx.who()
            for aid, text in ctx.store.execute(
                "SELECT DISTINCT a.archive_id, a.content FROM raw_archive a JOIN subprocessor_records r"
                " ON r.source = a.source AND r.source_ref = a.source_ref"
                " WHERE r.remote_ref IS NOT NULL AND a.erased_at IS NULL AND a.content IS NOT NULL"
            ):
                if int(aid) not in own and who.names_in(str(text)):
                    found.add(int(aid))
        call_processors(ctx, EpisodicStep().texts_after(ctx, found) if found else {})


def _data_classes(request_id: str, home: Home) -> tuple[Tier, ...]:
    with Engine.borrow(home.engine_db) as engine:
        return request_records.get(engine, request_id).data_classes


def _record_batch(ctx: StepContext, tier: Tier, batch: int, removed: int) -> None:
    """Inside the batch's transaction: sticky-erasure rows (one per item of the subject, never its
    conversation) and the audit entry (ids and counts only)."""
    for source, ref, key in ctx.items:
        suppression.record(ctx.store, source, ref, ctx.request_id, key)
    suppression.record_identity(ctx.store, ctx.subject, ctx.request_id, also_ids=ctx.ids())
    audit.append(
        ctx.store,
        "erasure.step",
        ACTOR,
        {"request_id": ctx.request_id, "step": tier.value, "batch": batch, "removed": removed},
    )
    epoch.advance(ctx.store, ctx.request_id)  # hook (issue 26): the store's erasure epoch, same transaction


def _checkpoint(ctx: StepContext) -> None:
    """Checkpoint after a commit; a checkpoint a reader kept busy is counted in the step's detail."""
    if checkpoint_truncate(ctx.store)[0]:
        ctx.add_detail(checkpoint_busy=1)


def _digest(keys: Keys) -> str:
    return removed_digest(f"{kind}:{k}" for kind, ks in keys.items() for k in ks)


def count_step(request_id: str, tier: Tier, home: Home) -> int:
    """The items one tier's step of the request would erase now (its footprint grows as it resolves)."""
    step = STEPS[tier]
    with open_context(request_id, home) as ctx:
        return step.count(ctx, _tier_keys(ctx, tier, step))


def run_step(
    request_id: str, tier: Tier, home: Home, *, batch_size: int = 10_000, before: int | None = None
) -> dict[str, Any]:
    """Run one tier's step to completion and return its record (ids and counts only). `before`: the
    step's count taken earlier in its window (`count_step`), kept as the record's before count.

    Raises `StepIncomplete` after recording when residue remains or a retryable exception (a
    processor that did not confirm) is open, so the orchestrator does not treat it as finished, and
    `HoldActive` before touching anything when the subject is under a litigation hold.
    """
    if tier not in _data_classes(request_id, home) and tier not in ALWAYS_RUN:
        return _skip(request_id, tier, home)
    step = STEPS[tier]
    with open_context(request_id, home, batch_size=batch_size, quoting=False) as ctx:
        held = sum(holds.active_holds(ctx.store, sid) for sid in ctx.ids())
        if held:  # hold wins, also over a run that passed preflight before the hold was placed
            raise HoldActive(
                f"step {tier.value} refused: {held} active litigation hold(s) on the subject; nothing erased"
            )
        keys = _tier_keys(ctx, tier, step)
        prev = {s.step: s for s in request_records.steps(ctx.engine, request_id)}.get(tier.value)
        counted = before
        before = step.count(ctx, keys)
        if prev is not None and prev.status in FINISHED and before == 0:
            kept = _keep_finished(ctx, tier, step, keys, prev)
            if kept is not None:
                return kept
        if prev is not None and prev.before_count is not None:
            before = max(before, prev.before_count)  # a resumed step keeps its first count
        if counted is not None:
            before = max(before, counted)  # counted before a co-request of its window erased a shared whole
        started = _now()
        request_records.upsert_step(
            ctx.engine,
            StepRecord(
                request_id=request_id,
                step=tier.value,
                status=StepStatus.running,
                before_count=before,
                started_at=started,
            ),
        )
        maybe_crash(f"start:{tier.value}")
        removed = 0
        if getattr(step, "transactional", True):
            for batch in range(MAX_BATCHES):
                with transaction(ctx.store):
                    n = step.erase(ctx, keys, ctx.batch_size)
                    if n:
                        _record_batch(ctx, tier, batch, n)
                    maybe_crash(f"mid:{tier.value}:{batch}")
                _checkpoint(ctx)
                maybe_crash(f"batch:{tier.value}:{batch}")
                removed += n
                if n == 0:
                    break
        else:
            removed = step.erase(ctx, keys, ctx.batch_size)
            with transaction(ctx.store):
                _record_batch(ctx, tier, 0, removed)
            _checkpoint(ctx)
        after = step.count(ctx, keys)
        specs = step.exceptions(ctx, keys)
        for spec in specs:
            request_records.open_exception(
                ctx.engine, request_id, tier, spec.kind, spec.item_key, spec.detail, spec.ground
            )
        current = {(s.kind, s.item_key) for s in specs}
        for row in request_records.exceptions(ctx.engine, request_id, open_only=True):
            if row.tier == tier.value and (row.kind, row.item_key) not in current:
                request_records.close_exception(ctx.engine, row.exception_id)  # resolved by this run
        _close_resolved(ctx, tier, step, specs)
        status = _status(after, specs)
        detail = {
            **ctx.detail,
            "removed_this_run": removed,
            "exceptions": len(specs),
            "items": {k: len(v) for k, v in sorted(keys.items())},
        }
        record = StepRecord(
            request_id=request_id,
            step=tier.value,
            status=status,
            before_count=before,
            after_count=after,
            started_at=started,
            ended_at=_now(),
            removed_digest=_digest(keys),
            detail=detail,
        )
        request_records.upsert_step(ctx.engine, record)
        write_steps_jsonl(ctx.engine, request_id, ctx.evidence_dir)
        maybe_crash(f"end:{tier.value}")
        if status == StepStatus.failed:
            raise StepIncomplete(f"step {tier.value} left {after} item(s) or an unconfirmed processor")
        return record.model_dump(mode="json")


def _status(after: int, specs: list[ExceptionSpec]) -> StepStatus:
    if after > 0 or any(s.retryable for s in specs):
        return StepStatus.failed
    return StepStatus.exception if specs else StepStatus.erased


def _keep_finished(ctx: StepContext, tier: Tier, step: TierStep, keys: Keys, prev: StepRecord) -> dict[str, Any] | None:
    """A finished step that finds nothing left keeps the record of the run that did the work (its
    counts, digest and times): a rerun after a crash past the record must not rewrite it as "0 of 0".
    Returns None when the step's status would change (a new exception): then it runs normally."""
    specs = step.exceptions(ctx, keys)
    if _status(0, specs) != prev.status:
        return None
    for spec in specs:
        request_records.open_exception(
            ctx.engine, ctx.request_id, tier, spec.kind, spec.item_key, spec.detail, spec.ground
        )
    _close_resolved(ctx, tier, step, specs)
    write_steps_jsonl(ctx.engine, ctx.request_id, ctx.evidence_dir)
    return prev.model_dump(mode="json")


def _close_resolved(ctx: StepContext, tier: Tier, step: TierStep, specs: list[ExceptionSpec]) -> None:
    """Close the open exceptions of kinds this step can resolve that it no longer reports."""
    kinds: frozenset[str] = getattr(step, "resolvable_kinds", frozenset())
    reported = {(s.kind, s.item_key) for s in specs}
    for row in request_records.exceptions(ctx.engine, ctx.request_id, open_only=True):
        if row.tier == tier.value and row.kind in kinds and (row.kind, row.item_key) not in reported:
            request_records.close_exception(ctx.engine, row.exception_id)


def _skip(request_id: str, tier: Tier, home: Home) -> dict[str, Any]:
    with Engine.borrow(home.engine_db) as engine:
        now = _now()
        record = StepRecord(
            request_id=request_id,
            step=tier.value,
            status=StepStatus.skipped,
            started_at=now,
            ended_at=now,
            detail={"reason": "not in the request's data classes"},
        )
        request_records.upsert_step(engine, record)
        write_steps_jsonl(engine, request_id, home.run_dir(request_id))
        return record.model_dump(mode="json")


def write_steps_jsonl(engine: apsw.Connection, request_id: str, evidence_dir: Path) -> None:
    """Rewrite `steps.jsonl` from the engine's records: one line per step of the reference store, in
    cascade order, then one per (target, step) of the other targets, each with its `target`."""
    evidence_dir.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(s.model_dump(mode="json", exclude={"target"}), sort_keys=True)
        for s in request_records.steps(engine, request_id)
    ]
    lines += [
        json.dumps(s.model_dump(mode="json"), sort_keys=True) for s in request_records.target_steps(engine, request_id)
    ]
    tmp = evidence_dir / "steps.jsonl.tmp"
    tmp.write_text("".join(line + "\n" for line in lines))
    tmp.replace(evidence_dir / "steps.jsonl")


def run_cascade(request_id: str, home: Home, *, batch_size: int = 10_000) -> list[dict[str, Any]]:
    """The reference store's nine steps in order, then the byte scrub, for one request: no preflight,
    verification or pack (tests, crash drills, benches; a run is `service.cascade`, which calls the
    same functions stage by stage). Stops at the first step that cannot finish, after recording it."""
    call_subprocessors(request_id, home)
    with shared_mentions([request_id], home):
        prepare(request_id, home)
        records = [run_step(request_id, tier, home, batch_size=batch_size) for tier in CASCADE_ORDER]
    scrub(request_id, home)
    return records


def scrub(request_id: str, home: Home) -> dict[str, Any]:
    """The cascade's epilogue for one request (`scrub_window` of one)."""
    return scrub_window([request_id], home)


def scrub_window(request_ids: list[str], home: Home) -> dict[str, Any]:
    """The epilogue of a window's cascades: per request, sticky identity hashes (also for a subject the
    store held nothing of, whose batches never ran) and the subject's rejected inbox envelopes purged;
    then ONE byte-hygiene pass over the store (`tasks.scrub`), recorded as an engine event of every
    request (sizes and seconds)."""
    from erasure.inbox import purge_rejected_for

    purged: dict[str, int] = {}
    for request_id in request_ids:
        with open_context(request_id, home, frames=False) as ctx:
            with transaction(ctx.store):
                suppression.record_identity(ctx.store, ctx.subject, request_id, also_ids=ctx.ids())
                epoch.advance(ctx.store, request_id)  # hook (issue 26): also for a subject the store held nothing of
            purged[request_id] = purge_rejected_for(home, ctx.subject)
    report = scrub_store(home.store_dir)
    with Engine.borrow(home.engine_db) as engine:
        for request_id in request_ids:
            request_records.log_event(
                engine,
                request_id,
                "store.scrubbed",
                {**report, "inbox_rejected_purged": purged[request_id], "window_requests": len(request_ids)},
            )
    return report
