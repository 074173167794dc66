"""A real LangGraph memory for the langgraph-sqlite target tests: built with the framework itself.

- long-term memory: `langgraph.store.sqlite.SqliteStore` with a vector index (`store_vectors`, via
  sqlite-vec), several namespaces per person (`("users", <id>, "memories" | "profile" | "episodes")`),
  a shared namespace of documents that name nobody, and one bystander memory that mentions the subject;
  some items are written twice (an update leaves the old version in freed space), and one bystander
  item is deleted by the framework before the erasure (its vectors stay: the framework's own leftover);
- threads: `langgraph.checkpoint.sqlite.SqliteSaver` under a real compiled `StateGraph` with a message
  list; every run passes `user_id` in `configurable`, which LangGraph copies into checkpoint metadata.

The embedding function is local and deterministic (a hashed random projection: no model, no network).
The pyenv interpreter's `sqlite3` cannot load extensions, which the store's vector index needs:
`connect_sqlite` uses the standard library's module when it can load them, else `pysqlite3` (the
`pysqlite3-binary` test dependency, a SQLite that can).
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from erasure.subject import Subject
from erasure.targets import Target

DIMS = 64
NAMESPACE = ["users", "{subject_id}"]
THREAD_KEY = "user_id"

SUBJECT = Subject(id="usr-7f3a9c", email="dana.ortiz@example.org", name="Dana Ortiz", phone="+351 912 345 678")
BYSTANDERS = (
    Subject(id="usr-11b2e0", email="li.wei@example.net", name="Li Wei"),
    Subject(id="usr-52c8d4", email="amara.okafor@example.com", name="Amara Okafor"),
)

_TOPICS = {
    SUBJECT.id: [
        "My parcel to Lisbon never arrived and the courier left a note about the orange gate behind the bakery",
        "Please move my pharmacy appointment to Thursday afternoon, the allergy list now includes penicillin",
        "I am planning a hiking holiday in the Serra da Estrela with my sister Ines near Manteigas",
        "The quarterly invoice from the Alvalade dental clinic was charged twice to my teal credit card",
        "Remind me that the saxophone lesson with maestro Quaresma moved to the Tuesday slot at seven",
    ],
    BYSTANDERS[0].id: [
        "The router in the study keeps dropping the connection every evening around nine o'clock",
        "Thanks for the refund on the late delivery of the winter boots with the fleece lining",
        "Our allotment needs a compost bin that the fox cannot open, preferably made of recycled slats",
        "Book the ferry to the island for the second weekend of May with a cabin for two adults",
        "The dishwasher shows error code E24 after every cycle, the filter was cleaned yesterday",
    ],
    BYSTANDERS[1].id: [
        "I would like a vegetable recipe for twelve guests with roasted squash and green lentils",
        "My pension statement lists two employers from the nineties that I never worked for",
        "Our chess club needs a printer for tournament pairings that handles heavy card stock",
        "Please renew the library loan of the atlas of medieval trade routes for another month",
        "The violin bow needs rehairing before the conservatory recital on the last Friday of June",
    ],
}
SHARED_DOCS = [
    "Refund policy: parcels lost in transit are refunded after the courier's investigation closes",
    "Opening hours of the help desk are nine to five on working days and ten to two on Saturdays",
    "To reset a password, follow the link in the email and choose a phrase of at least four words",
    "Appointments can be moved up to twenty-four hours before they start without a fee",
]
MENTION_TEXT = "My neighbour Dana Ortiz recommended your service; her email is dana.ortiz@example.org"


class HashEmbeddings:
    """A deterministic local embedding: each lower-cased word seeds a Gaussian vector; the text's vector
    is their normalised sum. Dense (every float non-zero), so vectors are distinctive byte strings."""

    def __init__(self, dims: int = DIMS) -> None:
        self.dims = dims
        self._cache: dict[str, np.ndarray] = {}

    def _word(self, word: str) -> np.ndarray:
        vec = self._cache.get(word)
        if vec is None:
            seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
            vec = np.random.default_rng(seed).standard_normal(self.dims).astype(np.float64)
            self._cache[word] = vec
        return vec

    def embed(self, text: str) -> list[float]:
        words = re.findall(r"\w+", text.lower()) or [""]
        total = np.sum([self._word(w) for w in words], axis=0)
        norm = float(np.linalg.norm(total)) or 1.0
        return [float(x) for x in (total / norm)]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed(text)

    async def aembed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return self.embed(text)


def sqlite_module() -> ModuleType:
    """A DB-API sqlite module that can load extensions: the standard library's if it can, else pysqlite3."""
    conn = sqlite3.connect(":memory:")
    try:
        if hasattr(conn, "enable_load_extension"):
            return sqlite3
    finally:
        conn.close()
    import pysqlite3.dbapi2 as pysqlite3

    return pysqlite3  # type: ignore[no-any-return]


