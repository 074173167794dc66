"""Generated Graphiti graphs (hypothesis): 2 to 4 people, any of them the subject, each with facts that
were invalidated and re-asserted, facts between people, and episodes of one person that mention another,
written with graphiti-core's own model classes on Kuzu. After `ERASER.erase`, an oracle written apart
(a plain byte search of every file, and Graphiti's own API) finds none of the subject's identifiers or
places, their name only in the other people's episodes that mention them, and every other node and edge
byte-identical by content digest."""

from __future__ import annotations

import hashlib
import itertools
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from graphiti_core.edges import EntityEdge, EpisodicEdge
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure.subject import Subject
from erasure.targets import Target
from erasure.tiers import Tier
from tasks.targets.graphiti import ERASER
from tests.graphiti_fixtures import HashEmbedder, with_driver

pytestmark = [pytest.mark.framework, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

GIVEN = ("Aurelie", "Bastian", "Corentin", "Delphine")
FAMILY = ("Quarrington", "Ostrowska", "Villemure", "Haakonsen")
TEAM = "team"


@dataclass(frozen=True)
class Shape:
    """A generated graph: per person, (invalidated, re-asserted) for each of their facts; the pairs of
    people with a fact between them; the (speaker, mentioned) episodes; and who is the subject."""

    facts: tuple[tuple[tuple[bool, bool], ...], ...]
    links: tuple[tuple[int, int], ...]
    mentions: tuple[tuple[int, int], ...]
    subject: int

    @property
    def people(self) -> list[Subject]:
        return [
            Subject(
                id=f"gg-{i}-{GIVEN[i].lower()}",
                email=f"{GIVEN[i].lower()}.{FAMILY[i].lower()}@example.org",
                name=f"{GIVEN[i]} {FAMILY[i]}",
            )
            for i in range(len(self.facts))
        ]


@st.composite
def shapes(draw: st.DrawFn) -> Shape:
    n = draw(st.integers(2, 4))
    facts = tuple(
        tuple(draw(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=3))) for _ in range(n)
    )
    pairs = [(a, b) for a, b in itertools.permutations(range(n), 2)]
    links = tuple(draw(st.lists(st.sampled_from(pairs), max_size=3, unique=True)))
    mentions = tuple(draw(st.lists(st.sampled_from(pairs), max_size=3, unique=True)))
    return Shape(facts, links, mentions, draw(st.integers(0, n - 1)))


def _t(year: int, month: int) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


def place_of(person: int, k: int) -> str:
    """A place only this person's facts name (distinctive content of theirs)."""
    return f"{FAMILY[person][:4]}holm Atelier {k}"


async def _build(driver: Any, shape: Shape) -> None:
    emb = HashEmbedder()
    people = shape.people
    nodes = []
    for p in people:
        n = EntityNode(
            name=p.name or "",
            group_id=f"user-{p.id}",
            labels=["Person"],
            attributes={"user_id": p.id, "email": p.email},
            created_at=_t(2023, 1),
        )
        await n.generate_name_embedding(emb)
        await n.save(driver)
        nodes.append(n)
    for i, p in enumerate(people):
        group = f"user-{p.id}"
        for k, (invalidated, reasserted) in enumerate(shape.facts[i]):
            place = EntityNode(name=place_of(i, k), group_id=group, labels=["Place"], created_at=_t(2023, 2))
            await place.generate_name_embedding(emb)
            await place.save(driver)
            text = f"{p.name} works at the {place_of(i, k)}"
            ep = EpisodicNode(
                name="chat",
                group_id=group,
                source=EpisodeType.message,
                source_description="chat",
                content=f"{p.name} said: {text}, reach me at {p.email}",
                valid_at=_t(2023, 3),
            )
            await ep.save(driver)
            spans = [(_t(2023, 3), _t(2024, 1) if invalidated else None)]
            if invalidated and reasserted:
                spans.append((_t(2024, 6), None))
            for valid, invalid in spans:
                e = EntityEdge(
                    source_node_uuid=nodes[i].uuid,
                    target_node_uuid=place.uuid,
                    name="WORKS_AT",
                    fact=text,
                    group_id=group,
                    episodes=[ep.uuid],
                    created_at=valid,
                    valid_at=valid,
                    invalid_at=invalid,
                    expired_at=invalid,
                )
                await e.generate_embedding(emb)
                await e.save(driver)
            await EpisodicEdge(
                source_node_uuid=ep.uuid, target_node_uuid=nodes[i].uuid, group_id=group, created_at=_t(2023, 3)
            ).save(driver)
    for a, b in shape.links:
        e = EntityEdge(
            source_node_uuid=nodes[a].uuid,
            target_node_uuid=nodes[b].uuid,
            name="KNOWS",
            fact=f"{people[a].name} knows {people[b].name}",
            group_id=TEAM,
            created_at=_t(2024, 2),
            valid_at=_t(2024, 2),
        )
        await e.generate_embedding(emb)
        await e.save(driver)
    for a, b in shape.mentions:
        ep = EpisodicNode(
            name="chat",
            group_id=TEAM,
            source=EpisodeType.message,
            source_description="chat",
            content=f"{people[a].name} mentioned {people[b].name} at lunch",
            valid_at=_t(2024, 3),
        )
        await ep.save(driver)
        for who in (a, b):
            await EpisodicEdge(
                source_node_uuid=ep.uuid, target_node_uuid=nodes[who].uuid, group_id=TEAM, created_at=_t(2024, 3)
            ).save(driver)


