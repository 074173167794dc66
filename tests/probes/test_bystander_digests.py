"""Bystanders are compared by content digests, not counts: every row another person had before the
erasure must be there byte for byte afterwards. The LangGraph eraser never rewrites another person's
item or thread (mentions there are reported, not redacted), so any change to one is `BystandersLost`
(exit 10), even when every population keeps its size; new rows (an agent that keeps talking to a
bystander meanwhile) change nobody's data. The memory is built with the real framework; the changes
are made through LangGraph's API or, where the framework has no call for it, by SQL as an agent's
own code would."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from probes.model import ProbeResult
from probes.targets import run
from tasks.targets.langgraph_sqlite import ERASER
from tests import budget
from tests.langgraph_sqlite_fixtures import chat_graph, open_saver, open_store
from tests.targets.test_langgraph_layouts import (
    BYSTANDERS,
    MEMORIES,
    NEW_KEY,
    OLD_KEY,
    PREFS,
    SUBJECT,
    Layouts,
    build,
    copy_of,
    target,
)

CHANGES = (
    "rewrite-item",
    "delete-item-add-another",
    "alter-vector",
    "alter-checkpoint",
    "append-turn",
    "add-item",
    "none",
)
LOSSES = {"rewrite-item", "delete-item-add-another", "alter-vector", "alter-checkpoint"}
"""The changes that are a loss of someone else's data, written down apart from the probe."""


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Layouts:
    return build(
        tmp_path_factory.mktemp("digests") / "agent", [SUBJECT, *BYSTANDERS], [MEMORIES, PREFS], [NEW_KEY, OLD_KEY]
    )


def change(lay: Layouts, kind: str, who: int, which: int) -> None:
    """One change to bystander `who`'s data, after the erasure."""
    person = BYSTANDERS[who]
    items = lay.items[person.id]
    ns, key, value = items[which % len(items)]
    tid, tkey = lay.threads[person.id][which % len(lay.threads[person.id])]
    if kind == "rewrite-item":
        with open_store(lay.store) as store:
            store.put(ns, key, {**value, "text": value["text"] + "!"})
    elif kind == "delete-item-add-another":
        with open_store(lay.store) as store:
            store.delete(ns, key)
            store.put(ns, key + "-new", value)
    elif kind == "alter-vector":
        with sqlite3.connect(lay.store) as conn:
            blob = conn.execute(
                "SELECT embedding FROM store_vectors WHERE prefix = ? AND key = ?", (".".join(ns), key)
            ).fetchone()[0]
            flipped = bytes([blob[0] ^ 1]) + bytes(blob[1:])
            conn.execute(
                "UPDATE store_vectors SET embedding = ? WHERE prefix = ? AND key = ?", (flipped, ".".join(ns), key)
            )
    elif kind == "alter-checkpoint":
        with sqlite3.connect(lay.checkpoints) as conn:
            conn.execute(
                "UPDATE checkpoints SET metadata = CAST(replace(CAST(metadata AS TEXT), '\"loop\"',"
                " '\"edit\"') AS BLOB) WHERE thread_id = ?",
                (tid,),
            )
            assert conn.total_changes > 0
    elif kind == "append-turn":
        with open_saver(lay.checkpoints) as saver:
            chat_graph(saver).invoke(
                {"messages": [("user", "one more question")]}, {"configurable": {"thread_id": tid, tkey: person.id}}
            )
    elif kind == "add-item":
        with open_store(lay.store) as store:
            store.put(ns, "later", {"text": "written after the erasure"})


def lost(results: list[ProbeResult]) -> list[tuple[str, str]]:
    return [(r.tier, r.method) for r in results if r.lost_bystanders()]


@settings(
    max_examples=budget.examples(14),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(kind=st.sampled_from(CHANGES), who=st.integers(0, len(BYSTANDERS) - 1), which=st.integers(0, 20))
def test_a_change_to_someone_elses_record_is_a_loss_and_an_addition_is_not(
    memory: Layouts, tmp_path_factory: pytest.TempPathFactory, kind: str, who: int, which: int
) -> None:
    event(kind)
    lay = copy_of(memory, tmp_path_factory.mktemp("d") / "agent")
    t = target(lay, "agent", [MEMORIES, PREFS], [NEW_KEY, OLD_KEY])
    fp = run.take(t, SUBJECT)
    ERASER.erase(t, SUBJECT)
    change(lay, kind, who, which)
    results = run.probe(t, SUBJECT, fp)
    assert all(r.residue == 0 for r in results)
    digests = [m for m in lost(results) if m[1].endswith("content-digests")]
    if kind in LOSSES:
        assert len(digests) == 1, (kind, lost(results))
    else:
        assert lost(results) == [], kind
    shutil.rmtree(lay.root)


def test_counts_alone_would_have_said_nothing_was_lost(memory: Layouts, tmp_path: Path) -> None:
    """The same number of items, vectors and threads: only the digests see the swap."""
    lay = copy_of(memory, tmp_path / "agent")
    t = target(lay, "agent", [MEMORIES, PREFS], [NEW_KEY, OLD_KEY])
    fp = run.take(t, SUBJECT)
    ERASER.erase(t, SUBJECT)
    change(lay, "delete-item-add-another", 0, 0)
    results = run.probe(t, SUBJECT, fp)
    by: dict[str, Any] = {r.method: r for r in results if r.tier == "semantic"}
    assert by["items-by-key"].bystanders_after == by["items-by-key"].bystanders_before
    assert lost(results) == [("semantic", "items-content-digests")]


def test_no_identifier_or_content_in_the_results(memory: Layouts, tmp_path: Path) -> None:
    lay = copy_of(memory, tmp_path / "agent")
    t = target(lay, "agent", [MEMORIES], [NEW_KEY])
    fp = run.take(t, SUBJECT)
    ERASER.erase(t, SUBJECT)
    text = repr(run.probe(t, SUBJECT, fp)).lower() + repr(fp).lower()
    for person in (SUBJECT, *BYSTANDERS):
        assert person.id.lower() not in text and (person.email or "").lower() not in text