def connect_sqlite(path: Path, *, timeout: float = 30.0, extensions: bool = True) -> Any:
    """The agent's own connection, as LangGraph's `from_conn_string` opens it (autocommit, any thread).
    `extensions`: a module that can load sqlite-vec (the store's vector index); the checkpointer needs
    the standard library's (`SqliteSaver.setup` catches `sqlite3.OperationalError` by that class)."""
    mod = sqlite_module() if extensions else sqlite3
    return mod.connect(str(path), check_same_thread=False, isolation_level=None, timeout=timeout)


def index_config(embeddings: HashEmbeddings | None = None) -> dict[str, Any]:
    """The store's vector index: our local embedding function, the `text` field of every item.
    (SqliteStore reads `text_fields`; the documented `fields` is ignored by it, which embeds the
    whole JSON value instead.)"""
    return {"dims": DIMS, "embed": (embeddings or HashEmbeddings()).embed_documents, "text_fields": ["text"]}


@contextmanager
def open_store(path: Path, *, wal: bool = False, timeout: float = 30.0, fast: bool = False) -> Iterator[Any]:
    """The framework's `SqliteStore` on `path`, with the vector index (set up on first use). `wal` puts
    a new database in WAL mode (SqliteStore leaves SQLite's default, a rollback journal); `fast` skips
    fsync while a test builds its memory."""
    from langgraph.store.sqlite import SqliteStore

    conn = connect_sqlite(path, timeout=timeout)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    if fast:
        conn.execute("PRAGMA synchronous=OFF")
    try:
        store = SqliteStore(conn, index=index_config())  # type: ignore[arg-type]
        store.setup()
        yield store
    finally:
        conn.close()


@contextmanager
def open_saver(path: Path, *, timeout: float = 30.0, fast: bool = False) -> Iterator[Any]:
    """The framework's `SqliteSaver` on `path` (it puts the database in WAL mode itself)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = connect_sqlite(path, timeout=timeout, extensions=False)
    if fast:
        conn.execute("PRAGMA synchronous=OFF")
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        yield saver
    finally:
        conn.close()


def chat_graph(saver: Any) -> Any:
    """A compiled graph with a message list: the assistant echoes the last user message back."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    def assistant(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        return {"messages": [AIMessage(content=f"Noted: {last.content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("assistant", assistant)
    builder.add_edge(START, "assistant")
    return builder.compile(checkpointer=saver)


def thread_config(thread_id: str, user_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, THREAD_KEY: user_id}}


@dataclass
class Memory:
    """What was built: paths, the target, and what each person has (for reading bystanders back)."""

    root: Path
    store_path: Path
    checkpoints_path: Path
    items: dict[str, list[tuple[tuple[str, ...], str, dict[str, Any]]]] = field(default_factory=dict)
    """person id ('' for shared documents) -> (namespace, key, value) of every live item."""
    threads: dict[str, list[str]] = field(default_factory=dict)
    """person id -> thread ids."""
    deleted_by_framework: list[tuple[tuple[str, ...], str]] = field(default_factory=list)

    @property
    def target(self) -> Target:
        return make_target(self.root, self.store_path.name, self.checkpoints_path.name)

    def dump(self, path: Path) -> None:
        """Write what was built as JSON (keep it outside `root`: it names the subject)."""
        path.write_text(
            json.dumps(
                {
                    "root": str(self.root),
                    "store": self.store_path.name,
                    "checkpoints": self.checkpoints_path.name,
                    "items": {p: [[list(ns), k, v] for ns, k, v in items] for p, items in self.items.items()},
                    "threads": self.threads,
                }
            )
        )

    @classmethod
    def load(cls, path: Path) -> Memory:
        doc = json.loads(path.read_text())
        root = Path(doc["root"])
        return cls(
            root=root,
            store_path=root / doc["store"],
            checkpoints_path=root / doc["checkpoints"],
            items={p: [(tuple(ns), k, v) for ns, k, v in items] for p, items in doc["items"].items()},
            threads=doc["threads"],
        )


