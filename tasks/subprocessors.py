"""Step 8, subprocessors: ask every processor that holds the subject's records to delete them, over
real HTTP, and keep its receipt (ticket id, status, times). Asynchronous deletions are polled;
transient errors are retried with backoff; a processor that keeps failing is an exception, never a
success.

The step has two halves (issue 34: no network call while the store's lock is held). `call_processors`
makes every HTTP call, before the run takes the store's lock and writer slot: the deletions (receipts
in the engine) and the rectifications of processors' copies of other people's items that named the
subject (with the text the episodic step will leave). It writes nothing to the store, so a slow
processor keeps no other erasure of the store waiting. The locked step (`SubprocessorsStep`, in
cascade order between derivatives and the audit log, one record as before) makes no call: it drops a
processor's local records in a short transaction once its receipt says done, and a processor without
a done receipt (or a mention not rectified) fails it, retryable: the next run calls again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from erasure import request_records
from erasure.clocks import parse_utc
from erasure.sqlite import one, transaction
from erasure.tiers import Tier
from memory import subprocessors as sp
from tasks import mentions
from tasks.tier_step import BaseStep, ExceptionSpec, Keys, StepContext

RECTIFIED = "rectified"
UNKNOWN = "rectified_unknown"
"""Footprint kinds of the step: mention records rectified, and those the processor did not know."""


class SubprocessorsStep(BaseStep):
    tier: ClassVar[Tier] = Tier.subprocessors
    transactional: ClassVar[bool] = False
    resolvable_kinds: ClassVar[frozenset[str]] = frozenset({"subprocessor_not_confirmed"})

    def resolve(self, ctx: StepContext) -> Keys:
        names = {
            r[0]
            for sid in ctx.ids()
            for r in ctx.store.execute(
                "SELECT DISTINCT processor FROM subprocessor_records WHERE subject_id = ?", (sid,)
            )
        }
        archives = request_records.footprint(ctx.engine, ctx.request_id, Tier.episodic, "mention_archive")
        return {"processor": set(names), "mention_record": set(mention_records(ctx, {int(a) for a in archives}))}

    def _unrectified(self, ctx: StepContext, keys: Keys) -> list[str]:
        done = request_records.footprint(ctx.engine, ctx.request_id, self.tier, RECTIFIED)
        return sorted(set(keys.get("mention_record", set())) - done, key=int)

    def _done(self, ctx: StepContext) -> set[str]:
        return {r.processor for r in request_records.receipts(ctx.engine, ctx.request_id) if r.status == "done"}

    def _records_left(self, ctx: StepContext, name: str) -> int:
        sql = "SELECT count(*) FROM subprocessor_records WHERE processor = ? AND subject_id = ?"
        return sum(int(one(ctx.store, sql, (name, sid))[0]) for sid in ctx.ids())

    def count(self, ctx: StepContext, keys: Keys) -> int:
        done = self._done(ctx)
        return sum(1 for n in keys.get("processor", set()) if n not in done or self._records_left(ctx, n) > 0) + len(
            self._unrectified(ctx, keys)
        )

    def erase(self, ctx: StepContext, keys: Keys, limit: int) -> int:
        """No HTTP here (`call_processors` made the calls): drop the local records of every processor
        whose receipt says done; count what the calls did into the step's record."""
        done = self._done(ctx)
        finished = 0
        for name in sorted(keys.get("processor", set())):
            if name not in done:
                ctx.add_detail(processors_failed=1)
            elif self._records_left(ctx, name):
                with transaction(ctx.store):
                    for sid in ctx.ids():
                        ctx.store.execute(
                            "DELETE FROM subprocessor_records WHERE processor = ? AND subject_id = ?", (name, sid)
                        )
                finished += 1
                ctx.add_detail(processors_confirmed=1)
        records = set(keys.get("mention_record", set()))
        if records:
            rectified = records & request_records.footprint(ctx.engine, ctx.request_id, self.tier, RECTIFIED)
            unknown = records & request_records.footprint(ctx.engine, ctx.request_id, self.tier, UNKNOWN)
            ctx.add_detail(mentions_rectified=len(rectified - unknown), mention_records_unknown=len(unknown))
        return finished

    def exceptions(self, ctx: StepContext, keys: Keys) -> list[ExceptionSpec]:
        done = self._done(ctx)
        return [
            ExceptionSpec(
                kind="subprocessor_not_confirmed",
                item_key=name,
                detail={"action": "retry the request; escalate to the processor"},
                retryable=True,
            )
            for name in sorted(keys.get("processor", set()))
            if name not in done
        ]


