"""A real Graphiti temporal graph on its embedded Kuzu backend (`KuzuDriver`), built with the framework's
own model classes and their `save` methods (no hand-made schema, no LLM, no network): three people,
one of them the subject, each with a person entity (`attributes.user_id`), facts about them that were
invalidated and re-asserted over time, episodes whose text mentions people, MENTIONS edges, a community
whose summary quotes them, and several group ids (one per person, plus a shared `team` group).

Graphiti's `add_episode` extracts entities with an LLM, and `add_triplet` resolves duplicates with one,
so the graph is written as those methods would write it: `EntityNode.save`, `EntityEdge.save`,
`EpisodicNode.save`, `EpisodicEdge.save`, `CommunityNode.save`, `CommunityEdge.save`. Embeddings come
from a local deterministic embedder implementing Graphiti's `EmbedderClient`.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import os
import re
import shutil
import warnings
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

from graphiti_core.edges import CommunityEdge, EntityEdge, EpisodicEdge
from graphiti_core.embedder.client import EmbedderClient
from graphiti_core.nodes import CommunityNode, EntityNode, EpisodeType, EpisodicNode

from erasure.subject import Subject
from erasure.targets import Target

T = TypeVar("T")
DIMS = 32
DB_FILE = "graph.kuzu"
SUBJECT = Subject(id="gr-usr-51d0aa", email="ines.valcourt@example.org", name="Ines Valcourt", phone="+33 1 70 36 4412")
BYSTANDERS = (
    Subject(id="gr-usr-7c3e19", email="oskar.brandvold@example.net", name="Oskar Brandvold"),
    Subject(id="gr-usr-a2f604", email="leila.farouk@example.com", name="Leila Farouk"),
)
PEOPLE = (SUBJECT, *BYSTANDERS)
TEAM = "team"
HOLD_ATTRIBUTE = "legal_hold"


def group_of(person: Subject) -> str:
    """The group id of a person's own graph partition."""
    return f"user-{person.id}"