def make_target(
    root: Path, store: str = "store.sqlite", checkpoints: str = "checkpoints.sqlite", **extra: Any
) -> Target:
    return Target.model_validate(
        {
            "name": "support-agent",
            "kind": "langgraph-sqlite",
            "base_dir": root,
            "store": store,
            "checkpoints": checkpoints,
            "namespace": NAMESPACE,
            "thread_key": THREAD_KEY,
            "episodic": ["episodes"],
            **extra,
        }
    )


def person_items(person: Subject, topics: list[str], copies: int) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    """A person's items: memories (many), a profile holding their identifiers, episodes."""
    out: list[tuple[tuple[str, ...], str, dict[str, Any]]] = []
    for n in range(copies):
        for i, topic in enumerate(topics):
            out.append(
                (
                    ("users", person.id, "memories"),
                    f"mem-{n:03d}-{i}",
                    {"text": f"{topic} (note {n})", "kind": "fact", "source": "chat"},
                )
            )
    out.append(
        (
            ("users", person.id, "profile"),
            "contact",
            {
                "text": f"{person.name} can be reached at {person.email}",
                "name": person.name,
                "email": person.email,
                "phone": person.phone,
            },
        )
    )
    for i, topic in enumerate(topics[:3]):
        out.append(
            (
                ("users", person.id, "episodes"),
                f"ep-{i}",
                {"text": f"Conversation with {person.name}: {topic}", "outcome": "resolved"},
            )
        )
    return out


def build_memory(
    root: Path,
    *,
    copies: int = 12,
    turns: int = 4,
    threads_per_person: int = 3,
    store_wal: bool = False,
    analyze: bool = True,
    mentions: bool = True,
    case_variants: bool = True,
) -> Memory:
    """Build the memory with the framework (see the module docstring). `copies` scales the items;
    `mentions` adds a bystander's item and a bystander's thread that name the subject; with
    `case_variants` the subject also has one item and one thread under their id in capitals (an app
    that did not normalise it)."""
    root.mkdir(parents=True, exist_ok=True)
    mem = Memory(root=root, store_path=root / "store.sqlite", checkpoints_path=root / "checkpoints.sqlite")
    people = (SUBJECT, *BYSTANDERS)
    with open_store(mem.store_path, wal=store_wal, fast=True) as store:
        for person in people:
            items = person_items(person, _TOPICS[person.id], copies)
            if person is SUBJECT and case_variants:
                items.append(
                    (
                        ("users", person.id.upper(), "memories"),
                        "imported",
                        {"text": f"Imported from the old CRM: {_TOPICS[person.id][3]}"},
                    )
                )
            for ns, key, value in items:
                store.put(ns, key, value)
            mem.items[person.id] = items
        # An update: the first memory of everyone is rewritten (the old version goes to freed space).
        for person in people:
            ns, key, value = mem.items[person.id][0]
            new = {**value, "text": value["text"] + " (updated)"}
            store.put(ns, key, new)
            mem.items[person.id][0] = (ns, key, new)
        shared: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
            (("docs", "policies"), f"doc-{i}", {"text": t}) for i, t in enumerate(SHARED_DOCS)
        ]
        for ns, key, value in shared:
            store.put(ns, key, value)
        mem.items[""] = shared
        if mentions:  # a bystander's memory that names the subject: a mention, reported, not erased
            mention = (("users", BYSTANDERS[0].id, "memories"), "referral", {"text": MENTION_TEXT, "kind": "fact"})
            store.put(*mention)
            mem.items[BYSTANDERS[0].id].append(mention)
        # The team already deleted one bystander item with the framework's own delete (its vectors stay).
        ns, key, _ = mem.items[BYSTANDERS[1].id].pop(1)
        store.delete(ns, key)
        mem.deleted_by_framework.append((ns, key))
        if analyze:
            store.conn.execute("PRAGMA optimize=0x10002")  # what a long-running agent's close does (ANALYZE)
    with open_saver(mem.checkpoints_path, fast=True) as saver:
        graph = chat_graph(saver)
        for person in people:
            mem.threads[person.id] = []
            for t in range(threads_per_person):
                tid = f"thread-{person.id}-{t}"
                mem.threads[person.id].append(tid)
                last = t == threads_per_person - 1
                user = person.id.upper() if person is SUBJECT and case_variants and last else person.id
                for turn in range(turns):
                    topic = _TOPICS[person.id][(t + turn) % len(_TOPICS[person.id])]
                    text = f"Hi, this is {person.name} ({person.email}). {topic}, turn {turn}."
                    graph.invoke({"messages": [("user", text)]}, thread_config(tid, user))
        if mentions:  # a bystander's thread that names the subject: a mention
            tid = f"thread-{BYSTANDERS[1].id}-mention"
            graph.invoke({"messages": [("user", MENTION_TEXT)]}, thread_config(tid, BYSTANDERS[1].id))
            mem.threads[BYSTANDERS[1].id].append(tid)
    return mem


