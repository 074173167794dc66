"""Step 5, fine-tune corpora: a new corpus version without the subject, the old versions' bytes
removed, and every model trained on an affected version reported as an exception.

The model still holds what it learned: we never hide that. Each such model is an exception (retrain,
or a documented Art.17(3) ground), so the request ends `erasedWithExceptions`, never silently clean.
Files are written before and removed after the transaction that records them, so a crash at any point
leaves either the old state or a state the next run completes."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from erasure import request_records
from erasure.clocks import iso_utc
from erasure.files import inside_folder
from erasure.identity import Identity
from erasure.sqlite import one, transaction
from erasure.tiers import Tier
from tasks import mentions
from tasks.attribution import Attribution, ItemMentions
from tasks.tier_step import BaseStep, ExceptionSpec, Keys, StepContext, in_list, ints


def _co_subjects(ctx: StepContext) -> list[tuple[Identity, set[tuple[str, str]], set[str]]]:
    """The other subjects of the step's erasure window: identity, sources and store ids (from the vault
    and the footprints their prepare wrote)."""
    out = []
    for rid in ctx.co_requests:
        subject = request_records.load_envelope(ctx.engine, rid).subject
        sources = {tuple(json.loads(k)) for k in request_records.footprint(ctx.engine, rid, Tier.episodic, "source")}
        out.append(
            (
                Identity.of(subject),
                {(str(a), str(b)) for a, b in sources},
                {subject.id, *request_records.store_ids(ctx.engine, rid)},
            )
        )
    return out


def _line_owners(ctx: StepContext, corpus_id: int, line: str) -> tuple[str, ...]:
    """The subject ids of a corpus line's example (by its source key in that version)."""
    try:
        item = json.loads(line)
    except ValueError:
        return ()
    if not isinstance(item, dict):
        return ()
    return tuple(
        sorted(
            {
                str(r[0])
                for r in ctx.store.execute(
                    "SELECT subject_id FROM ft_examples WHERE corpus_id = ? AND source = ? AND source_ref = ?"
                    " AND subject_id IS NOT NULL",
                    (corpus_id, str(item.get("source")), str(item.get("source_ref"))),
                )
            }
        )
    )


def _next_file(ctx: StepContext, name: str, version: int) -> tuple[str, Path]:
    """`corpora/<name>/v<version>.jsonl` (relative, and its path): the corpus name comes from the rows,
    so the file must lie inside the store's folder like any path read there."""
    rel = f"corpora/{name}/v{version}.jsonl"
    return rel, inside_folder(ctx.store_dir, rel, "corpus name")


