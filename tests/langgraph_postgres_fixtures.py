"""A real LangGraph memory in PostgreSQL for the langgraph-postgres target tests: `PostgresStore` (with
its pgvector index when the cluster has pgvector) and `PostgresSaver` under a compiled graph, built by
the framework itself on an agent connection that the test keeps open (the agent keeps running).

People, topics and the local embedding are those of the SQLite fixtures (`langgraph_sqlite_fixtures`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from erasure.subject import Subject
from erasure.targets import Target
from tests.langgraph_sqlite_fixtures import (
    _TOPICS,
    BYSTANDERS,
    DIMS,
    NAMESPACE,
    SHARED_DOCS,
    SUBJECT,
    THREAD_KEY,
    HashEmbeddings,
    chat_graph,
    person_items,
    thread_config,
)
from tests.pg_cluster import SUPERUSER, Cluster

__all__ = ["BYSTANDERS", "MORE_SUBJECTS", "SUBJECT", "Agent", "PgMemory", "build_memory", "make_target"]

MORE_SUBJECTS = (
    Subject(id="usr-c41e77", email="joao.reis@example.pt", name="João Reis", phone="+351 961 222 333"),
    Subject(id="usr-9d05b3", email="hana.kim@example.kr", name="Hana Kim"),
)
"""Two more people for tests that erase three (issue 26: a backup taken before three erasures)."""
TOPICS = {
    **_TOPICS,
    MORE_SUBJECTS[0].id: [
        "The tram pass renewal failed because the card reader at the Cais do Sodre station was broken",
        "Please cancel the cork flooring order for the attic and refund the deposit to my savings account",
        "My grandmother's accordion needs new bellows before the village festival in late August",
    ],
    MORE_SUBJECTS[1].id: [
        "The kimchi fermentation crocks arrived cracked, two of the four lids were missing entirely",
        "Schedule the piano tuner for the upright in the hallway on the first Wednesday of next month",
        "I need a quiet desk by the window for the translation course, away from the espresso machine",
    ],
}


@dataclass
class Agent:
    """The agent's own connection, store, saver and graph (open for as long as the test wants)."""

    conn: Any
    store: Any
    saver: Any
    graph: Any
    indexed: bool


@contextmanager
def agent(cluster: Cluster, database: str, *, indexed: bool, user: str = SUPERUSER) -> Iterator[Agent]:
    """An agent connected as LangGraph's docs show (autocommit, dict rows), tables set up on first use."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore
    from psycopg import connect
    from psycopg.rows import dict_row

    conn = connect(cluster.url(database, user), autocommit=True, prepare_threshold=0, row_factory=dict_row)
    try:
        index = {"dims": DIMS, "embed": HashEmbeddings().embed_documents, "fields": ["text"]} if indexed else None
        store = PostgresStore(conn, index=index)  # type: ignore[arg-type]
        store.setup()
        saver = PostgresSaver(conn)
        saver.setup()
        yield Agent(conn, store, saver, chat_graph(saver), indexed)
    finally:
        conn.close()


@dataclass
class PgMemory:
    """What was built (for reading bystanders back through LangGraph)."""

    database: str
    items: dict[str, list[tuple[tuple[str, ...], str, dict[str, Any]]]] = field(default_factory=dict)
    threads: dict[str, list[str]] = field(default_factory=dict)


def make_target(cluster: Cluster, database: str, *, data_dir: bool = True, **extra: Any) -> Target:
    return Target.model_validate(
        {
            "name": "prod-agent",
            "kind": "langgraph-postgres",
            "base_dir": cluster.root,
            "url": cluster.url(database),
            "namespace": NAMESPACE,
            "thread_key": THREAD_KEY,
            "episodic": ["episodes"],
            **({"data_dir": str(cluster.data)} if data_dir else {}),
            **extra,
        }
    )


def build_memory(
    a: Agent,
    database: str,
    *,
    copies: int = 3,
    turns: int = 3,
    threads_per_person: int = 2,
    people: tuple[Subject, ...] = (SUBJECT, *BYSTANDERS),
) -> PgMemory:
    """Items (memories, profile, episodes; one update) and threads for every person, shared documents,
    and one bystander item the team deleted with the framework's own delete."""
    mem = PgMemory(database)
    for person in people:
        items = person_items(person, TOPICS[person.id], copies)
        for ns, key, value in items:
            a.store.put(ns, key, value)
        ns, key, value = items[0]
        items[0] = (ns, key, {**value, "text": value["text"] + " (updated)"})
        a.store.put(*items[0])
        mem.items[person.id] = items
    shared: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
        (("docs", "policies"), f"doc-{i}", {"text": t}) for i, t in enumerate(SHARED_DOCS)
    ]
    for ns, key, value in shared:
        a.store.put(ns, key, value)
    mem.items[""] = shared
    ns, key, _ = mem.items[BYSTANDERS[1].id].pop(1)
    a.store.delete(ns, key)
    for person in people:
        mem.threads[person.id] = []
        for t in range(threads_per_person):
            tid = f"thread-{person.id}-{t}"
            mem.threads[person.id].append(tid)
            for turn in range(turns):
                topic = TOPICS[person.id][(t + turn) % len(TOPICS[person.id])]
                text = f"Hi, this is {person.name} ({person.email}). {topic}, turn {turn}."
                a.graph.invoke({"messages": [("user", text)]}, thread_config(tid, person.id))
    return mem


