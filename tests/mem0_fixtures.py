"""A real mem0 memory for the mem0 target tests: built with mem0 itself (mem0ai 2.2, local Qdrant).

- `Memory` with the Qdrant provider in path mode (on disk: `qdrant/collection/<name>/storage.sqlite`
  holds each point pickled, float64 vectors) and its SQLite history (`mem0/history.db`: `history`
  and `messages`);
- three people (a subject, two bystanders), each with memories in several session scopes: user only,
  user + agent, user + agent + run (mem0's threads); most through mem0's LLM extraction path
  (`infer=True`, which also keeps the raw turns in `messages` and links entities in
  `mem0_entities`), some raw (`infer=False`, with an actor name); updates (UPDATE history rows keep
  the old text) and, for a bystander, deletes (their history stays: it must survive our erasure);
- with `mentions=True`, bystander items that name the subject (a memory, its entity, a raw turn).

No network and no model: mem0 is given a local embedder (a hashed random projection, dense, 64
floats), a scripted LLM that returns the facts a message asks to remember (the shape mem0's extraction
prompt asks for), and a local entity extractor (mem0 uses spaCy, not installed here; it returns [] then
and no entities would be written). mem0's telemetry is off and its home is a temp folder.

Run as a script, this module is "the agent" of the concurrency test: it opens the memory, holds it,
writes, and releases it on a schedule (see `agent_main`).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("MEM0_DIR", str(Path(tempfile.gettempdir()) / "erasure-tests-mem0-home"))

import numpy as np

from erasure.subject import Subject
from erasure.targets import Target

DIMS = 64
COLLECTION = "mem0"
HISTORY_DB = "mem0/history.db"
QDRANT_PATH = "qdrant"
AGENT = "support-bot"

SUBJECT = Subject(id="m0-usr-4c1e7a", email="noor.haddad@example.org", name="Noor Haddad", phone="+44 20 7946 0321")
BYSTANDERS = (
    Subject(id="m0-usr-9b20d3", email="tomas.lindqvist@example.net", name="Tomas Lindqvist"),
    Subject(id="m0-usr-e57a18", email="grace.mwangi@example.com", name="Grace Mwangi"),
)
PEOPLE = (SUBJECT, *BYSTANDERS)

FACTS = {
    SUBJECT.id: [
        "Noor Haddad is allergic to hazelnuts and keeps an adrenaline pen in the blue satchel",
        "Noor Haddad drives a dented silver hatchback bought from the garage on Quarry Lane",
        "Her contact email is noor.haddad@example.org and her phone is +44 20 7946 0321",
        "She is renovating a narrowboat called Periwinkle moored near the Tardebigge locks",
        "She wants invoices for the ceramic kiln rental sent at the end of every quarter",
        "Her daughter Yasmin plays the oboe in the Droitwich youth orchestra on Saturdays",
        "She prefers callbacks after six because of night shifts at the glassblowing studio",
        "Her pension transfer from the Marchmont cooperative is stuck with reference VX-4471",
        "She asked to cancel the subscription for the heritage seed catalogue next spring",
        "Noor Haddad booked the pottery retreat in Cornwall for the second week of October",
    ],
    BYSTANDERS[0].id: [
        "Tomas Lindqvist restores vintage typewriters and needs ribbons for an Olympia SM3",
        "He is learning to sail dinghies on the reservoir with his brother Anders",
        "His router in the attic drops the connection every evening around nine",
        "He wants the delivery of the walnut bookcase moved to the Friday slot",
        "Tomas Lindqvist is vegetarian and dislikes coriander in any curry",
        "He asked for a refund on the late winter boots with the fleece lining",
        "His cat Sylvester needs the renal diet food delivered every fortnight",
        "He keeps bees on an allotment near the old tram depot in Gothenburg",
        "He plans a rail trip across the Alps with a stop in Brig in July",
        "His library card expired and the atlas of medieval trade routes is overdue",
    ],
    BYSTANDERS[1].id: [
        "Grace Mwangi runs a bakery in Nakuru and wants a larger proving cabinet",
        "She coaches an under twelve football team every Wednesday afternoon",
        "Grace Mwangi asked to switch her electricity plan to the solar tariff",
        "Her violin bow needs rehairing before the conservatory recital in June",
        "She needs a vegetable recipe for twelve guests with roasted squash and lentils",
        "Her pension statement lists two employers from the nineties she never had",
        "She is allergic to penicillin and wants that noted on every prescription",
        "Her chess club needs a printer for tournament pairings on heavy card stock",
        "She wants the parcel of fabric samples redirected to the Eldoret office",
        "Grace Mwangi is training for the Lewa half marathon next summer",
    ],
}
UPDATED = {
    SUBJECT.id: "She is renovating a narrowboat called Periwinkle now moored at the Stoke Prior wharf",
    BYSTANDERS[0].id: "He wants the delivery of the walnut bookcase moved to the Monday morning slot",
}
MENTION = "Tomas Lindqvist says his colleague Noor Haddad recommended the typewriter repair shop"
MENTION_TURN = "My friend Noor Haddad (noor.haddad@example.org) told me about your service"
MENTION_DELETED = "Grace Mwangi met Noor Haddad at the pottery fair in Worcester"
RAW_TURNS = {
    SUBJECT.id: "I am Noor Haddad and I need the kiln invoice for the Periwinkle workshop re-sent",
    BYSTANDERS[0].id: "Please note that the Olympia typewriter ribbons should be black and red",
    BYSTANDERS[1].id: "Please note the proving cabinet must fit through a door of eighty centimetres",
}


# --- local stand-ins for the model-backed parts of mem0 --------------------------------------------


class HashEmbedder:
    """A deterministic local embedding: each lower-cased word seeds a Gaussian vector; the text's vector
    is their normalised sum (dense: every float non-zero)."""

    def __init__(self, dims: int = DIMS) -> None:
        self.dims = dims

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        v = np.zeros(self.dims)
        for word in re.findall(r"\w+", text.lower()):
            seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
            v += np.random.default_rng(seed).standard_normal(self.dims)
        norm = float(np.linalg.norm(v)) or 1.0
        return [float(x) for x in v / norm]

    def embed_batch(self, texts: list[str], memory_action: str | None = None) -> list[list[float]]:
        return [self.embed(t, memory_action) for t in texts]


_NEW_MESSAGES = re.compile(r"## New Messages\n(.*?)\n\n## ", re.S)
_REMEMBER = re.compile(r"remember: (.+?)\s*$", re.M)


class ScriptedLLM:
    """mem0's extraction LLM, scripted: each new message's `remember: <fact>` becomes one memory,
    returned as the JSON object mem0's additive extraction prompt asks for."""

    def generate_response(self, messages: list[dict[str, str]], response_format: Any = None, **kwargs: Any) -> str:
        section = _NEW_MESSAGES.search(messages[-1]["content"])
        facts = _REMEMBER.findall(section.group(1)) if section else []
        return json.dumps({"memory": [{"text": f} for f in dict.fromkeys(facts)]})


