"""Step 1, working memory: the subject's in-flight sessions, rows and session files.

The session files are created lazily by the agent runtime; a sweep that only deletes rows forgets
them, so a session is gone only when both its row and its file are."""

from __future__ import annotations

from typing import ClassVar

from erasure.tiers import Tier
from tasks.base import BaseStep, Keys, StepContext, existing

SESSIONS_DIR = "sessions"


class WorkingStep(BaseStep):
    tier: ClassVar[Tier] = Tier.working

    def resolve(self, ctx: StepContext) -> Keys:
        ids = {r[0] for r in ctx.store.execute(
            "SELECT session_id FROM working_sessions WHERE subject_id = ?", (ctx.subject.id,))}
        for source, ref in ctx.sources:
            ids |= {r[0] for r in ctx.store.execute(
                "SELECT session_id FROM working_sessions WHERE source = ? AND source_ref = ?", (source, ref))}
        return {"session": set(ids)}

    def _remaining(self, ctx: StepContext, keys: Keys) -> list[str]:
        ids = sorted(keys.get("session", set()))
        rows = set(existing(ctx.store, "working_sessions", "session_id", ids))
        files = {i for i in ids if (ctx.store_dir / SESSIONS_DIR / f"{i}.json").exists()}
        return sorted(rows | files)

    def count(self, ctx: StepContext, keys: Keys) -> int:
        return len(self._remaining(ctx, keys))

    def erase(self, ctx: StepContext, keys: Keys, limit: int) -> int:
        batch = self._remaining(ctx, keys)[:limit]
        files = 0
        for sid in batch:
            path = ctx.store_dir / SESSIONS_DIR / f"{sid}.json"
            if path.exists():
                path.unlink()
                files += 1
            ctx.store.execute("DELETE FROM working_sessions WHERE session_id = ?", (sid,))
        ctx.add_detail(sessions=len(batch), session_files=files)
        return len(batch)
