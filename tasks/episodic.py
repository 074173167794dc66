"""Step 2, episodic memory: summary frames, verbatim turn frames, and the raw archive.

Frames are deleted (their chunks, refs and entity links go by FK cascade); archive rows are redacted
to a skeleton (append-only: content and subject removed, the opaque uid rotated, erased_at set).
Before a batch of frames goes, its frame and chunk ids are written to the footprint of the vectors
and derivatives tiers, so later steps still reach what hung off them, even after a crash."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import ClassVar

from erasure import requests
from erasure.clocks import iso_utc
from erasure.tiers import Tier
from memory.frames import chunk_ids_of, delete_frame_rows
from tasks.base import BaseStep, Keys, StepContext, existing, ints
from tasks.resolve import archive_ids, primary_frames


class EpisodicStep(BaseStep):
    tier: ClassVar[Tier] = Tier.episodic

    def resolve(self, ctx: StepContext) -> Keys:
        archives = archive_ids(ctx.store, ctx.subject.id, ctx.sources)
        frames = primary_frames(ctx.store, ctx.subject.id, ctx.sources, archives)
        return {"archive": {str(a) for a in archives}, "frame": {str(f) for f in frames}}

    def _live_archives(self, ctx: StepContext, keys: Keys) -> list[int]:
        return existing(ctx.store, "raw_archive", "archive_id", ints(keys, "archive"),
                        extra=" AND erased_at IS NULL")

    def count(self, ctx: StepContext, keys: Keys) -> int:
        frames = existing(ctx.store, "frames", "frame_id", ints(keys, "frame"))
        return len(frames) + len(self._live_archives(ctx, keys))

    def erase(self, ctx: StepContext, keys: Keys, limit: int) -> int:
        frames = sorted(existing(ctx.store, "frames", "frame_id", ints(keys, "frame")))[:limit]
        if frames:
            chunks = chunk_ids_of(ctx.store, frames)
            # Write-ahead: later tiers must reach these after the rows that link them are gone.
            requests.add_footprint(ctx.engine, ctx.request_id, Tier.vectors, "frame", [str(f) for f in frames])
            requests.add_footprint(ctx.engine, ctx.request_id, Tier.vectors, "chunk", [str(c) for c in chunks])
            requests.add_footprint(ctx.engine, ctx.request_id, Tier.derivatives, "fts",
                                   [str(f) for f in frames])
            delete_frame_rows(ctx.store, frames)
            ctx.add_detail(frames=len(frames), chunks=len(chunks))
        room = limit - len(frames)
        archives = sorted(self._live_archives(ctx, keys))[:max(room, 0)]
        at = iso_utc(datetime.now(UTC))
        for aid in archives:
            ctx.store.execute(
                "UPDATE raw_archive SET content = NULL, subject_id = NULL, archive_uid = ?, erased_at = ?,"
                " erasure_ref = ? WHERE archive_id = ?",
                (secrets.token_hex(16), at, ctx.request_id, aid))
        ctx.add_detail(archive_redacted=len(archives))
        return len(frames) + len(archives)
