"""Step 2, episodic memory: summary frames, verbatim turn frames, and the raw archive.

Frames are deleted (their chunks, refs and entity links go by FK cascade); archive rows are redacted
to a skeleton (append-only: content and subject removed, the opaque uid rotated, erased_at set, the
source key kept only as keyed hashes).
Before a batch of frames goes, its frame and chunk ids are written to the footprint of the vectors
and derivatives tiers, so later steps still reach what hung off them, even after a crash."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import ClassVar

from erasure import request_records
from erasure.clocks import iso_utc
from erasure.sqlite import one
from erasure.tiers import Tier
from memory.frames import chunk_ids_of, delete_frame_rows
from memory.keyed import hashed_key
from memory.redact import rewrite_archive, rewrite_frame
from tasks import mentions
from tasks.attribution import Attribution, ItemMentions, frame_owners
from tasks.mentions import archives_mentioning, frames_mentioning
from tasks.resolve import archive_ids, primary_frames
from tasks.tier_step import BaseStep, ExceptionSpec, Keys, StepContext, existing, ints


class EpisodicStep(BaseStep):
    tier: ClassVar[Tier] = Tier.episodic

    def resolve(self, ctx: StepContext) -> Keys:
        archives: set[int] = set()
        frames: set[int] = set()
        for sid in ctx.ids():
            mine = archive_ids(ctx.store, sid)
            archives |= mine
            frames |= primary_frames(ctx.store, sid, mine)
        who = ctx.who()
        return {
            "archive": {str(a) for a in archives},
            "frame": {str(f) for f in frames},
            "mention_frame": {str(f) for f in frames_mentioning(ctx.store, who, ctx.frames | frames)},
            "mention_archive": {str(a) for a in archives_mentioning(ctx.store, who, archives)},
        }

    def _attributed(self, ctx: StepContext, keys: Keys) -> tuple[dict[int, ItemMentions], dict[int, ItemMentions]]:
        """Other people's frames and archive rows (of those found) that still name the subject, each
        hit attributed (`tasks.attribution`)."""
        who = ctx.who()
        att = mentions.attribution(ctx.store, who, ctx.ids())
        frames = {
            int(r[0]): mentions.item_mentions(who, att, str(r[1]), frame_owners(ctx.store, int(r[0])))
            for fid in ints(keys, "mention_frame")
            for r in ctx.store.execute("SELECT frame_id, content FROM frames WHERE frame_id = ?", (fid,))
            if r[1] is not None
        }
        archives = {
            int(r[0]): mentions.item_mentions(who, att, str(r[1]), () if r[2] is None else (str(r[2]),))
            for aid in ints(keys, "mention_archive")
            for r in ctx.store.execute(
                "SELECT archive_id, content, subject_id FROM raw_archive WHERE archive_id = ? AND erased_at IS NULL",
                (aid,),
            )
            if r[1] is not None
        }
        return frames, archives

    def _mentions(self, ctx: StepContext, keys: Keys) -> tuple[list[int], list[int]]:
        """Other people's frames and archive rows (of those found) with a mention to redact."""
        frames, archives = self._attributed(ctx, keys)
        return (
            [f for f, m in sorted(frames.items()) if m.redact],
            [a for a, m in sorted(archives.items()) if m.redact],
        )

    def exceptions(self, ctx: StepContext, keys: Keys) -> list[ExceptionSpec]:
        frames, archives = self._attributed(ctx, keys)
        out: list[ExceptionSpec] = []
        for kind, field in (("mention_ambiguous", "ambiguous"), ("mention_unredactable", "unredactable")):
            fs = [getattr(m, field) for m in frames.values() if getattr(m, field)]
            ars = [getattr(m, field) for m in archives.values() if getattr(m, field)]
            out += mentions.reported(kind, "episodic", {"frames": len(fs), "archive_rows": len(ars)}, sum(fs + ars))
        if mentions.policy() != "report":
            return out
        mf = [f for f, m in frames.items() if m.redact]
        ma = [a for a, m in archives.items() if m.redact]
        if mf or ma:
            out.append(
                ExceptionSpec(
                    kind="mention_reported",
                    item_key="episodic",
                    detail={"frames": len(mf), "archive_rows": len(ma)},
                    ground=mentions.REPORT_GROUND,
                )
            )
        return out

    def _live_archives(self, ctx: StepContext, keys: Keys) -> list[int]:
        return existing(ctx.store, "raw_archive", "archive_id", ints(keys, "archive"), extra=" AND erased_at IS NULL")

    def count(self, ctx: StepContext, keys: Keys) -> int:
        frames = existing(ctx.store, "frames", "frame_id", ints(keys, "frame"))
        left = len(frames) + len(self._live_archives(ctx, keys))
        if mentions.policy() == "redact":
            mf, ma = self._mentions(ctx, keys)
            left += len(mf) + len(ma)
        return left

    def erase(self, ctx: StepContext, keys: Keys, limit: int) -> int:
        frames = sorted(existing(ctx.store, "frames", "frame_id", ints(keys, "frame")))[:limit]
        if frames:
            chunks = chunk_ids_of(ctx.store, frames)
            # Write-ahead: later tiers must reach these after the rows that link them are gone.
            request_records.add_footprint(ctx.engine, ctx.request_id, Tier.vectors, "frame", [str(f) for f in frames])
            request_records.add_footprint(ctx.engine, ctx.request_id, Tier.vectors, "chunk", [str(c) for c in chunks])
            request_records.add_footprint(ctx.engine, ctx.request_id, Tier.derivatives, "fts", [str(f) for f in frames])
            delete_frame_rows(ctx.store, frames)
            ctx.add_detail(frames=len(frames), chunks=len(chunks))
        room = limit - len(frames)
        archives = sorted(self._live_archives(ctx, keys))[: max(room, 0)]
        at = iso_utc(datetime.now(UTC))
        for aid in archives:
            source, ref = one(ctx.store, "SELECT source, source_ref FROM raw_archive WHERE archive_id = ?", (aid,))
            source, ref = hashed_key(ctx.store, str(source), str(ref))  # whatever the key spells
            ctx.store.execute(
                "UPDATE raw_archive SET content = NULL, subject_id = NULL, archive_uid = ?, erased_at = ?,"
                " erasure_ref = ?, source = ?, source_ref = ? WHERE archive_id = ?",
                (secrets.token_hex(16), at, ctx.request_id, source, ref, aid),
            )
        ctx.add_detail(archive_redacted=len(archives))
        done = len(frames) + len(archives)
        if mentions.policy() == "redact" and done < limit:
            done += self._redact_mentions(ctx, keys, limit - done)
        return done

    def texts_after(self, ctx: StepContext, archive_ids: set[int]) -> dict[int, str]:
        """The text each of these live archive rows (other people's) holds once this step has run: its
        mentions of the subject redacted as `_redact_mentions` writes them (the subprocessors' copies
        are rectified with it before the store's lock is taken)."""
        who = ctx.who()
        att: Attribution | None = None
        out: dict[int, str] = {}
        for aid in sorted(archive_ids):
            row = ctx.store.execute(
                "SELECT content, subject_id FROM raw_archive WHERE archive_id = ? AND erased_at IS NULL", (aid,)
            ).fetchone()
            if row is None or row[0] is None:
                continue
            text, owners = str(row[0]), (() if row[1] is None else (str(row[1]),))
            if mentions.policy() == "redact" and who.names_in(text):
                att = att or mentions.attribution(ctx.store, who, ctx.ids())
                if mentions.item_mentions(who, att, text, owners).redact:
                    text = mentions.redact_item(who, att, text, owners)[0]
            out[aid] = text
        return out

    def _redact_mentions(self, ctx: StepContext, keys: Keys, limit: int) -> int:
        """Rewrite other people's frames (with chunks, FTS row and vectors) and archive rows that name
        the subject: every mention to redact replaced by the placeholder, the rest kept as it is."""
        who = ctx.who()
        att = mentions.attribution(ctx.store, who, ctx.ids())
        mframes, marchives = self._mentions(ctx, keys)
        done = 0
        for fid in mframes[:limit]:
            text = str(one(ctx.store, "SELECT content FROM frames WHERE frame_id = ?", (fid,))[0])
            new, n = mentions.redact_item(who, att, text, frame_owners(ctx.store, fid))
            rewrite_frame(ctx.store, fid, new)
            ctx.add_detail(mentions_redacted=n, mention_frames=1)
            done += 1
        for aid in marchives[: max(limit - done, 0)]:
            text, owner = one(ctx.store, "SELECT content, subject_id FROM raw_archive WHERE archive_id = ?", (aid,))
            new, n = mentions.redact_item(who, att, str(text), () if owner is None else (str(owner),))
            rewrite_archive(ctx.store, aid, new)
            ctx.add_detail(mentions_redacted=n, mention_archive_rows=1)
            done += 1
        return done
