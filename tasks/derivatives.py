"""Step 7, derivatives: derived frames that reference or quote the subject's frames (to a fixpoint),
the FTS rows of every erased frame, and recall-cache rows built from them.

Derived frames go through `purge_frames`, the complete delete: they were found after the vectors
step may have run, so their own vectors and chunks must go with them."""

from __future__ import annotations

from typing import ClassVar

from erasure.tiers import Tier
from memory.frames import delete_cache_rows, delete_fts_rows, purge_frames
from tasks.resolve import derived_closure, quoting_frames
from tasks.tier_step import BaseStep, Keys, StepContext, existing, in_list, ints


class DerivativesStep(BaseStep):
    tier: ClassVar[Tier] = Tier.derivatives

    def resolve(self, ctx: StepContext) -> Keys:
        quoted = quoting_frames(ctx.store, ctx.who())
        derived = derived_closure(ctx.store, ctx.frames | quoted) | quoted
        fts = ctx.frames | derived
        return {"derived": {str(d) for d in derived}, "fts": {str(f) for f in fts}}

    def _fts(self, ctx: StepContext, keys: Keys) -> list[int]:
        return existing(ctx.store, "frames_fts", "rowid", ints(keys, "fts") + ints(keys, "derived"))

    def _cache(self, ctx: StepContext, keys: Keys) -> list[int]:
        ids = ints(keys, "fts") + ints(keys, "derived")
        out: list[int] = []
        for i in range(0, len(ids), 500):
            b = ids[i : i + 500]
            out += [
                int(r[0])
                for r in ctx.store.execute(
                    f"SELECT cache_id FROM recall_cache WHERE frame_id IN ({in_list(len(b))})", b
                )
            ]
        return out

    def count(self, ctx: StepContext, keys: Keys) -> int:
        derived = existing(ctx.store, "frames", "frame_id", ints(keys, "derived"))
        return len(derived) + len(self._fts(ctx, keys)) + len(self._cache(ctx, keys))

    def erase(self, ctx: StepContext, keys: Keys, limit: int) -> int:
        derived = sorted(existing(ctx.store, "frames", "frame_id", ints(keys, "derived")))[:limit]
        counts = purge_frames(ctx.store, derived)
        fts = sorted(self._fts(ctx, keys))[: max(limit - len(derived), 0)]
        n_fts = delete_fts_rows(ctx.store, fts)
        cache_frames = ints(keys, "fts")
        n_cache = delete_cache_rows(ctx.store, cache_frames)
        ctx.add_detail(
            derived_frames=counts["frames"],
            fts_rows=n_fts + counts["fts_rows"],
            cache_rows=n_cache + counts["cache_rows"],
            derived_vectors=counts["frame_vectors"] + counts["chunk_vectors"],
        )
        return counts["frames"] + n_fts + n_cache