_PROPER = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")


def extract_entities(text: str) -> list[tuple[str, str]]:
    """Runs of capitalised words (what mem0's spaCy extractor calls PROPER entities)."""
    return [("PROPER", m.group(0)) for m in _PROPER.finditer(text)]


def extract_entities_batch(texts: list[str], batch_size: int = 32) -> list[list[tuple[str, str]]]:
    return [extract_entities(t) for t in texts]


# --- the memory ------------------------------------------------------------------------------------


def mem0_config(root: Path, *, collection: str = COLLECTION) -> dict[str, Any]:
    """mem0's own configuration of the memory under `root` (an OpenAI provider named only so that
    mem0 builds; its embedder and LLM are replaced by local ones and never called)."""
    return {
        "vector_store": {
            "provider": "qdrant",
            "config": {"path": str(root / QDRANT_PATH), "collection_name": collection, "embedding_model_dims": DIMS},
        },
        "embedder": {"provider": "openai", "config": {"api_key": "offline-never-used"}},
        "llm": {"provider": "openai", "config": {"api_key": "offline-never-used"}},
        "history_db_path": str(root / HISTORY_DB),
    }


def open_memory(root: Path, *, collection: str = COLLECTION) -> Any:
    """A mem0 `Memory` on the folder (it holds the local Qdrant's lock until `close_memory`)."""
    import mem0.memory.main as mem0_main
    from mem0 import Memory

    mem0_main.extract_entities = extract_entities
    mem0_main.extract_entities_batch = extract_entities_batch
    (root / HISTORY_DB).parent.mkdir(parents=True, exist_ok=True)
    m = Memory.from_config(mem0_config(root, collection=collection))
    m.embedding_model = HashEmbedder()
    m.llm = ScriptedLLM()
    return m


def close_memory(m: Any) -> None:
    """Release the local Qdrant folder and the history connection."""
    m.vector_store.client.close()
    m.db.close()


@dataclass
class Built:
    """What was written, for the tests' own checks (never the probe's or the eraser's input)."""

    root: Path
    memory_ids: dict[str, list[str]] = field(default_factory=dict)
    deleted_ids: list[str] = field(default_factory=list)
    mentions: bool = False

    def target(self, **keys: Any) -> Target:
        return mem0_target(self.root, **keys)


def mem0_target(root: Path, **keys: Any) -> Target:
    data = {
        "name": "assistant-memory",
        "kind": "mem0",
        "base_dir": root,
        "history_db": HISTORY_DB,
        "qdrant_path": QDRANT_PATH,
        "collection": COLLECTION,
        "lock_timeout": 30,
        **keys,
    }
    return Target.model_validate(data)


