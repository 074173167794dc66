"""Step 3, semantic memory: the knowledge graph.

Relations go before entities (they reference entities without cascade). The subject's own entities
(person/email/phone entities named by an identifier in any spelling, even ones born unlinked) and the
other entities the subject's frames linked are deleted only when no surviving frame links them: shared
entities (a topic a bystander also discussed, a namesake's person entity, a household phone) lose the
subject's links and the relations the subject's frames asserted, and survive."""

from __future__ import annotations

from typing import ClassVar

from erasure.tiers import Tier
from tasks.identity import personal_entities
from tasks.tier_step import BaseStep, Keys, StepContext, existing, in_list, ints


class SemanticStep(BaseStep):
    tier: ClassVar[Tier] = Tier.semantic

    def resolve(self, ctx: StepContext) -> Keys:
        own = set(personal_entities(ctx.store, ctx.who()))
        frames = ctx.frames
        linked: set[int] = set()
        relations: set[int] = set()
        fl = sorted(frames)
        for i in range(0, len(fl), 500):
            b = fl[i : i + 500]
            linked |= {
                int(r[0])
                for r in ctx.store.execute(
                    f"SELECT entity_id FROM kg_entity_frames WHERE frame_id IN ({in_list(len(b))})", b
                )
            }
            relations |= {
                int(r[0])
                for r in ctx.store.execute(
                    f"SELECT relation_id FROM kg_relations WHERE frame_id IN ({in_list(len(b))})", b
                )
            }
        return {
            "entity": {str(e) for e in own},
            "candidate": {str(e) for e in linked - own},
            "relation": {str(r) for r in relations},
        }

    def _orphans(self, ctx: StepContext, keys: Keys) -> list[int]:
        """The subject's own and candidate entities that still exist and that no surviving frame links.

        An entity named by the subject's name or phone that someone else's frames also link (a
        namesake, a household phone) is shared: it loses the subject's links (with their frames) and
        the relations the subject's frames asserted, and survives."""
        out = []
        ids = sorted(set(ints(keys, "candidate")) | set(ints(keys, "entity")))
        for eid in existing(ctx.store, "kg_entities", "entity_id", ids):
            link = ctx.store.execute("SELECT 1 FROM kg_entity_frames WHERE entity_id = ? LIMIT 1", (eid,))
            if link.fetchone() is None:
                out.append(eid)
        return out

    def _doomed(self, ctx: StepContext, keys: Keys) -> list[int]:
        return sorted(self._orphans(ctx, keys))

    def _relations(self, ctx: StepContext, keys: Keys, doomed: list[int]) -> list[int]:
        rel = set(existing(ctx.store, "kg_relations", "relation_id", ints(keys, "relation")))
        for eid in doomed:
            rel |= {
                int(r[0])
                for r in ctx.store.execute(
                    "SELECT relation_id FROM kg_relations WHERE src_entity_id = ? UNION "
                    "SELECT relation_id FROM kg_relations WHERE dst_entity_id = ?",
                    (eid, eid),
                )
            }
        return sorted(rel)

    def count(self, ctx: StepContext, keys: Keys) -> int:
        doomed = self._doomed(ctx, keys)
        return len(doomed) + len(self._relations(ctx, keys, doomed))

    def erase(self, ctx: StepContext, keys: Keys, limit: int) -> int:
        doomed = self._doomed(ctx, keys)
        relations = self._relations(ctx, keys, doomed)[:limit]
        for rid in relations:
            ctx.store.execute("DELETE FROM kg_relations WHERE relation_id = ?", (rid,))
        removed = len(relations)
        entities = 0
        links = 0
        if removed < limit:
            for eid in doomed[: limit - removed]:
                if (
                    ctx.store.execute(
                        "SELECT 1 FROM kg_relations WHERE src_entity_id = ? OR dst_entity_id = ? LIMIT 1", (eid, eid)
                    ).fetchone()
                    is not None
                ):
                    continue  # its relations go in the next batch first
                ctx.store.execute("DELETE FROM kg_entity_frames WHERE entity_id = ?", (eid,))
                links += ctx.store.changes()
                ctx.store.execute("DELETE FROM kg_entities WHERE entity_id = ?", (eid,))
                entities += 1
        ctx.add_detail(relations=removed, entities=entities, entity_links=links)
        return removed + entities
