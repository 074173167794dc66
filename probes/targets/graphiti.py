"""Probe of kind `graphiti`: a Graphiti temporal graph on embedded Kuzu, read with the probe's own
read-only Cypher through `kuzu` (never graphiti-core, nothing of `tasks/`).

What it reads (`kuzu.Database(..., read_only=True)`): every row of the node tables Graphiti's Kuzu
driver creates (`Entity`, `RelatesToNode_` with the entities at either end, `Episodic`, `Community`,
`Saga`) and their embeddings (`FLOAT[]`).

Who the subject is: entities whose JSON `attributes[subject_key]` is the request's id after NFKC and case
folding; every row of the subject's partition (`group_template`); edges with one of those entities at
either end, or left with no source or no target and naming the subject; and every uuid the fingerprint
saw of theirs (so a row the eraser failed to re-resolve is still counted).

Needles for the byte scan (`probes.targets.run`): the identifiers (`probes.identity.spellings`),
caseless; content windows of the subject's texts (facts, episodes, summaries) found in no other
person's text; and the subject's embeddings as Kuzu stores them (float32 little-endian), pieces that
occur in another row's embedding withheld. Identifier groups found inside other people's rows are
`mentioned_groups` (their byte hits are explained by the reported mentions). A text or embedding of the
subject whose bytes were not in the database file before (Kuzu stored it compressed) is declared
unscanned, never certified.

Logical probes, after: per table the subject's rows; stored embeddings equal to one of the subject's
(by digest of their float32 encoding). Bystander populations: every other row per table and every
other embedding. Mentions: other people's rows whose text names the subject.
"""

from __future__ import annotations

import gc
import hashlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import kuzu

from erasure.subject import Subject
from erasure.target_kinds.graphiti import GraphitiConfig
from erasure.targets import Target
from erasure.tiers import Tier
from probes.identity import spellings
from probes.model import Measurement, Unscanned
from probes.needles import NeedleKind, NeedleSet, add_content_windows, distinctive_pieces
from probes.others_text import Spelled, fold_id, identifier_needles
from probes.targets.probe import TargetFingerprint

KIND = "graphiti"
TABLES = ("Entity", "RelatesToNode_", "Episodic", "Community", "Saga")
TIER_OF = {
    "Entity": Tier.semantic,
    "RelatesToNode_": Tier.semantic,
    "Episodic": Tier.episodic,
    "Community": Tier.derivatives,
    "Saga": Tier.derivatives,
}
COMPRESSED = (
    "graphiti (Kuzu): {n} of the subject's values were not in the database file's bytes before the erasure "
    "(Kuzu stored them compressed): the byte scan cannot see them; the logical probes read them"
)
_QUERIES = {
    "Entity": "MATCH (n:Entity) RETURN n.uuid, n.group_id, n.attributes, n.name_embedding, [n.name, n.summary]",
    "RelatesToNode_": (
        "MATCH (n:RelatesToNode_) OPTIONAL MATCH (a:Entity)-[:RELATES_TO]->(n) "
        "OPTIONAL MATCH (n)-[:RELATES_TO]->(b:Entity) "
        "RETURN n.uuid, n.group_id, n.attributes, n.fact_embedding, [n.name, n.fact], a.uuid, b.uuid"
    ),
    "Episodic": (
        "MATCH (n:Episodic) RETURN n.uuid, n.group_id, '' AS a, NULL AS e, [n.name, n.content, n.source_description]"
    ),
    "Community": "MATCH (n:Community) RETURN n.uuid, n.group_id, '' AS a, n.name_embedding, [n.name, n.summary]",
    "Saga": "MATCH (n:Saga) RETURN n.uuid, n.group_id, '' AS a, NULL AS e, [n.name]",
}


_fold = fold_id


def float32(vector: list[float] | tuple[float, ...]) -> bytes:
    """An embedding as Kuzu stores a `FLOAT[]` value: float32, little-endian."""
    return struct.pack(f"<{len(vector)}f", *vector)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Row:
    """One row of one node table, as the probe reads it."""

    table: str
    uuid: str
    group: str
    attributes: dict[str, Any]
    embedding: bytes
    texts: tuple[str, ...]
    ends: tuple[str | None, str | None] = (None, None)