def _scope(i: int, person: Subject) -> dict[str, str]:
    """Session scopes in turn: user only; user + agent; user + agent + run (a thread)."""
    kinds: tuple[dict[str, str], ...] = (
        {},
        {"agent_id": AGENT},
        {"agent_id": AGENT, "run_id": f"thread-{person.id[-4:]}-{i % 2}"},
    )
    return {"user_id": person.id, **kinds[i % 3]}


def build_memory(root: Path, *, mentions: bool = False) -> Built:
    """Write the three people's memories through mem0 (closing it afterwards)."""
    built = Built(root=root, mentions=mentions)
    m = open_memory(root)
    try:
        for person in PEOPLE:
            ids: list[str] = []
            for i, fact in enumerate(FACTS[person.id]):
                turn = f"Hello, this is {person.name}. Please remember: {fact}"
                res = m.add([{"role": "user", "content": turn}], **_scope(i, person))
                ids += [r["id"] for r in res["results"]]
            raw = m.add(
                [{"role": "user", "content": RAW_TURNS[person.id], "name": person.name}], user_id=person.id, infer=False
            )
            ids += [r["id"] for r in raw["results"]]
            built.memory_ids[person.id] = ids
        for pid, text in UPDATED.items():
            m.update(built.memory_ids[pid][3], text=text)
        # A bystander deletes one of their own memories: its history rows stay and must survive us.
        gone = built.memory_ids[BYSTANDERS[1].id].pop(5)
        m.delete(gone)
        built.deleted_ids.append(gone)
        if mentions:
            res = m.add([{"role": "user", "content": f"Please remember: {MENTION}"}], user_id=BYSTANDERS[0].id)
            built.memory_ids[BYSTANDERS[0].id] += [r["id"] for r in res["results"]]
            res = m.add(
                [{"role": "user", "content": MENTION_TURN}], user_id=BYSTANDERS[1].id, agent_id=AGENT, infer=False
            )
            built.memory_ids[BYSTANDERS[1].id] += [r["id"] for r in res["results"]]
            # A bystander's memory that named the subject, deleted by the bystander: an orphan naming them.
            res = m.add([{"role": "user", "content": f"Please remember: {MENTION_DELETED}"}], user_id=BYSTANDERS[1].id)
            for r in res["results"]:
                m.delete(r["id"])
                built.deleted_ids.append(r["id"])
    finally:
        close_memory(m)
    return built


_TEMPLATES: dict[bool, Path] = {}


def built_copy(dest: Path, *, mentions: bool = False) -> Built:
    """A copy of a memory built once per test session (building takes a few seconds)."""
    if mentions not in _TEMPLATES:
        base = Path(tempfile.mkdtemp(prefix="erasure-mem0-template-"))
        atexit.register(shutil.rmtree, base, True)
        _TEMPLATES[mentions] = base
        _BUILT[mentions] = build_memory(base, mentions=mentions)
    shutil.copytree(_TEMPLATES[mentions], dest, ignore=shutil.ignore_patterns(".lock"))
    src = _BUILT[mentions]
    return Built(
        root=dest,
        memory_ids={k: list(v) for k, v in src.memory_ids.items()},
        deleted_ids=list(src.deleted_ids),
        mentions=mentions,
    )


_BUILT: dict[bool, Built] = {}


def framework_delete(root: Path, subject_id: str) -> None:
    """The framework's own erasure, as a team would run it: a fresh `Memory`, `delete_all(user_id=...)`."""
    m = open_memory(root)
    try:
        m.delete_all(user_id=subject_id)
    finally:
        close_memory(m)


def raw_rows(root: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the history database, read with the standard library (for the tests' own checks)."""
    conn = sqlite3.connect(f"file:{root / HISTORY_DB}?mode=ro", uri=True)
    try:
        return {t: conn.execute(f"SELECT * FROM {t}").fetchall() for t in ("history", "messages")}
    finally:
        conn.close()


# --- the agent of the concurrency test -------------------------------------------------------------


AGENT_FACT = "Grace Mwangi wants the proving cabinet delivered before the Easter rush"


def agent_main(root: Path, hold_qdrant: float, hold_history: float) -> None:
    """Open the memory, hold it `hold_qdrant` s, write a bystander memory, release the Qdrant folder
    while holding a write transaction on the history database for `hold_history` s, then close.
    Prints one line per phase with the time, for the test to order events."""
    m = open_memory(root)
    print("open", time.time(), flush=True)
    time.sleep(hold_qdrant)
    res = m.add(
        [{"role": "user", "content": AGENT_FACT, "name": BYSTANDERS[1].name}], user_id=BYSTANDERS[1].id, infer=False
    )
    print("wrote", res["results"][0]["id"], flush=True)
    with m.db._lock:
        m.db.connection.execute("BEGIN IMMEDIATE")
        m.vector_store.client.close()
        print("qdrant-released", time.time(), flush=True)
        time.sleep(hold_history)
        m.db.connection.execute("COMMIT")
    print("history-released", time.time(), flush=True)
    m.db.close()


if __name__ == "__main__":
    agent_main(Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]))