class FineTuneStep(BaseStep):
    tier: ClassVar[Tier] = Tier.fine_tune
    transactional: ClassVar[bool] = False
    window_shared: ClassVar[bool] = True
    """In an erasure window the corpus is rewritten once, without every subject of the window: the
    window counts each request's items before the first rewrite (`tasks.runner.count_step`)."""

    def _examples(self, ctx: StepContext) -> list[tuple[int, int]]:
        """(example_id, corpus_id) of the subject's live examples."""
        rows: set[tuple[int, int]] = set()
        for sid in ctx.ids():
            rows |= set(ctx.store.execute("SELECT example_id, corpus_id FROM ft_examples WHERE subject_id = ?", (sid,)))
        for source, ref in ctx.sources:
            rows |= set(
                ctx.store.execute(
                    "SELECT example_id, corpus_id FROM ft_examples WHERE source = ? AND source_ref = ?"
                    " AND subject_id IS NULL",
                    (source, ref),
                )
            )
        return sorted((int(a), int(b)) for a, b in rows)

    def resolve(self, ctx: StepContext) -> Keys:
        ex = self._examples(ctx)
        return {"example": {str(e) for e, _ in ex}, "corpus": {str(c) for _, c in ex} | self._mentioning(ctx)}

    def _mentioning(self, ctx: StepContext) -> set[str]:
        """Live corpus versions whose file has a mention of the subject to redact in another person's
        example (each file is read once for the whole window: `tasks.mentions.lines_naming`)."""
        if mentions.policy() != "redact":
            return set()
        return {cid for cid, found in self._attributed(ctx).items() if any(m.redact for m in found)}

    def _attributed(self, ctx: StepContext) -> dict[str, list[ItemMentions]]:
        """Per live corpus version, the attributed mentions of the subject in the lines that name them."""
        who = ctx.who()
        att = mentions.attribution(ctx.store, who, ctx.ids())
        out: dict[str, list[ItemMentions]] = {}
        for cid, rel in ctx.store.execute("SELECT corpus_id, path FROM ft_corpora WHERE removed_at IS NULL"):
            path = inside_folder(ctx.store_dir, str(rel), "corpus path")
            try:
                named = mentions.lines_naming(ctx.store, path, who)
                if not named:
                    continue
                lines = path.read_text(encoding="utf-8").splitlines()
            except FileNotFoundError:
                continue
            out[str(cid)] = [
                mentions.item_mentions(who, att, lines[i], _line_owners(ctx, int(cid), lines[i]), as_json=True)
                for i in sorted(named)
            ]
        return out

    def _corpus(self, ctx: StepContext, corpus_id: int) -> tuple[str, int, Path, str | None] | None:
        """(name, version, file, removed_at) of a corpus version. Its file, and the file its next
        version would be written to, must lie inside the store's folder (`StoreError` otherwise)."""
        row = ctx.store.execute(
            "SELECT name, version, path, removed_at FROM ft_corpora WHERE corpus_id = ?", (corpus_id,)
        ).fetchone()
        if row is None:
            return None
        _next_file(ctx, str(row[0]), int(row[1]) + 1)
        return str(row[0]), int(row[1]), inside_folder(ctx.store_dir, str(row[2]), "corpus path"), row[3]

    def _files_left(self, ctx: StepContext, keys: Keys) -> list[Path]:
        """Files of the corpora this request reached (its keys, and every version an erase of it
        touched since) that are still on disk."""
        ids = set(ints(keys, "corpus")) | {
            int(c) for c in request_records.footprint(ctx.engine, ctx.request_id, self.tier, "corpus")
        }
        out = []
        for cid in sorted(ids):
            c = self._corpus(ctx, cid)
            if c is not None and c[2].exists():
                out.append(c[2])
        return out

    def count(self, ctx: StepContext, keys: Keys) -> int:
        return len(self._examples(ctx)) + len(self._files_left(ctx, keys)) + len(self._mentioning(ctx))

    def erase(self, ctx: StepContext, keys: Keys, limit: int) -> int:
        removed = 0
        written: list[Path] = []
        try:
            # One write lock from reading the latest version to marking the old ones removed: another
            # request's erase (or an ingest append) must not rewrite the same corpus in between, or
            # its new version would bring this subject back (or keep the other's subject).
            with transaction(ctx.store):
                affected = sorted({c for _, c in self._examples(ctx)} | set(ints(keys, "corpus")))
                # Write-ahead: a version found live here (another erase may have written it after this
                # step resolved) must have its bytes removed below, and by a rerun after a crash.
                request_records.add_footprint(
                    ctx.engine, ctx.request_id, self.tier, "corpus", [str(c) for c in affected]
                )
                names = sorted({c[0] for cid in affected if (c := self._corpus(ctx, cid)) is not None})
                for name in names:
                    removed += self._erase_from(ctx, name, affected, written)
        except BaseException:
            for path in written:  # rolled back: no row points at the new version's file
                path.unlink(missing_ok=True)
            raise
        # Bytes last: the rows above already say these versions are removed; a crash here is finished
        # by the next run through the footprint's corpus ids.
        for path in self._files_left(ctx, keys):
            path.unlink()
            removed += 1
            ctx.add_detail(corpus_files_removed=1)
        return removed

    def _erase_from(self, ctx: StepContext, name: str, affected: list[int], written: list[Path]) -> int:
        """Inside the caller's transaction: a new version of corpus `name` without the subject when its
        latest version is affected, then the affected versions' rows marked removed."""
        removed = 0
        latest = ctx.store.execute(
            "SELECT corpus_id, version, path FROM ft_corpora WHERE name = ? AND removed_at IS NULL "
            "ORDER BY version DESC LIMIT 1",
            (name,),
        ).fetchone()
        doomed = [cid for cid in affected if (c := self._corpus(ctx, cid)) and c[0] == name and c[3] is None]
        if latest is not None and int(latest[0]) in doomed:
            removed += self._rewrite_without_subject(
                ctx,
                name,
                int(latest[0]),
                int(latest[1]),
                inside_folder(ctx.store_dir, str(latest[2]), "corpus path"),
                set(ctx.sources),
                written,
            )
        for cid in doomed:
            ctx.store.execute("DELETE FROM ft_examples WHERE corpus_id = ?", (cid,))
            removed += ctx.store.changes()
            ctx.store.execute(
                "UPDATE ft_corpora SET removed_at = ? WHERE corpus_id = ?", (iso_utc(datetime.now(UTC)), cid)
            )
        return removed

    def _rewrite_without_subject(
        self,
        ctx: StepContext,
        name: str,
        corpus_id: int,
        version: int,
        path: Path,
        sources: set[tuple[str, str]],
        written: list[Path],
    ) -> int:
        """Inside the caller's transaction: write version+1 of the corpus without the subject's lines (and,
        in an erasure window, without its other subjects' lines: one rewrite for the window)."""
        # A line is dropped by its owner (ft_examples): a conversation is not a person, and another
        # subject's line in the subject's conversation stays. A line no row owns goes by its source key.
        owner_of = {
            int(r[0]): None if r[1] is None else str(r[1])
            for r in ctx.store.execute("SELECT line_no, subject_id FROM ft_examples WHERE corpus_id = ?", (corpus_id,))
        }
        mine = set(ctx.ids())
        co = _co_subjects(ctx)
        co_ids = {i for _who, _srcs, ids in co for i in ids} - mine
        co_refs = {r for _who, srcs, _ids in co for r in srcs} - sources
        whos = [ctx.who(), *(c[0] for c in co)]
        naming = [
            mentions.lines_naming(ctx.store, path, w) if mentions.policy() == "redact" else frozenset() for w in whos
        ]
        atts = [
            mentions.attribution(ctx.store, ctx.who(), ctx.ids()),
            *(mentions.attribution(ctx.store, c[0], c[2]) for c in co),
        ]
        kept: list[str] = []
        refs: list[tuple[str, str]] = []
        owners: list[str | None] = []
        dropped = co_dropped = 0
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            if not line.strip():
                continue
            item = json.loads(line)
            ref = (str(item.get("source")), str(item.get("source_ref")))
            owner = owner_of.get(number + 1)
            if owner in mine or (owner is None and ref in sources):
                dropped += 1
            elif owner in co_ids or (owner is None and ref in co_refs):
                co_dropped += 1
            else:
                line_owners = _line_owners(ctx, corpus_id, line)
                for k, who in enumerate(whos):
                    if number in naming[k]:
                        line, item = self._redacted(ctx, line, item, who, atts[k], line_owners, own=k == 0)
                kept.append(line)
                refs.append(ref)
                owners.append(owner)
        new_version = version + 1
        rel, new_path = _next_file(ctx, name, new_version)
        new_path.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(k + "\n" for k in kept).encode("utf-8")
        tmp = new_path.with_suffix(".tmp")
        tmp.write_bytes(body)
        os.replace(tmp, new_path)
        written.append(new_path)
        ctx.store.execute(
            "INSERT INTO ft_corpora(name, version, path, sha256, examples, created_at) VALUES (?,?,?,?,?,?)"
            " ON CONFLICT(name, version) DO UPDATE SET sha256 = excluded.sha256, examples = excluded.examples",
            (name, new_version, rel, hashlib.sha256(body).hexdigest(), len(kept), iso_utc(datetime.now(UTC))),
        )
        new_id = int(
            one(ctx.store, "SELECT corpus_id FROM ft_corpora WHERE name = ? AND version = ?", (name, new_version))[0]
        )
        ctx.store.execute("DELETE FROM ft_examples WHERE corpus_id = ?", (new_id,))
        ctx.store.executemany(  # line numbers are 1-based, as ingest numbers them
            "INSERT INTO ft_examples(corpus_id, line_no, subject_id, source, source_ref) VALUES (?,?,?,?,?)",
            [(new_id, i + 1, owners[i], ref[0], ref[1]) for i, ref in enumerate(refs)],
        )
        ctx.add_detail(corpus_versions_written=1, examples_dropped=dropped, examples_kept=len(kept))
        if co:
            ctx.add_detail(window_requests=len(co), window_examples_dropped=co_dropped)
        return dropped

    @staticmethod
    def _redacted(
        ctx: StepContext, line: str, item: Any, who: Identity, att: Attribution, owners: tuple[str, ...], *, own: bool
    ) -> tuple[str, Any]:
        """The line with every mention of `who` to redact redacted (counted in the step's detail when
        `own`); the line may no longer name them (another subject's redaction of the same line took it)."""
        new, n = mentions.redact_item(who, att, line, owners, as_json=True)
        if not n:
            return line, item
        if own:
            ctx.add_detail(mentions_redacted=n, mention_examples=1)
        else:
            ctx.add_detail(window_mentions_redacted=n)
        return new, json.loads(new)

    def exceptions(self, ctx: StepContext, keys: Keys) -> list[ExceptionSpec]:
        ids = ints(keys, "corpus")
        out: list[ExceptionSpec] = []
        found = [m for ms in self._attributed(ctx).values() for m in ms]
        for kind, field in (("mention_ambiguous", "ambiguous"), ("mention_unredactable", "unredactable")):
            counts = [getattr(m, field) for m in found if getattr(m, field)]
            out += mentions.reported(kind, "fine_tune", {"examples": len(counts)}, sum(counts))
        for i in range(0, len(ids), 500):
            b = ids[i : i + 500]
            for model_id, cid, base, trained_at in ctx.store.execute(
                f"SELECT m.model_id, m.corpus_id, m.base_model, m.trained_at FROM model_lineage m "
                f"WHERE m.corpus_id IN ({in_list(len(b))})",
                b,
            ):
                out.append(
                    ExceptionSpec(
                        kind="model_trained_on_subject",
                        item_key=str(model_id),
                        detail={
                            "corpus_id": int(cid),
                            "base_model": str(base),
                            "trained_at": str(trained_at),
                            "action": "retrain without the subject, or record an Art.17(3) ground",
                        },
                    )
                )
        return out