def _attrs(raw: object) -> dict[str, Any]:
    try:
        doc = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _all(conn: kuzu.Connection, query: str) -> list[list[Any]]:
    result = conn.execute(query)
    assert isinstance(result, kuzu.QueryResult)
    try:
        got: list[Any] = result.get_all()
        return [list(r) for r in got]
    finally:
        result.close()


def read_rows(db_path: Path) -> list[Row]:
    """Every row of Graphiti's node tables, read-only (results closed before the database)."""
    db = kuzu.Database(str(db_path), read_only=True)
    conn = kuzu.Connection(db)
    out: list[Row] = []
    try:
        tables = {str(r[0]) for r in _all(conn, "CALL SHOW_TABLES() RETURN name")}
        for table in TABLES:
            if table not in tables:
                continue
            for r in _all(conn, _QUERIES[table]):
                emb = float32(r[3]) if isinstance(r[3], list) and r[3] else b""
                texts = tuple(t for t in r[4] if isinstance(t, str))
                ends = (r[5], r[6]) if len(r) > 5 else (None, None)
                out.append(Row(table, str(r[0]), str(r[1] or ""), _attrs(r[2]), emb, texts, ends))
    finally:
        gc.collect()
        conn.close()
        db.close()
    return out


class _Who:
    """The subject as the probe recognises them: ids (folded), their group, a token-bounded pattern."""

    def __init__(self, cfg: GraphitiConfig, subject: Subject, rows: list[Row], known: list[str]) -> None:
        want = _fold(subject.id)
        keyed = [r.attributes.get(cfg.subject_key) for r in rows if r.table == "Entity"]
        self.ids = sorted({subject.id, *known, *(k for k in keyed if isinstance(k, str) and _fold(k) == want)})
        self.folded = {_fold(i) for i in self.ids}
        self.key = cfg.subject_key
        group = cfg.group_of(subject.id)
        self.group = _fold(group) if group else None
        self.spellings = spellings(subject, self.ids)
        self.spelled = Spelled([s for _, s in self.spellings])

    def names(self, texts: tuple[str, ...]) -> bool:
        return self.spelled.names(texts)

    def owns_entity(self, row: Row) -> bool:
        key = row.attributes.get(self.key)
        return (isinstance(key, str) and _fold(key) in self.folded) or self.in_group(row)

    def in_group(self, row: Row) -> bool:
        return self.group is not None and _fold(row.group) == self.group


@dataclass
class _Split:
    mine: list[Row] = field(default_factory=list)
    theirs: list[Row] = field(default_factory=list)
    mentions: int = 0


def _split(rows: list[Row], who: _Who, known: set[str]) -> _Split:
    s = _Split()
    people = {r.uuid for r in rows if r.table == "Entity" and (who.owns_entity(r) or r.uuid in known)}
    for r in rows:
        if r.table == "Entity":
            mine = r.uuid in people
        elif r.table == "RelatesToNode_":
            orphan = None in r.ends and who.names(r.texts)
            mine = bool(people & set(r.ends)) or who.in_group(r) or orphan or r.uuid in known
        else:
            mine = who.in_group(r) or r.uuid in known
        if mine:
            s.mine.append(r)
        else:
            s.theirs.append(r)
            s.mentions += who.names(r.texts)
    return s


