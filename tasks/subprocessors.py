"""Step 8, subprocessors: ask every processor that holds the subject's records to delete them, over
real HTTP, and keep its receipt (ticket id, status, times). Asynchronous deletions are polled;
transient errors are retried with backoff; a processor that keeps failing is an exception, never a
success. No HTTP call runs inside a store transaction: each processor's local records are dropped in
a short transaction of their own once its receipt says done."""

from __future__ import annotations

from typing import ClassVar

from erasure import request_records
from erasure.clocks import parse_utc
from erasure.sqlite import one, transaction
from erasure.tiers import Tier
from memory import subprocessors as sp
from tasks import mentions
from tasks.tier_step import BaseStep, ExceptionSpec, Keys, StepContext


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
        return {"processor": set(names), "mention_record": self._mention_records(ctx)}

    def _mention_records(self, ctx: StepContext) -> set[str]:
        """Processors' copies of other people's items whose text named the subject (the episodic step
        found and redacted those archive rows): they are rectified with the redacted text."""
        if mentions.policy() != "redact":
            return set()
        out: set[str] = set()
        for aid in sorted(request_records.footprint(ctx.engine, ctx.request_id, Tier.episodic, "mention_archive")):
            for (rid,) in ctx.store.execute(
                "SELECT r.record_id FROM raw_archive a JOIN subprocessor_records r"
                " ON r.source = a.source AND r.source_ref = a.source_ref"
                " WHERE a.archive_id = ? AND r.remote_ref IS NOT NULL",
                (int(aid),),
            ):
                out.add(str(rid))
        return out

    def _unrectified(self, ctx: StepContext, keys: Keys) -> list[str]:
        done = request_records.footprint(ctx.engine, ctx.request_id, self.tier, "rectified")
        return sorted(set(keys.get("mention_record", set())) - done, key=int)

    def _rectify(self, ctx: StepContext, keys: Keys) -> None:
        inventory = {p.name: p for p in sp.inventory(ctx.store)}
        for rid in self._unrectified(ctx, keys):
            row = ctx.store.execute(
                "SELECT r.processor, r.remote_ref, a.content FROM subprocessor_records r JOIN raw_archive a"
                " ON a.source = r.source AND a.source_ref = r.source_ref AND a.erased_at IS NULL"
                " WHERE r.record_id = ?",
                (int(rid),),
            ).fetchone()
            if row is None or row[0] not in inventory:
                continue
            try:
                confirmed = sp.rectify(inventory[row[0]].base_url, str(row[1]), str(row[2] or ""))
            except sp.SubprocessorError as exc:
                self._fail(ctx, str(row[0]), str(exc))
                continue
            request_records.add_footprint(ctx.engine, ctx.request_id, self.tier, "rectified", [rid])
            ctx.add_detail(mentions_rectified=1 if confirmed else 0, mention_records_unknown=0 if confirmed else 1)

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
        self._rectify(ctx, keys)
        inventory = {p.name: p for p in sp.inventory(ctx.store)}
        done = self._done(ctx)
        finished = 0
        for name in sorted(keys.get("processor", set())):
            if name not in done:
                proc = inventory.get(name)
                if proc is None:
                    self._fail(ctx, name, "processor missing from the inventory")
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
                    self._fail(ctx, name, str(exc))
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
                if receipt.status != "done":
                    continue
            if self._records_left(ctx, name):
                with transaction(ctx.store):
                    for sid in ctx.ids():
                        ctx.store.execute(
                            "DELETE FROM subprocessor_records WHERE processor = ? AND subject_id = ?", (name, sid)
                        )
                finished += 1
                ctx.add_detail(processors_confirmed=1)
        return finished

    def _fail(self, ctx: StepContext, name: str, why: str) -> None:
        # `why` comes from our HTTP client (status codes, timeouts), never from the subject's data.
        request_records.upsert_receipt(ctx.engine, ctx.request_id, name, "failed", detail={"error": why[:300]})
        ctx.add_detail(processors_failed=1)

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