def mention_records(ctx: StepContext, archive_ids: set[int]) -> dict[str, int]:
    """Processors' copies (record id -> archive id) of the archive rows `archive_ids`: other people's
    items whose text named the subject, rectified with the redacted text. None under `report`."""
    if mentions.policy() != "redact":
        return {}
    out: dict[str, int] = {}
    for aid in sorted(archive_ids):
        for (rid,) in ctx.store.execute(
            "SELECT r.record_id FROM raw_archive a JOIN subprocessor_records r"
            " ON r.source = a.source AND r.source_ref = a.source_ref"
            " WHERE a.archive_id = ? AND r.remote_ref IS NOT NULL",
            (aid,),
        ):
            out[str(rid)] = aid
    return out


def call_processors(ctx: StepContext, texts: Mapping[int, str]) -> None:
    """Step 8's HTTP, made with no lock of the store held and nothing written to it: rectify each
    processor's copy of a mention (`texts`: archive id -> the text it has once the episodic step ran)
    not yet rectified, then ask every processor that holds the subject and has no done receipt to
    delete, recording its receipt. Idempotent: what a receipt or the footprint says is done is not
    asked again. A processor that fails gets a `failed` receipt (the locked step then fails, retryable)."""
    step = SubprocessorsStep()
    inventory = {p.name: p for p in sp.inventory(ctx.store)}
    done = request_records.footprint(ctx.engine, ctx.request_id, Tier.subprocessors, RECTIFIED)
    for rid, aid in sorted(mention_records(ctx, set(texts)).items(), key=lambda kv: int(kv[0])):
        row = ctx.store.execute(
            "SELECT processor, remote_ref FROM subprocessor_records WHERE record_id = ?", (int(rid),)
        ).fetchone()
        if rid in done or row is None or row[0] not in inventory:
            continue
        try:
            confirmed = sp.rectify(inventory[row[0]].base_url, str(row[1]), texts[aid])
        except sp.SubprocessorError as exc:
            _fail(ctx, str(row[0]), str(exc))
            continue
        request_records.add_footprint(ctx.engine, ctx.request_id, Tier.subprocessors, RECTIFIED, [rid])
        if not confirmed:
            request_records.add_footprint(ctx.engine, ctx.request_id, Tier.subprocessors, UNKNOWN, [rid])
    done_processors = step._done(ctx)
    for name in sorted(step.resolve(ctx)["processor"] - done_processors):
        proc = inventory.get(name)
        if proc is None:
            _fail(ctx, name, "processor missing from the inventory")
            continue
        held_under = [
            sid
            for sid in ctx.ids()
            if ctx.store.execute(
                "SELECT 1 FROM subprocessor_records WHERE processor = ? AND subject_id = ? LIMIT 1", (name, sid)
            ).fetchone()
        ] or [ctx.subject.id]
        try:
            for sid in held_under:  # one deletion per id the processor knows the subject by
                first = sp.request_deletion(proc.base_url, sid)
                receipt = first if first.status == "done" else sp.poll_job(proc.base_url, first.ticket_id)
                if receipt.status != "done":
                    break
        except sp.SubprocessorError as exc:
            _fail(ctx, name, str(exc))
            continue
        # The receipt keeps when WE asked (a polled job reports the processor's own clock) and
        # counts every HTTP request: the deletion call with its retries, then the polls.
        completed = parse_utc(receipt.completed_at) if receipt.completed_at else None
        attempts = first.attempts + (receipt.attempts if receipt is not first else 0)
        request_records.upsert_receipt(
            ctx.engine,
            ctx.request_id,
            name,
            receipt.status,
            ticket_id=receipt.ticket_id,
            completed_at=completed,
            attempts=attempts,
            detail={"http_status": receipt.http_status},
            now=parse_utc(first.requested_at),
        )


def _fail(ctx: StepContext, name: str, why: str) -> None:
    # `why` comes from our HTTP client (status codes, timeouts), never from the subject's data.
    request_records.upsert_receipt(ctx.engine, ctx.request_id, name, "failed", detail={"error": why[:300]})