@dataclass(frozen=True)
class Seen:
    """One node or edge read back through Graphiti's API: its content digest, group, ends and name."""

    digest: str
    group: str
    ends: tuple[str, ...]
    name: str = ""


async def _read(driver: Any, groups: list[str]) -> dict[str, Seen]:
    """Oracle read through Graphiti's API: kind:uuid -> what it is (embeddings loaded)."""

    def digest(item: Any) -> str:
        return hashlib.sha256(item.model_dump_json().encode()).hexdigest()

    out: dict[str, Seen] = {}
    for n in await EntityNode.get_by_group_ids(driver, groups, with_embeddings=True):
        out[f"entity:{n.uuid}"] = Seen(digest(n), n.group_id, (n.uuid,), n.name)
    for e in await EntityEdge.get_by_group_ids(driver, groups, with_embeddings=True):
        out[f"edge:{e.uuid}"] = Seen(digest(e), e.group_id, (e.source_node_uuid, e.target_node_uuid))
    for ep in await EpisodicNode.get_by_group_ids(driver, groups):
        out[f"episode:{ep.uuid}"] = Seen(digest(ep), ep.group_id, ())
    for m in await EpisodicEdge.get_by_group_ids(driver, groups):
        out[f"mentions:{m.uuid}"] = Seen(digest(m), m.group_id, (m.source_node_uuid, m.target_node_uuid))
    return out


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=shapes())
def test_a_generated_graph_loses_the_subject_and_nothing_else(shape: Shape, tmp_path: Path) -> None:
    root = tmp_path / "g"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    db = root / "graph.kuzu"
    with_driver(db, lambda d: _build(d, shape))
    people = shape.people
    subject = people[shape.subject]
    groups = [f"user-{p.id}" for p in people] + [TEAM]
    before = with_driver(db, lambda d: _read(d, groups))
    person = next(k.split(":", 1)[1] for k, v in before.items() if k.startswith("entity:") and v.name == subject.name)
    theirs = {k: v.digest for k, v in before.items() if v.group != f"user-{subject.id}" and person not in v.ends}
    target = Target.model_validate(
        {"name": "g", "kind": "graphiti", "base_dir": root, "db": "graph.kuzu", "group_template": "user-{subject_id}"}
    )

    out = ERASER.erase(target, subject)

    assert all(o.after == 0 for o in out.values()), out
    own_facts = sum(1 + (inv and re) for inv, re in shape.facts[shape.subject])
    assert out[Tier.semantic].detail["edges"] == own_facts + sum(1 for pair in shape.links if shape.subject in pair)
    data = b"".join(p.read_bytes().lower() for p in root.rglob("*") if p.is_file())
    own = [subject.id, subject.email or "", FAMILY[shape.subject][:4] + "holm"]
    assert [s for s in own if s.lower().encode() in data] == []
    # Their name is left only in the shared episodes that name them, outside their own partition: another
    # person's item by the matching rules (reported, not erased), whoever of the two spoke.
    assert data.count((subject.name or "").lower().encode()) == sum(
        1 for pair in shape.mentions if shape.subject in pair
    )
    assert {k: v.digest for k, v in with_driver(db, lambda d: _read(d, groups)).items()} == theirs
