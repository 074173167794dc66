"""Step 1, working memory: the subject's in-flight sessions, rows and session files.

The session files are created lazily by the agent runtime; a sweep that only deletes rows forgets
them, so a session is gone only when both its row and its file are."""

from __future__ import annotations

from typing import ClassVar

from erasure.sqlite import one
from erasure.tiers import Tier
from memory.redact import rewrite_session
from memory.sessions import stored_session_path
from tasks import mentions
from tasks.attribution import ItemMentions
from tasks.mentions import sessions_mentioning
from tasks.tier_step import BaseStep, ExceptionSpec, Keys, StepContext, existing


class WorkingStep(BaseStep):
    tier: ClassVar[Tier] = Tier.working

    def resolve(self, ctx: StepContext) -> Keys:
        ids: set[str] = set()
        for sid in ctx.ids():
            ids |= {
                r[0] for r in ctx.store.execute("SELECT session_id FROM working_sessions WHERE subject_id = ?", (sid,))
            }
        for source, ref in ctx.sources:
            ids |= {
                r[0]
                for r in ctx.store.execute(
                    "SELECT session_id FROM working_sessions WHERE source = ? AND source_ref = ?"
                    " AND subject_id IS NULL",
                    (source, ref),
                )
            }
        return {"session": set(ids), "mention_session": set(sessions_mentioning(ctx.store, ctx.who(), ids))}

    def _attributed(self, ctx: StepContext, keys: Keys) -> dict[str, ItemMentions]:
        """Other people's sessions (of those found) that still name the subject in their row or their
        file, each hit of every JSON string attributed (`tasks.attribution`): row and file, one matcher."""
        who = ctx.who()
        att = mentions.attribution(ctx.store, who, ctx.ids())
        out: dict[str, ItemMentions] = {}
        for sid in sorted(keys.get("mention_session", set())):
            for _, state, owner in ctx.store.execute(
                "SELECT session_id, state, subject_id FROM working_sessions WHERE session_id = ?", (sid,)
            ):
                owners = () if owner is None else (str(owner),)
                texts = [str(state)]
                path = stored_session_path(ctx.store_dir, sid)
                if path.exists():
                    texts.append(path.read_text(encoding="utf-8"))
                found = [mentions.item_mentions(who, att, t, owners, as_json=True) for t in texts]
                out[sid] = ItemMentions(
                    redact=tuple(h for f in found for h in f.redact),
                    ambiguous=max(f.ambiguous for f in found),
                    unredactable=max(f.unredactable for f in found),
                )
        return out

    def _mentions(self, ctx: StepContext, keys: Keys) -> list[str]:
        return [sid for sid, m in self._attributed(ctx, keys).items() if m.redact]

    def exceptions(self, ctx: StepContext, keys: Keys) -> list[ExceptionSpec]:
        found = self._attributed(ctx, keys)
        out: list[ExceptionSpec] = []
        for kind, field in (("mention_ambiguous", "ambiguous"), ("mention_unredactable", "unredactable")):
            counts = [getattr(m, field) for m in found.values() if getattr(m, field)]
            out += mentions.reported(kind, "working", {"sessions": len(counts)}, sum(counts))
        left = [sid for sid, m in found.items() if m.redact]
        if mentions.policy() == "report" and left:
            out.append(
                ExceptionSpec(
                    kind="mention_reported",
                    item_key="working",
                    detail={"sessions": len(left)},
                    ground=mentions.REPORT_GROUND,
                )
            )
        return out

    def _remaining(self, ctx: StepContext, keys: Keys) -> list[str]:
        """Sessions with a row or a file left. The file of every session found (the subject's and those
        naming them) is checked to lie inside `sessions/` (`stored_session_path`): the footprint's count
        runs this before the cascade's first deletion."""
        for sid in keys.get("mention_session", set()):
            stored_session_path(ctx.store_dir, sid)
        ids = sorted(keys.get("session", set()))
        rows = set(existing(ctx.store, "working_sessions", "session_id", ids))
        files = {i for i in ids if stored_session_path(ctx.store_dir, i).exists()}
        return sorted(rows | files)

    def count(self, ctx: StepContext, keys: Keys) -> int:
        left = len(self._remaining(ctx, keys))
        return left + (len(self._mentions(ctx, keys)) if mentions.policy() == "redact" else 0)

    def erase(self, ctx: StepContext, keys: Keys, limit: int) -> int:
        batch = self._remaining(ctx, keys)[:limit]
        files = 0
        for sid in batch:
            path = stored_session_path(ctx.store_dir, sid)
            if path.exists():
                path.unlink()
                files += 1
            ctx.store.execute("DELETE FROM working_sessions WHERE session_id = ?", (sid,))
        ctx.add_detail(sessions=len(batch), session_files=files)
        done = len(batch)
        if mentions.policy() == "redact":
            who = ctx.who()
            att = mentions.attribution(ctx.store, who, ctx.ids())
            for sid in self._mentions(ctx, keys)[: max(limit - done, 0)]:
                state, owner = one(
                    ctx.store, "SELECT state, subject_id FROM working_sessions WHERE session_id = ?", (sid,)
                )
                new, n = mentions.redact_item(
                    who, att, str(state), () if owner is None else (str(owner),), as_json=True
                )
                rewrite_session(ctx.store, ctx.store_dir, sid, new)
                ctx.add_detail(mentions_redacted=n, mention_sessions=1)
                done += 1
        return done