def framework_delete(mem: Memory, person: Subject, *, store: Any = None, saver: Any = None) -> None:
    """What a team does with the framework alone: `store.delete` for every item under the person's
    namespace (found with `store.search`) and `delete_thread` for every thread whose metadata names
    them. Through the agent's own `store` / `saver` when given (its connections stay open), else
    through new ones closed at the end."""
    if store is None:
        with open_store(mem.store_path) as own:
            return framework_delete(mem, person, store=own, saver=saver)
    if saver is None:
        with open_saver(mem.checkpoints_path) as own:
            return framework_delete(mem, person, store=store, saver=own)
    for item in store.search(("users", person.id), limit=1_000_000):
        store.delete(item.namespace, item.key)
    threads = {c.config["configurable"]["thread_id"] for c in saver.list(None, filter={THREAD_KEY: person.id})}
    for tid in threads:
        saver.delete_thread(tid)
    return None


def subject_strings(person: Subject) -> list[str]:
    """Every identifier of the person, and distinctive content of theirs (for the test's own byte walk)."""
    out = [s for s in (person.id, person.email, person.name, person.phone) if s]
    out += _TOPICS[person.id]
    return out


def check_bystanders(mem: Memory, *, store: Any = None, saver: Any = None) -> None:
    """Every bystander item, search and thread answers through LangGraph; nothing of the subject does."""
    if store is None:
        with open_store(mem.store_path) as own:
            return check_bystanders(mem, store=own, saver=saver)
    if saver is None:
        with open_saver(mem.checkpoints_path) as own:
            return check_bystanders(mem, store=store, saver=own)
    for person, items in mem.items.items():
        if person == SUBJECT.id:
            continue
        for ns, key, value in items:
            got = store.get(ns, key)
            assert got is not None and got.value == value, (ns, key)
    for b in BYSTANDERS:
        hits = store.search(("users", b.id), query=_TOPICS[b.id][2], limit=3)
        assert hits and _TOPICS[b.id][2] in hits[0].value["text"]
    docs = store.search(("docs",), query="parcels lost in transit are refunded", limit=1)
    assert docs and docs[0].key == "doc-0"
    anywhere = store.search((), query=_TOPICS[SUBJECT.id][0], limit=50)
    assert anywhere and all(SUBJECT.id.lower() not in ".".join(h.namespace).lower() for h in anywhere)
    assert all(ns[1].lower() != SUBJECT.id.lower() for ns in store.list_namespaces(prefix=("users",)))
    graph = chat_graph(saver)
    for b in BYSTANDERS:
        for tid in mem.threads[b.id]:
            messages = graph.get_state(thread_config(tid, b.id)).values["messages"]
            assert messages and messages[-1].content.startswith("Noted: ")
    for tid in mem.threads[SUBJECT.id]:
        assert graph.get_state(thread_config(tid, SUBJECT.id)).values == {}
    return None
