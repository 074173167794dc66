"""Target kind `graphiti`: a real Graphiti graph on its embedded Kuzu backend (built with graphiti-core's
own model classes, `tests.graphiti_fixtures`), erased by `ERASER.erase`, checked by the test's own oracle
(a plain byte search of every file of the database folder, and Kuzu reads of its own), read back
through Graphiti's API (content digests of every other node and edge), and verified by the independent
probe (`probes.targets.run`). Also what Graphiti's own delete leaves, as measured (docs/targets.md)."""

from __future__ import annotations

import gc
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import kuzu
import pytest

from erasure.errors import ConfigError, HoldActive, StoreError
from erasure.tiers import Tier
from probes.model import ProbeResult
from probes.targets import run
from tasks.targets.graphiti import ERASER
from tests.graphiti_fixtures import (
    BYSTANDERS,
    SUBJECT,
    Built,
    HashEmbedder,
    built_copy,
    read_back,
    subjects_keys,
    with_driver,
)

# A framework store (tests/tiers.py): marked here, the builder being this kind's own test helper.
pytestmark = [pytest.mark.framework, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

# The subject's identifiers that no other person's row carries, and their distinctive content.
OWN = [SUBJECT.id, "ines.valcourt@example.org", "+33 1 70 36 4412", "70 36 4412", "Montrouge", "harpsichord", "Canal"]
NAME = ["Ines Valcourt", "Valcourt"]
SUBJECT_TEXTS = [
    "Ines Valcourt",
    "Montrouge studio",
    "Canal Saint-Martin workshop",
    "Ines Valcourt restores harpsichords at the Montrouge studio",
    "Ines Valcourt is a client of the instrument workshop",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("graphiti-cache")


@pytest.fixture
def graph(tmp_path: Path, cache: Path) -> Built:
    return built_copy(tmp_path / "agent", cache)


@pytest.fixture
def held_graph(tmp_path: Path, cache: Path) -> Built:
    return built_copy(tmp_path / "agent", cache, hold_edge=True)


def oracle_bytes(root: Path, strings: list[str]) -> dict[str, list[str]]:
    """Each string found (ASCII case-insensitively) in any file under `root` -> the files (the test's walk)."""
    files = {}
    for folder, _, names in os.walk(root):
        for name in names:
            p = Path(folder) / name
            files[str(p.relative_to(root))] = p.read_bytes().lower()
    return {
        s: [f for f, d in files.items() if s.lower().encode() in d]
        for s in strings
        if any(s.lower().encode() in d for d in files.values())
    }


def oracle_vectors(root: Path) -> list[str]:
    """Files holding the first 8 floats (float32) of any embedding of the subject's texts."""
    embed = HashEmbedder()
    needles = [struct.pack("<8f", *embed.vector(t)[:8]) for t in SUBJECT_TEXTS]
    return [p.name for p in root.rglob("*") if p.is_file() and any(n in p.read_bytes() for n in needles)]


def oracle_rows(db: Path) -> list[tuple[str, str]]:
    """(table, column) of every string value naming the subject, read by Kuzu apart from the probe."""
    database = kuzu.Database(str(db), read_only=True)
    conn = kuzu.Connection(database)
    out = []
    try:
        for table, cols in (
            ("Entity", ("name", "summary", "attributes")),
            ("RelatesToNode_", ("name", "fact", "attributes")),
            ("Episodic", ("name", "content", "group_id")),
            ("Community", ("name", "summary")),
        ):
            for col in cols:
                result = conn.execute(f"MATCH (n:{table}) RETURN n.{col}")
                assert isinstance(result, kuzu.QueryResult)
                values: list[Any] = result.get_all()
                result.close()
                for (value,) in values:
                    if isinstance(value, str) and any(s.lower() in value.lower() for s in [*OWN, *NAME]):
                        out.append((table, col))
    finally:
        gc.collect()
        conn.close()
        database.close()
    return out


def assert_all_clear(results: list[ProbeResult]) -> None:
    failing = [(r.tier, r.method, r.residue, r.bystanders_before, r.bystanders_after) for r in results if r.failing()]
    assert not failing, failing
    methods = {r.method for r in results}
    assert {"scan:identifier", "scan:content", "scan:vector"} <= methods, methods


def test_erase_leaves_nothing_of_the_subject_and_the_others_read_back_byte_identical(graph: Built) -> None:
    target = graph.target()
    assert set(oracle_bytes(graph.root, OWN + NAME)) == set(OWN + NAME), "the oracle must see the subject before"
    assert oracle_vectors(graph.root)
    before = read_back(graph.db)
    theirs = {k: v for k, v in before.items() if k not in subjects_keys(graph, before)}
    assert len(theirs) < len(before) and any(k.startswith("edge:") for k in theirs)
    fp = run.take(target, SUBJECT)
    counts = ERASER.count(target, SUBJECT)
    assert all(counts[t] > 0 for t in (Tier.episodic, Tier.semantic, Tier.vectors)), counts
    # Oskar's episode about meeting her and the community summary quoting her: reported, not erased.
    assert ERASER.mentions(target, SUBJECT) == fp.mentions == 2

    out = ERASER.erase(target, SUBJECT)

    assert {t: o.before for t, o in out.items()} == counts
    assert all(o.after == 0 for o in out.values()), out
    # Five facts with her at either end, three of them invalidated or re-asserted, and her partition.
    assert out[Tier.semantic].detail["edges"] == len(graph.edge_uuids[SUBJECT.id]) == 5
    assert out[Tier.episodic].detail["episodes"] == len(graph.episode_uuids[SUBJECT.id]) == 3
    assert oracle_bytes(graph.root, OWN) == {}
    assert oracle_vectors(graph.root) == []
    # Her name is left only in the two reported mentions (another person's episode, the community).
    assert sorted(oracle_rows(graph.db)) == [("Community", "summary"), ("Episodic", "content")]
    assert sorted(os.listdir(graph.root)) == ["graph.kuzu"]
    after = read_back(graph.db)
    assert after == theirs
    assert_all_clear(run.probe(target, SUBJECT, fp))
    # A rerun finds nothing and changes nothing of the others; the epoch advances once per request.
    assert ERASER.epoch_current(target) == 0
    again = ERASER.erase(target, SUBJECT, "req-1")
    assert all(o.before == o.after == 0 for o in again.values())
    assert ERASER.epoch_current(target) == 1
    ERASER.erase(target, SUBJECT, "req-1")
    assert ERASER.epoch_current(target) == ERASER.epoch_advance(target, "req-1") == 1
    assert read_back(graph.db) == theirs


def test_each_bystander_is_erased_alone_without_touching_the_subject(graph: Built) -> None:
    """The rule is the same for everyone: erasing a bystander leaves the subject's rows as they were."""
    before = read_back(graph.db)
    target = graph.target()
    out = ERASER.erase(target, BYSTANDERS[1])
    assert out[Tier.semantic].before > 0 and all(o.after == 0 for o in out.values())
    after = read_back(graph.db)
    mine = subjects_keys(graph, before)
    assert {k: before[k] for k in mine} == {k: after[k] for k in mine}


def test_a_hold_on_one_of_the_subject_edges_refuses_the_whole_erasure(held_graph: Built) -> None:
    target = held_graph.target()
    before = read_back(held_graph.db)
    assert ERASER.held(target, SUBJECT) == 1
    counts = ERASER.count(target, SUBJECT)

    with pytest.raises(HoldActive, match=r"1 row\(s\) of the subject are under litigation hold; nothing erased"):
        ERASER.erase(target, SUBJECT)

    with pytest.raises(HoldActive):
        ERASER.erase(target, SUBJECT, "req-held")
    assert read_back(held_graph.db) == before
    assert ERASER.count(target, SUBJECT) == counts
    assert ERASER.epoch_current(target) == 0  # no record of an erasure that did not happen
    assert set(oracle_bytes(held_graph.root, OWN)) == set(OWN)
    # The hold names one edge: the others' erasure is not held.
    assert ERASER.held(target, BYSTANDERS[0]) == 0


def test_graphiti_own_delete_leaves_the_subject_and_the_probe_catches_it(graph: Built) -> None:
    """What `Graphiti.remove_episode` and `EntityNode.delete` leave on Kuzu (numbers in docs/targets.md)."""
    from graphiti_core.cross_encoder.client import CrossEncoderClient
    from graphiti_core.graphiti import Graphiti
    from graphiti_core.llm_client.client import LLMClient
    from graphiti_core.nodes import EntityNode

    class NoLLM(LLMClient):
        async def _generate_response(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            raise RuntimeError("no LLM in tests")

    class NoRank(CrossEncoderClient):
        async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
            return [(p, 0.0) for p in passages]

    target = graph.target()
    fp = run.take(target, SUBJECT)

    async def framework_delete(driver: Any) -> None:
        g = Graphiti(graph_driver=driver, llm_client=NoLLM(None), embedder=HashEmbedder(), cross_encoder=NoRank())
        for uuid in graph.episode_uuids[SUBJECT.id]:
            await g.remove_episode(uuid)
        node = await EntityNode.get_by_uuid(driver, graph.person_uuids[SUBJECT.id])
        await node.delete(driver)

    import logging

    logging.disable(logging.CRITICAL)  # remove_episode logs each summary it could not rebuild without an LLM
    try:
        with_driver(graph.db, framework_delete)
    finally:
        logging.disable(logging.NOTSET)
    # Every byte of hers is still in the file, and the edge where she was the target is orphaned.
    assert set(oracle_bytes(graph.root, OWN)) == set(OWN)
    assert oracle_vectors(graph.root)
    assert ("RelatesToNode_", "fact") in oracle_rows(graph.db)
    failing = {r.method: r.residue for r in run.probe(target, SUBJECT, fp) if r.failing()}
    assert failing["scan:identifier"] > 0 and failing["kuzu:RelatesToNode_:rows-of-subject"] == 1, failing
    # Our erasure finishes what the framework left: the orphaned edge names her and goes.
    out = ERASER.erase(target, SUBJECT)
    assert out[Tier.semantic].detail["edges"] == 1 and all(o.after == 0 for o in out.values())
    assert oracle_bytes(graph.root, OWN) == {}
    assert_all_clear(run.probe(target, SUBJECT, fp))


def test_config_errors_name_the_key(graph: Built, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="key 'db'"):
        ERASER.check(graph.target(db=str(tmp_path / "missing.kuzu")))
    with pytest.raises(ConfigError, match="group_template"):
        ERASER.check(graph.target(group_template="user-fixed"))


def _agent_holding(db: Path, seconds: float) -> subprocess.Popen[str]:
    """Another process (the agent) with the database open for writing for `seconds`."""
    code = f"import kuzu, time; d = kuzu.Database({str(db)!r}); print('open', flush=True); time.sleep({seconds})"
    agent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert agent.stdout is not None and agent.stdout.readline().strip() == "open"
    return agent


def test_erase_waits_for_the_agent_to_close_the_database(graph: Built) -> None:
    agent = _agent_holding(graph.db, 2)
    try:
        out = ERASER.erase(graph.target(lock_timeout=30), SUBJECT)
    finally:
        agent.wait(timeout=30)
    assert out[Tier.semantic].before > 0 and all(o.after == 0 for o in out.values())


def test_erase_gives_up_on_a_database_never_released_and_changes_nothing(graph: Built) -> None:
    before = read_back(graph.db)
    agent = _agent_holding(graph.db, 8)
    try:
        with pytest.raises(StoreError, match="stayed open in another process"):
            ERASER.erase(graph.target(lock_timeout=1), SUBJECT)
    finally:
        agent.wait(timeout=30)
    assert read_back(graph.db) == before


def test_a_rerun_after_a_crash_before_the_rebuild_removes_the_bytes(
    graph: Built, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tasks.targets.graphiti as kind

    target = graph.target()

    def crash(*_args: Any) -> Path:
        raise RuntimeError("killed before the rebuild")

    with monkeypatch.context() as m:
        m.setattr(kind, "export_fresh", crash)
        with pytest.raises(RuntimeError):
            ERASER.erase(target, SUBJECT)
    # The deletes committed; the bytes are still in the file, and nothing on disk says a rebuild is due.
    assert all(n == 0 for n in ERASER.count(target, SUBJECT).values())
    assert oracle_bytes(graph.root, OWN)
    out = ERASER.erase(target, SUBJECT)
    assert all(o.before == o.after == 0 for o in out.values())
    assert oracle_bytes(graph.root, OWN) == {} and oracle_vectors(graph.root) == []


def test_values_the_byte_scan_cannot_see_are_declared_never_certified(graph: Built) -> None:
    from probes.targets.graphiti import PROBE

    target = graph.target()
    fp = run.take(target, SUBJECT)
    assert fp.state["compressed_values"] == 0  # Kuzu wrote every value of theirs as it is
    assert PROBE.unscanned(target, fp) == []
    hidden = fp.model_copy(update={"state": {**fp.state, "compressed_values": 3}})
    (declared,) = PROBE.unscanned(target, hidden)
    assert declared.target == target.name and "3 of the subject's values" in declared.reason
    assert SUBJECT.id not in declared.model_dump_json()


def test_a_replay_after_a_restore_finds_the_subject_in_the_graph(graph: Built) -> None:
    """A restored graph is no SQLite file: the kind gives the replay its rows' strings itself."""
    from tasks.replay_find import harvest

    found = harvest(graph.target())
    assert SUBJECT.email in found and any(SUBJECT.id in s for s in found)
    ERASER.erase(graph.target(), SUBJECT)
    found = harvest(graph.target())
    assert SUBJECT.email not in found and not any(SUBJECT.id in s for s in found)
