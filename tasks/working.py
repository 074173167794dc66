"""Step 1, working memory: the subject's in-flight sessions, rows and session files.

The session files are created lazily by the agent runtime; a sweep that only deletes rows forgets
them, so a session is gone only when both its row and its file are."""

from __future__ import annotations

from typing import ClassVar

from erasure.sqlite import one
from erasure.tiers import Tier
from memory.redact import redact_json_text, rewrite_session
from memory.sessions import session_path
from tasks import mentions
from tasks.base import BaseStep, ExceptionSpec, Keys, StepContext, existing
from tasks.mentions import sessions_mentioning

SESSIONS_DIR = "sessions"


class WorkingStep(BaseStep):
    tier: ClassVar[Tier] = Tier.working

    def resolve(self, ctx: StepContext) -> Keys:
        ids: set[str] = set()
        for sid in ctx.ids():
            ids |= {r[0] for r in ctx.store.execute(
                "SELECT session_id FROM working_sessions WHERE subject_id = ?", (sid,))}
        for source, ref in ctx.sources:
            ids |= {r[0] for r in ctx.store.execute(
                "SELECT session_id FROM working_sessions WHERE source = ? AND source_ref = ? AND subject_id IS NULL",
                (source, ref))}
        return {"session": set(ids),
                "mention_session": set(sessions_mentioning(ctx.store, ctx.who(), ids))}

    def _mentions(self, ctx: StepContext, keys: Keys) -> list[str]:
        who = ctx.who()
        return [str(r[0]) for sid in sorted(keys.get("mention_session", set())) for r in ctx.store.execute(
            "SELECT session_id, state FROM working_sessions WHERE session_id = ?", (sid,))
            if who.names_in(str(r[1])) or self._file_mentions(ctx, str(r[0]))]

    def _file_mentions(self, ctx: StepContext, session_id: str) -> bool:
        path = session_path(ctx.store_dir, session_id)
        return path.exists() and ctx.who().names_in(path.read_text(encoding="utf-8"))

    def exceptions(self, ctx: StepContext, keys: Keys) -> list[ExceptionSpec]:
        if mentions.policy() != "report":
            return []
        left = self._mentions(ctx, keys)
        return [ExceptionSpec(kind="mention_reported", item_key="working", detail={"sessions": len(left)},
                              ground=mentions.REPORT_GROUND)] if left else []

    def _remaining(self, ctx: StepContext, keys: Keys) -> list[str]:
        ids = sorted(keys.get("session", set()))
        rows = set(existing(ctx.store, "working_sessions", "session_id", ids))
        files = {i for i in ids if (ctx.store_dir / SESSIONS_DIR / f"{i}.json").exists()}
        return sorted(rows | files)

    def count(self, ctx: StepContext, keys: Keys) -> int:
        left = len(self._remaining(ctx, keys))
        return left + (len(self._mentions(ctx, keys)) if mentions.policy() == "redact" else 0)

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
        done = len(batch)
        if mentions.policy() == "redact":
            who = ctx.who()
            for sid in self._mentions(ctx, keys)[:max(limit - done, 0)]:
                state = str(one(ctx.store, "SELECT state FROM working_sessions WHERE session_id = ?", (sid,))[0])
                counted = [0]

                def fn(text: str, counted: list[int] = counted) -> str:
                    new, n = mentions.redact_text(who, text)
                    counted[0] += n
                    return new

                rewrite_session(ctx.store, ctx.store_dir, sid, redact_json_text(state, fn))
                ctx.add_detail(mentions_redacted=counted[0], mention_sessions=1)
                done += 1
        return done