def bystander_view(a: Agent, mem: PgMemory, *, erased: tuple[Subject, ...] = (SUBJECT,)) -> dict[str, Any]:
    """Every bystander's items (value), vectors (nearest answers) and threads (messages), through LangGraph:
    everyone's but the `erased` people's."""
    out: dict[str, Any] = {}
    for person, items in mem.items.items():
        if person in {e.id for e in erased}:
            continue
        for ns, key, _value in items:
            got = a.store.get(ns, key)
            out[f"item:{'.'.join(ns)}:{key}"] = None if got is None else got.value
    if a.indexed:
        for b in BYSTANDERS:
            for q in _TOPICS[b.id]:
                hits = a.store.search(("users", b.id), query=q, limit=3)
                out[f"search:{b.id}:{q[:20]}"] = [(h.key, round(float(h.score or 0), 5)) for h in hits]
    for b in BYSTANDERS:
        for tid in mem.threads[b.id]:
            state = a.graph.get_state(thread_config(tid, b.id))
            out[f"thread:{tid}"] = [m.content for m in state.values["messages"]]
    return out


def subject_gone(a: Agent, mem: PgMemory, who: Subject = SUBJECT) -> None:
    """Nothing of `who` answers through LangGraph."""
    for ns, key, _value in mem.items[who.id]:
        assert a.store.get(ns, key) is None, (ns, key)
    assert a.store.search(("users", who.id), limit=100) == []
    for tid in mem.threads[who.id]:
        assert a.graph.get_state(thread_config(tid, who.id)).values == {}


LIVE = ("users", "usr-live-0001", "memories")
"""Where the writing agent puts its notes (nobody's erasure touches them)."""


class Writer(threading.Thread):
    """The agent: a LangGraph `store.put` every 50 ms on its own connection, each one timed."""

    def __init__(self, a: Any) -> None:
        super().__init__(daemon=True)
        self.a = a
        self.stop = threading.Event()
        self.ok = 0
        self.longest = 0.0
        self.errors: list[str] = []

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                self.a.store.put(LIVE, f"m{i}", {"text": f"a live note, number {i}"})
                self.ok += 1
            except Exception as exc:  # counted, asserted on below
                self.errors.append(type(exc).__name__)
            self.longest = max(self.longest, time.monotonic() - t0)
            i += 1
            self.stop.wait(0.05)


@contextmanager
def writing(c: Cluster, database: str, user: str) -> Iterator[Writer]:
    with agent(c, database, indexed=False, user=user) as a:
        w = Writer(a)
        w.start()
        try:
            yield w
        finally:
            w.stop.set()
            w.join()
