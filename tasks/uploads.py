"""Step 6, uploads: blob bytes in the primary and every replica location, then the rows.

Files go first, rows second: a crash between the two leaves rows that the next run finds again,
never bytes that nothing points at. Locations are the configured ones plus every location a blob
was recorded in."""

from __future__ import annotations

import json
from typing import ClassVar

import fsspec

from erasure.sqlite import one
from erasure.tiers import Tier
from memory.blobs import blob_file
from tasks.tier_step import BaseStep, Keys, StepContext, existing


def _locations(ctx: StepContext, key: str) -> set[str]:
    configured = set(json.loads(one(ctx.store, "SELECT value FROM store_meta WHERE key = 'blob_locations'")[0]))
    recorded = {r[0] for r in ctx.store.execute("SELECT location FROM blob_locations WHERE blob_key = ?", (key,))}
    return configured | recorded


class UploadsStep(BaseStep):
    tier: ClassVar[Tier] = Tier.uploads

    def resolve(self, ctx: StepContext) -> Keys:
        keys: set[str] = set()
        for sid in ctx.ids():
            keys |= {r[0] for r in ctx.store.execute("SELECT blob_key FROM blobs WHERE subject_id = ?", (sid,))}
        for source, ref in ctx.sources:
            keys |= {
                r[0]
                for r in ctx.store.execute(
                    "SELECT blob_key FROM blobs WHERE source = ? AND source_ref = ? AND subject_id IS NULL",
                    (source, ref),
                )
            }
        return {"blob": set(keys)}

    def _files(self, ctx: StepContext, key: str) -> list[tuple[fsspec.AbstractFileSystem, str]]:
        """The copies of `key` on disk; every path is checked first (`memory.blobs.blob_file`: a key or
        location from the rows that leads out of the store is a `StoreError`)."""
        paths = [blob_file(ctx.store_dir, loc, key) for loc in sorted(_locations(ctx, key))]
        return [(fs, path) for fs, path in paths if fs.exists(path)]

    def _remaining(self, ctx: StepContext, keys: Keys) -> list[str]:
        """Keys with a row or a file left. Every key's paths are checked (the footprint's count runs
        this before the cascade's first deletion)."""
        ids = sorted(keys.get("blob", set()))
        rows = set(existing(ctx.store, "blobs", "blob_key", ids))
        files = {k for k in ids if self._files(ctx, k)}
        return sorted(k for k in ids if k in rows or k in files)

    def count(self, ctx: StepContext, keys: Keys) -> int:
        return len(self._remaining(ctx, keys))

    def erase(self, ctx: StepContext, keys: Keys, limit: int) -> int:
        batch = self._remaining(ctx, keys)[:limit]
        files = 0
        for key in batch:
            for fs, path in self._files(ctx, key):
                fs.rm(path)
                files += 1
            ctx.store.execute("DELETE FROM blobs WHERE blob_key = ?", (key,))
        ctx.add_detail(blobs=len(batch), blob_files=files)
        return len(batch)
