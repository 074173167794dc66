"""Step 4, vectors: every frame vector and chunk vector of every erased frame and chunk.

vec0 tables have no foreign keys: chunk vectors are keyed by chunk id and survive the deletion of
their frame (reference 000, leak #1). The episodic step wrote the chunk ids to the footprint before
the chunks went, so this step reaches them."""

from __future__ import annotations

from typing import ClassVar

from erasure.tiers import Tier
from memory.frames import chunk_ids_of, delete_chunk_vectors, delete_frame_vectors
from tasks.tier_step import BaseStep, Keys, StepContext, ints


def _present(ctx: StepContext, table: str, column: str, ids: list[int]) -> list[int]:
    # vec0 answers point lookups on its primary key; an IN list is not pushed down to it.
    return [
        i for i in ids if ctx.store.execute(f"SELECT 1 FROM {table} WHERE {column} = ?", (i,)).fetchone() is not None
    ]


class VectorsStep(BaseStep):
    tier: ClassVar[Tier] = Tier.vectors

    def resolve(self, ctx: StepContext) -> Keys:
        frames = sorted(ctx.frames)
        return {"frame": {str(f) for f in frames}, "chunk": {str(c) for c in chunk_ids_of(ctx.store, frames)}}

    def count(self, ctx: StepContext, keys: Keys) -> int:
        return len(_present(ctx, "frame_vectors", "frame_id", ints(keys, "frame"))) + len(
            _present(ctx, "chunk_vectors", "chunk_id", ints(keys, "chunk"))
        )

    def erase(self, ctx: StepContext, keys: Keys, limit: int) -> int:
        chunks = _present(ctx, "chunk_vectors", "chunk_id", ints(keys, "chunk"))[:limit]
        n_chunks = delete_chunk_vectors(ctx.store, chunks)
        frames = _present(ctx, "frame_vectors", "frame_id", ints(keys, "frame"))[: max(limit - len(chunks), 0)]
        n_frames = delete_frame_vectors(ctx.store, frames)
        ctx.add_detail(chunk_vectors=n_chunks, frame_vectors=n_frames)
        return n_chunks + n_frames