class GraphitiProbe:
    kind: ClassVar[str] = KIND

    def files(self, target: Target) -> list[Path]:
        return [GraphitiConfig.of(target).db]

    def fingerprint(self, target: Target, subject: Subject) -> TargetFingerprint:
        cfg = GraphitiConfig.of(target)
        rows = read_rows(cfg.db)
        who = _Who(cfg, subject, rows, [])
        s = _split(rows, who, set())
        needles = NeedleSet()
        their_text = [t for r in s.theirs for t in r.texts] + [json.dumps(r.attributes) for r in s.theirs]
        mentioned = self._identifiers(needles, who, rows, their_text)
        self._content(needles, s, "\n".join(their_text))
        digests = self._vectors(needles, s)
        data = cfg.db.read_bytes() if cfg.db.is_file() else b""
        hidden = sum(1 for r in s.mine for t in r.texts if len(t.encode()) >= 8 and t.encode() not in data)
        hidden += sum(1 for r in s.mine if r.embedding and r.embedding not in data)
        return TargetFingerprint(
            target=target.name,
            needles=needles.needles,
            bystanders=self._populations(s, set(digests)),
            subject_before={f"kuzu:{t}:rows-of-subject": sum(1 for r in s.mine if r.table == t) for t in TABLES},
            mentions=s.mentions,
            mentioned_groups=mentioned,
            state={
                "ids": who.ids,
                "uuids": sorted(r.uuid for r in s.mine),
                "vector_digests": digests,
                "compressed_values": hidden,
                "needle_stats": needles.stats,
            },
        )

    @staticmethod
    def _identifiers(needles: NeedleSet, who: _Who, rows: list[Row], theirs: list[str]) -> list[int]:
        """Identifier needles (`probes.others_text.identifier_needles`, with the other people's entity
        keys as others' ids)."""
        keyed = {r.attributes.get(who.key) for r in rows if r.table == "Entity"}
        others = {_fold(k) for k in keyed if isinstance(k, str) and _fold(k) not in who.folded}
        return identifier_needles(needles, who.spelled, [s for _, s in who.spellings], theirs, others)

    @staticmethod
    def _content(needles: NeedleSet, s: _Split, corpus: str) -> None:
        add_content_windows(needles, (t for r in s.mine for t in r.texts), corpus)

    @staticmethod
    def _vectors(needles: NeedleSet, s: _Split) -> list[str]:
        """Vector needles; the digests of the subject's embeddings that have no bystander twin."""
        theirs = b"\x00".join(r.embedding for r in s.theirs)
        twins = {r.embedding for r in s.theirs if r.embedding}
        digests: list[str] = []
        for r in s.mine:
            if not r.embedding:
                continue
            if r.embedding in twins:
                needles.bump("vector_twin")
                continue
            digests.append(_digest(r.embedding))
            pieces = [p for _off, p in distinctive_pieces(r.embedding) if p not in theirs]
            needles.add_group(NeedleKind.vector, pieces)
        return sorted(set(digests))

    @staticmethod
    def _populations(s: _Split, digests: set[str]) -> dict[str, int]:
        out = {f"kuzu:{t}": sum(1 for r in s.theirs if r.table == t) for t in TABLES}
        out["kuzu:other-embeddings"] = sum(1 for r in s.theirs if r.embedding and _digest(r.embedding) not in digests)
        return out

    def unscanned(self, target: Target, fp: TargetFingerprint | None = None) -> list[Unscanned]:
        """The subject's values Kuzu stored where the byte scan cannot read them (counted before)."""
        n = int(fp.state.get("compressed_values", 0)) if fp is not None else 0
        if not n:
            return []
        key = _digest(f"{target.name}\x00compressed".encode())
        return [Unscanned(sha256=key, size=0, reason=COMPRESSED.format(n=n), target=target.name)]

    def measure(self, target: Target, subject: Subject, fp: TargetFingerprint) -> list[tuple[str, Measurement]]:
        cfg = GraphitiConfig.of(target)
        rows = read_rows(cfg.db)
        who = _Who(cfg, subject, rows, [str(i) for i in fp.state.get("ids", [])])
        s = _split(rows, who, {str(u) for u in fp.state.get("uuids", [])})
        digests = {str(d) for d in fp.state.get("vector_digests", [])}
        pops = self._populations(s, digests)
        out: list[tuple[str, Measurement]] = [
            (
                TIER_OF[t].value,
                Measurement(
                    f"kuzu:{t}:rows-of-subject", sum(1 for r in s.mine if r.table == t), f"kuzu:{t}", pops[f"kuzu:{t}"]
                ),
            )
            for t in TABLES
        ]
        hits = sum(1 for r in rows if r.embedding and _digest(r.embedding) in digests)
        out.append(
            (
                Tier.vectors.value,
                Measurement("kuzu:subject-embeddings", hits, "kuzu:other-embeddings", pops["kuzu:other-embeddings"]),
            )
        )
        return out


PROBE = GraphitiProbe()
