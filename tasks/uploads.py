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
from tasks.base import BaseStep, Keys, StepContext, existing


def _locations(ctx: StepContext, key: str) -> set[str]:
    configured = set(json.loads(one(ctx.store, "SELECT value FROM store_meta WHERE key = 'blob_locations'")[0]))
    recorded = {r[0] for r in ctx.store.execute("SELECT location FROM blob_locations WHERE blob_key = ?", (key,))}
    return configured | recorded


def _blob_path(ctx: StepContext, location: str, key: str) -> tuple[fsspec.AbstractFileSystem, str]:
    if "://" in location:
        fs, root = fsspec.core.url_to_fs(location)
    else:
        fs, root = fsspec.filesystem("file"), str(ctx.store_dir / location)
    return fs, f"{root.rstrip('/')}/{key[:2]}/{key}"


class UploadsStep(BaseStep):
    tier: ClassVar[Tier] = Tier.uploads

    def resolve(self, ctx: StepContext) -> Keys:
        keys: set[str] = set()
        for sid in ctx.ids():
            keys |= {r[0] for r in ctx.store.execute("SELECT blob_key FROM blobs WHERE subject_id = ?", (sid,))}
        for source, ref in ctx.sources:
            keys |= {r[0] for r in ctx.store.execute(
                "SELECT blob_key FROM blobs WHERE source = ? AND source_ref = ? AND subject_id IS NULL", (source, ref))}
        return {"blob": set(keys)}

    def _files(self, ctx: StepContext, key: str) -> list[tuple[fsspec.AbstractFileSystem, str]]:
        out = []
        for loc in sorted(_locations(ctx, key)):
            fs, path = _blob_path(ctx, loc, key)
            if fs.exists(path):
                out.append((fs, path))
        return out

    def _remaining(self, ctx: StepContext, keys: Keys) -> list[str]:
        ids = sorted(keys.get("blob", set()))
        rows = set(existing(ctx.store, "blobs", "blob_key", ids))
        return sorted(k for k in ids if k in rows or self._files(ctx, k))

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