class HashEmbedder(EmbedderClient):
    """Graphiti's `EmbedderClient`, local and deterministic: each lower-cased word seeds a vector of
    SHA-256-derived floats; a text's vector is their normalised sum (every float non-zero in practice)."""

    def __init__(self, dims: int = DIMS) -> None:
        self.dims = dims

    def vector(self, text: str) -> list[float]:
        """The embedding of one text (what `create` returns)."""
        acc = [0.0] * self.dims
        for word in re.findall(r"\w+", text.lower()):
            digest = b"".join(hashlib.sha256(f"{word}:{i}".encode()).digest() for i in range(self.dims // 8 + 1))
            for i in range(self.dims):
                acc[i] += (digest[i * 2] * 256 + digest[i * 2 + 1]) / 32768.0 - 1.0
        norm = sum(x * x for x in acc) ** 0.5 or 1.0
        return [x / norm for x in acc]

    async def create(self, input_data: str | list[str] | Iterable[int] | Iterable[Iterable[int]]) -> list[float]:
        text = input_data if isinstance(input_data, str) else " ".join(str(x) for x in input_data)
        return self.vector(text)

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        return [self.vector(t) for t in input_data_list]


def _t(year: int, month: int, day: int = 1) -> datetime:
    return datetime(year, month, day, 9, 30, tzinfo=UTC)


# Facts about each person over time: (relation, fact, valid_at, invalid_at, other end or None = a place).
# The subject's employer fact is invalidated and re-asserted; so is one of each bystander's.
SUBJECT_EPISODES = [
    "Ines Valcourt said she moved to the Montrouge studio and now restores harpsichords for a living.",
    "Ines Valcourt left the Montrouge studio for a workshop beside the Canal Saint-Martin.",
    "Ines Valcourt asked us to send invoices to ines.valcourt@example.org or call +33 1 70 36 4412.",
]
BYSTANDER_EPISODES = {
    BYSTANDERS[0].id: [
        "Oskar Brandvold ordered spare tuning hammers for the Bergen choir school.",
        "Oskar Brandvold met Ines Valcourt to discuss a quilled spinet restoration.",  # mentions the subject
    ],
    BYSTANDERS[1].id: [
        "Leila Farouk booked the Lyon rehearsal room for the spring recital series.",
        "Leila Farouk moved the recital series to the Villeurbanne conservatoire.",
    ],
}


@dataclass
class Built:
    """A built graph: its folder and what the test needs to know of it."""

    root: Path
    person_uuids: dict[str, str] = field(default_factory=dict)
    edge_uuids: dict[str, list[str]] = field(default_factory=dict)
    """person id -> uuids of every entity edge with their person entity as source or target."""
    episode_uuids: dict[str, list[str]] = field(default_factory=dict)
    community_uuid: str = ""

    @property
    def db(self) -> Path:
        """The Kuzu database file."""
        return self.root / DB_FILE

    def target(self, name: str = "graph-memory", **keys: Any) -> Target:
        """The target as targets.toml would give it."""
        data = {
            "name": name,
            "kind": "graphiti",
            "base_dir": self.root,
            "db": DB_FILE,
            "group_template": "user-{subject_id}",
            "lock_timeout": 10,
        }
        return Target.model_validate(data | keys)


def open_driver(db: Path) -> Any:
    """Graphiti's own Kuzu driver on the database file (its deprecation warning silenced)."""
    from graphiti_core.driver.kuzu_driver import KuzuDriver

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return KuzuDriver(db=str(db))


def close_driver(driver: Any) -> None:
    """Close the driver's connection and database (Kuzu checkpoints on close). Query results still
    alive when their database closes crash the process as they are collected (kuzu 0.11): collect first."""
    gc.collect()
    driver.client.close()
    driver.db.close()


async def _build(driver: Any, built: Built, *, hold_edge: bool) -> None:
    emb = HashEmbedder()
    persons: dict[str, EntityNode] = {}
    for p in PEOPLE:
        node = EntityNode(
            name=p.name or p.id,
            group_id=group_of(p),
            labels=["Person"],
            summary=f"{p.name} is a client of the instrument workshop.",
            attributes={"user_id": p.id, "email": p.email},
            created_at=_t(2023, 1),
        )
        await node.generate_name_embedding(emb)
        await node.save(driver)
        persons[p.id] = node
        built.person_uuids[p.id] = node.uuid
        built.edge_uuids[p.id] = []
        built.episode_uuids[p.id] = []
    # A shared place entity (in the team group), which several people's facts point at.
    workshop = EntityNode(name="Instrument workshop", group_id=TEAM, labels=["Place"], created_at=_t(2023, 1))
    await workshop.generate_name_embedding(emb)
    await workshop.save(driver)

    async def place(name: str, group: str) -> EntityNode:
        n = EntityNode(name=name, group_id=group, labels=["Place"], created_at=_t(2023, 2))
        await n.generate_name_embedding(emb)
        await n.save(driver)
        return n

    async def episode(p: Subject, text: str, when: datetime, group: str) -> EpisodicNode:
        ep = EpisodicNode(
            name=f"chat {when.date()}",
            group_id=group,
            source=EpisodeType.message,
            source_description="support chat",
            content=text,
            valid_at=when,
            created_at=when,
        )
        await ep.save(driver)
        built.episode_uuids[p.id].append(ep.uuid)
        return ep

    async def fact(
        src: EntityNode,
        dst: EntityNode,
        rel: str,
        text: str,
        ep: EpisodicNode,
        valid: datetime,
        invalid: datetime | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> EntityEdge:
        e = EntityEdge(
            source_node_uuid=src.uuid,
            target_node_uuid=dst.uuid,
            name=rel,
            fact=text,
            group_id=ep.group_id,
            episodes=[ep.uuid],
            created_at=valid,
            valid_at=valid,
            invalid_at=invalid,
            expired_at=invalid,
            attributes=attrs or {},
        )
        await e.generate_embedding(emb)
        await e.save(driver)
        ep.entity_edges.append(e.uuid)
        await ep.save(driver)
        for who, node in persons.items():
            if node.uuid in (src.uuid, dst.uuid):
                built.edge_uuids[who].append(e.uuid)
        return e

    async def mentions(ep: EpisodicNode, *nodes: EntityNode) -> None:
        for n in nodes:
            await EpisodicEdge(
                source_node_uuid=ep.uuid, target_node_uuid=n.uuid, group_id=ep.group_id, created_at=ep.created_at
            ).save(driver)

    s = persons[SUBJECT.id]
    sg = group_of(SUBJECT)
    montrouge = await place("Montrouge studio", sg)
    canal = await place("Canal Saint-Martin workshop", sg)
    e1 = await episode(SUBJECT, SUBJECT_EPISODES[0], _t(2023, 3), sg)
    await fact(
        s,
        montrouge,
        "WORKS_AT",
        "Ines Valcourt restores harpsichords at the Montrouge studio",
        e1,
        _t(2023, 3),
        _t(2024, 5),
    )
    await mentions(e1, s, montrouge)
    e2 = await episode(SUBJECT, SUBJECT_EPISODES[1], _t(2024, 5), sg)
    hold = {HOLD_ATTRIBUTE: True} if hold_edge else None
    await fact(
        s,
        canal,
        "WORKS_AT",
        "Ines Valcourt restores harpsichords beside the Canal Saint-Martin",
        e2,
        _t(2024, 5),
        attrs=hold,
    )
    await mentions(e2, s, canal)
    # Re-asserted: back at Montrouge for one winter, then invalidated again.
    await fact(
        s,
        montrouge,
        "WORKS_AT",
        "Ines Valcourt took the Montrouge bench again for the winter",
        e2,
        _t(2024, 11),
        _t(2025, 3),
    )
    e3 = await episode(SUBJECT, SUBJECT_EPISODES[2], _t(2025, 3), sg)
    await fact(s, workshop, "CLIENT_OF", "Ines Valcourt is a client of the instrument workshop", e3, _t(2025, 3))
    await mentions(e3, s, workshop)

    o = persons[BYSTANDERS[0].id]
    og = group_of(BYSTANDERS[0])
    bergen = await place("Bergen choir school", og)
    o1 = await episode(BYSTANDERS[0], BYSTANDER_EPISODES[o.attributes["user_id"]][0], _t(2023, 4), og)
    await fact(
        o,
        bergen,
        "SUPPLIES",
        "Oskar Brandvold supplies tuning hammers to the Bergen choir school",
        o1,
        _t(2023, 4),
        _t(2024, 1),
    )
    await fact(o, bergen, "SUPPLIES", "Oskar Brandvold supplies the Bergen choir school again", o1, _t(2024, 9))
    await mentions(o1, o, bergen)
    # Oskar's episode mentions the subject: an edge between the two people, and a MENTIONS of her.
    o2 = await episode(BYSTANDERS[0], BYSTANDER_EPISODES[o.attributes["user_id"]][1], _t(2024, 6), TEAM)
    await fact(o, s, "MET", "Oskar Brandvold met Ines Valcourt about a quilled spinet", o2, _t(2024, 6))
    await fact(o, workshop, "CLIENT_OF", "Oskar Brandvold is a client of the instrument workshop", o2, _t(2023, 4))
    await mentions(o2, o, s, workshop)

    lf = persons[BYSTANDERS[1].id]
    lg = group_of(BYSTANDERS[1])
    lyon = await place("Lyon rehearsal room", lg)
    villeurbanne = await place("Villeurbanne conservatoire", lg)
    l1 = await episode(BYSTANDERS[1], BYSTANDER_EPISODES[lf.attributes["user_id"]][0], _t(2023, 9), lg)
    await fact(
        lf, lyon, "BOOKED", "Leila Farouk booked the Lyon rehearsal room for recitals", l1, _t(2023, 9), _t(2024, 2)
    )
    await mentions(l1, lf, lyon)
    l2 = await episode(BYSTANDERS[1], BYSTANDER_EPISODES[lf.attributes["user_id"]][1], _t(2024, 2), lg)
    await fact(
        lf, villeurbanne, "BOOKED", "Leila Farouk holds recitals at the Villeurbanne conservatoire", l2, _t(2024, 2)
    )
    await fact(lf, workshop, "CLIENT_OF", "Leila Farouk is a client of the instrument workshop", l2, _t(2023, 9))
    await mentions(l2, lf, villeurbanne, workshop)

    # A community of the workshop's clients whose summary quotes every member by name.
    community = CommunityNode(
        name="Workshop clients",
        group_id=TEAM,
        summary="Clients of the instrument workshop: Ines Valcourt, Oskar Brandvold and Leila Farouk.",
        created_at=_t(2025, 4),
    )
    await community.generate_name_embedding(emb)
    await community.save(driver)
    built.community_uuid = community.uuid
    for n in (workshop, *persons.values()):
        await CommunityEdge(
            source_node_uuid=community.uuid, target_node_uuid=n.uuid, group_id=TEAM, created_at=_t(2025, 4)
        ).save(driver)


_CACHE: dict[bool, Path] = {}


def build_graph(root: Path, *, hold_edge: bool = False) -> Built:
    """Build the graph in `root` (a new folder holding `graph.kuzu` and its files)."""
    root.mkdir(parents=True, exist_ok=True)
    built = Built(root)
    with_driver(built.db, lambda d: _build(d, built, hold_edge=hold_edge))
    return built


def with_driver(db: Path, work: Callable[[Any], Coroutine[Any, Any, T]]) -> T:
    """Run `work(driver)` on Graphiti's Kuzu driver, then close it once every coroutine is done (a Kuzu
    query result collected after its database closed crashes the process)."""
    driver = open_driver(db)
    try:
        return asyncio.run(work(driver))
    finally:
        close_driver(driver)


def built_copy(root: Path, cache_dir: Path, *, hold_edge: bool = False) -> Built:
    """A fresh copy of a graph built once per cache folder (building takes a few seconds)."""
    src = cache_dir / f"graph-{int(hold_edge)}"
    if not (src / "done").exists():
        shutil.rmtree(src, ignore_errors=True)
        b = build_graph(src, hold_edge=hold_edge)
        (src / "meta.json").write_text(
            json.dumps(
                {
                    "persons": b.person_uuids,
                    "edges": b.edge_uuids,
                    "episodes": b.episode_uuids,
                    "community": b.community_uuid,
                }
            )
        )
        (src / "done").write_text("")
    shutil.copytree(src, root, ignore=shutil.ignore_patterns("done", "meta.json", "built.json"))
    meta = json.loads((src / "meta.json").read_text())
    return Built(root, meta["persons"], meta["edges"], meta["episodes"], meta["community"])


GROUPS = [*(group_of(p) for p in PEOPLE), TEAM]


async def _read_back(driver: Any) -> dict[str, str]:
    out: dict[str, str] = {}

    def keep(kind: str, item: Any) -> None:
        out[f"{kind}:{item.uuid}"] = hashlib.sha256(item.model_dump_json().encode()).hexdigest()

    for n in await EntityNode.get_by_group_ids(driver, GROUPS, with_embeddings=True):
        keep("entity", n)
    for e in await EntityEdge.get_by_group_ids(driver, GROUPS, with_embeddings=True):
        keep("edge", e)
    for ep in await EpisodicNode.get_by_group_ids(driver, GROUPS):
        keep("episode", ep)
    for c in await CommunityNode.get_by_group_ids(driver, GROUPS):
        await c.load_name_embedding(driver)
        keep("community", c)
    for m in await EpisodicEdge.get_by_group_ids(driver, GROUPS):
        keep("mentions", m)
    for h in await CommunityEdge.get_by_group_ids(driver, GROUPS):
        keep("member", h)
    return out


def read_back(db: Path) -> dict[str, str]:
    """Every node and edge of every group, read through Graphiti's own API (embeddings loaded): kind:uuid
    -> SHA-256 of the model's JSON (its content digest)."""
    return with_driver(db, _read_back)


async def _edges_of(driver: Any) -> dict[str, tuple[str, str]]:
    return {
        e.uuid: (e.source_node_uuid, e.target_node_uuid)
        for e in [
            *await EpisodicEdge.get_by_group_ids(driver, GROUPS),
            *await CommunityEdge.get_by_group_ids(driver, GROUPS),
            *await EntityEdge.get_by_group_ids(driver, GROUPS),
        ]
    }


def subjects_keys(built: Built, digests: dict[str, str]) -> set[str]:
    """The keys of `read_back` that are the subject's by the erasure rule: their partition's rows, and
    every edge or link with one of their entities at either end (read through Graphiti's API too)."""
    sg = group_of(SUBJECT)

    async def partition(driver: Any) -> set[str]:
        mine = {f"entity:{n.uuid}" for n in await EntityNode.get_by_group_ids(driver, [sg])}
        mine |= {f"episode:{n.uuid}" for n in await EpisodicNode.get_by_group_ids(driver, [sg])}
        mine |= {f"edge:{e.uuid}" for e in await EntityEdge.get_by_group_ids(driver, [sg])}
        mine |= {f"mentions:{e.uuid}" for e in await EpisodicEdge.get_by_group_ids(driver, [sg])}
        people = {k.split(":", 1)[1] for k in mine if k.startswith("entity:")} | {built.person_uuids[SUBJECT.id]}
        for uuid, ends in (await _edges_of(driver)).items():
            if people & set(ends):
                mine |= {k for k in digests if k.endswith(":" + uuid)}
        return mine

    return with_driver(built.db, partition)
