"""Step 9, audit-log redaction: destroy the subject's values and salts in the audit vault; the hash
chain, its Merkle tree and its signed checkpoints still verify. Entries are never deleted: they are
the evidence that the erasure happened. The redaction evidence for the pack (`audit-log-redaction/v3`:
checkpoints before and after, the consistency proof between them, the redacted entries and this
request's redaction entry with one multiproof of their inclusion) is written to
`audit-log-redaction.json`; it grows with the subject's entries (about 0.5-1 KB each), not with the log.

What a crash could lose is written to the engine first: the before-checkpoint's id and the
(seq, field, commitment) triples about to be destroyed. The evidence file is replaced whole (written
aside, then renamed), and the step counts as done only while the file holds a document of the current
format: a torn write, or a file an earlier version wrote, is written again from the engine's record."""

from __future__ import annotations

import json
import os
from typing import ClassVar

from erasure import request_records
from erasure.sqlite import checkpoint_truncate, transaction
from erasure.tiers import Tier
from memory import audit
from tasks.tier_step import BaseStep, Keys, StepContext

EVIDENCE_FILE = "audit-log-redaction.json"


class AuditLogStep(BaseStep):
    tier: ClassVar[Tier] = Tier.audit_log
    transactional: ClassVar[bool] = False

    def resolve(self, ctx: StepContext) -> Keys:
        return {
            "redacted": {
                f"{r[0]}|{r[1]}|{r[2]}"
                for sid in ctx.ids()
                for r in ctx.store.execute(
                    "SELECT seq, field, commitment FROM audit_vault WHERE subject_id = ?", (sid,)
                )
            }
        }

    def count(self, ctx: StepContext, keys: Keys) -> int:
        left = sum(audit.vault_count(ctx.store, sid) for sid in ctx.ids())
        return left + (0 if _evidence_current(ctx) else 1)

    def erase(self, ctx: StepContext, keys: Keys, limit: int) -> int:
        before_ids = request_records.footprint(ctx.engine, ctx.request_id, self.tier, "checkpoint_before")
        if not before_ids:
            with transaction(ctx.store):
                cp = audit.checkpoint(ctx.store, ctx.store_dir)
            request_records.add_footprint(
                ctx.engine, ctx.request_id, self.tier, "checkpoint_before", [cp.checkpoint_id]
            )
            before_ids = {str(cp.checkpoint_id)}
        request_records.add_footprint(ctx.engine, ctx.request_id, self.tier, "redacted", keys.get("redacted", set()))
        # The entry counts every item this request redacted (a resumed run's too): the verifier compares it
        # with the items the evidence lists, so a hidden one shows.
        total = len(request_records.footprint(ctx.engine, ctx.request_id, self.tier, "redacted"))
        with transaction(ctx.store):
            count = sum(audit.redact_subject(ctx.store, sid).count for sid in ctx.ids())
            audit.append(
                ctx.store, audit.REDACTION_EVENT, "erasure-engine", {"request_id": ctx.request_id, "redacted": total}
            )
        checkpoint_truncate(ctx.store)
        with transaction(ctx.store):
            after = audit.checkpoint(ctx.store, ctx.store_dir)
        by_id = {c.checkpoint_id: c for c in audit.checkpoints(ctx.store)}
        before = by_id[int(min(before_ids, key=int))]
        if before.tree_size is None:  # signed by a version before the Merkle tree: re-sign that prefix as v2
            with transaction(ctx.store):
                before = audit.checkpoint(ctx.store, ctx.store_dir, tree_size=before.seq)
        redacted = sorted(
            (int(s), f, c)
            for s, f, c in (
                k.split("|", 2) for k in request_records.footprint(ctx.engine, ctx.request_id, self.tier, "redacted")
            )
        )
        doc = audit.redaction_evidence(
            ctx.store, ctx.store_dir, before, after, redacted, request_id=ctx.request_id, subject_id=ctx.subject.id
        )
        ctx.evidence_dir.mkdir(parents=True, exist_ok=True)
        aside = ctx.evidence_dir / f".{EVIDENCE_FILE}.partial"
        aside.write_text(json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n")
        os.replace(aside, ctx.evidence_dir / EVIDENCE_FILE)
        ctx.add_detail(
            vault_values_destroyed=count,
            redacted_total=len(redacted),
            checkpoint_before=before.seq,
            checkpoint_after=after.seq,
        )
        return count


def _evidence_current(ctx: StepContext) -> bool:
    """Whether the evidence file is a whole document of the format this version writes."""
    try:
        doc = json.loads((ctx.evidence_dir / EVIDENCE_FILE).read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("format") == audit.EVIDENCE_FORMAT
