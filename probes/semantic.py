"""Tier 3 (semantic): a graph walk from the subject's names and frames.

Residue: person/email/phone entities named by an identifier; the fingerprint's entities (named ones
and those linked only to the subject's frames); links from any entity to the subject's frames;
relations asserted by the subject's frames or touching a subject entity. Shared entities (topics
others mention too) are bystanders' and must survive, with their other links and relations.
"""

from __future__ import annotations

from probes.context import ProbeContext, to_results
from probes.model import Measurement, ProbeResult
from probes.store import PERSONAL_ENTITY_KINDS, count, ids_in, json_list, open_store, outside

TIER = "semantic"

_KINDS = ",".join(f"'{k}'" for k in PERSONAL_ENTITY_KINDS)
# Named by a spelling of an identifier, and linked by no frame outside the subject's: a namesake's person
# entity (or a household phone) that other people's frames link is theirs too, and must survive.
_NAMED = (
    f"(unicode_lower(name) {ids_in(':names')} AND kind IN ({_KINDS}) AND NOT EXISTS (SELECT 1 FROM"
    f" kg_entity_frames l WHERE l.entity_id = kg_entities.entity_id AND l.frame_id NOT {ids_in(':frames')}))"
)
_ENTITY_MINE = f"(entity_id {ids_in(':entities')} OR {_NAMED})"
_SUBJECT_ENTITIES = f"(SELECT entity_id FROM kg_entities WHERE {_ENTITY_MINE})"
_RELATION_MINE = (
    f"(relation_id {ids_in(':relations')} OR frame_id {ids_in(':frames')}"
    f" OR src_entity_id IN {_SUBJECT_ENTITIES} OR dst_entity_id IN {_SUBJECT_ENTITIES})"
)
_LINK_MINE = f"(frame_id {ids_in(':frames')} OR entity_id IN {_SUBJECT_ENTITIES})"


def measure(ctx: ProbeContext) -> list[Measurement]:
    """Subject entities, links and relations left; bystanders' entities, links and relations."""
    keys = ctx.fingerprint.keys
    names = [s.lower() for _k, s in ctx.spellings()]
    params = {
        "names": json_list(names),
        "entities": json_list(keys.entity_ids),
        "relations": json_list(keys.relation_ids),
        "frames": json_list(keys.all_frame_ids()),
    }
    with open_store(ctx.store_dir) as conn:

        def n(sql: str) -> int:
            return count(conn, sql, params)

        entity_others = n(f"SELECT count(*) FROM kg_entities WHERE {outside(_ENTITY_MINE)}")
        link_others = n(f"SELECT count(*) FROM kg_entity_frames WHERE {outside(_LINK_MINE)}")
        relation_others = n(f"SELECT count(*) FROM kg_relations WHERE {outside(_RELATION_MINE)}")
        return [
            Measurement(
                "entities-by-identifier",
                n(f"SELECT count(*) FROM kg_entities WHERE {_NAMED}"),
                "entities",
                entity_others,
            ),
            Measurement(
                "entities-by-fingerprint-id",
                n(f"SELECT count(*) FROM kg_entities WHERE entity_id {ids_in(':entities')}"),
                "entities",
                entity_others,
            ),
            Measurement(
                "entity-links", n(f"SELECT count(*) FROM kg_entity_frames WHERE {_LINK_MINE}"), "links", link_others
            ),
            Measurement(
                "relations",
                n(f"SELECT count(*) FROM kg_relations WHERE {_RELATION_MINE}"),
                "relations",
                relation_others,
            ),
        ]


def probe(ctx: ProbeContext) -> list[ProbeResult]:
    """Probe the semantic tier."""
    return to_results(TIER, measure(ctx), ctx.fingerprint)
