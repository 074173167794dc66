"""Target kind `mem0`: a real mem0 memory (local Qdrant + SQLite history) erased by `ERASER.erase`,
checked byte by byte by the test's own walk of every file, read back through mem0, and verified by the
independent probe (`probes.targets.run`). No Prefect here: the flow's use of targets is tested apart."""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from erasure.errors import ConfigError, StoreError
from erasure.subject import Subject
from erasure.targets import Target
from erasure.tiers import Tier
from probes.model import ProbeResult
from probes.targets import run
from probes.targets.mem0 import PROBE
from tasks.targets.mem0 import ERASER
from tests.mem0_fixtures import (
    AGENT,
    AGENT_FACT,
    BYSTANDERS,
    FACTS,
    MENTION,
    MENTION_TURN,
    RAW_TURNS,
    SUBJECT,
    UPDATED,
    Built,
    HashEmbedder,
    built_copy,
    close_memory,
    extract_entities,
    framework_delete,
    mem0_target,
    open_memory,
    raw_rows,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

REPO = Path(__file__).resolve().parents[2]

IDENTIFIERS = [SUBJECT.id, "noor.haddad@example.org", "Noor Haddad", "+44 20 7946 0321", "442079460321", "02079460321"]
CONTENT = [
    "Periwinkle",
    "Tardebigge",
    "hazelnuts",
    "adrenaline pen",
    "Quarry Lane",
    "narrowboat",
    "ceramic kiln",
    "Yasmin",
    "glassblowing",
    "Marchmont",
    "VX-4471",
    "heritage seed",
    "Stoke Prior",
    "pottery retreat",
]


def every_file(root: Path) -> dict[Path, bytes]:
    """Every file under the target's root, whatever wrote it (the test's own walk, not the probe's)."""
    out = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            out[path] = path.read_bytes()
    return out


def found_strings(root: Path, strings: list[str]) -> dict[str, list[str]]:
    """Each string found (ASCII case-insensitively) -> the files holding it."""
    files = {p: data.lower() for p, data in every_file(root).items()}
    hits: dict[str, list[str]] = {}
    for s in strings:
        where = [str(p.relative_to(root)) for p, data in files.items() if s.lower().encode() in data]
        if where:
            hits[s] = where
    return hits


def subject_texts() -> list[str]:
    """Every text mem0 embedded for the subject: memories (before and after the update), the raw turn,
    the entity texts extracted from them."""
    texts = [*FACTS[SUBJECT.id], UPDATED[SUBJECT.id], RAW_TURNS[SUBJECT.id]]
    return texts + sorted({e for t in texts for _, e in extract_entities(t)})


def encodings(vector: list[float]) -> dict[str, bytes]:
    """A vector as local Qdrant pickles it (BINFLOAT: `G` + big-endian float64), and for good measure as
    raw float64 and float32 (little-endian), 8 floats of it (a run that long is no accident)."""
    head = vector[:8]
    return {
        "pickled-float64": b"".join(b"G" + struct.pack(">d", x) for x in head),
        "float64": struct.pack("<8d", *head),
        "float32": struct.pack("<8f", *head),
    }


def found_vectors(root: Path, texts: list[str]) -> list[tuple[str, str]]:
    """(encoding, file) of every subject vector found in any file."""
    files = every_file(root)
    embed = HashEmbedder()
    hits = []
    for text in texts:
        for kind, needle in encodings(embed.embed(text)).items():
            hits += [(kind, str(p.relative_to(root))) for p, data in files.items() if needle in data]
    return hits


def by_method(results: list[ProbeResult]) -> dict[str, ProbeResult]:
    return {r.method: r for r in results}


def assert_all_clear(results: list[ProbeResult]) -> None:
    failing = [(r.tier, r.method, r.residue, r.bystanders_before, r.bystanders_after) for r in results if r.failing()]
    assert not failing, failing
    assert any(r.method == "scan:vector" for r in results), "the probe had no vector needles"
    assert any(r.method == "scan:content" for r in results), "the probe had no content needles"


def read_back_bystanders(built: Built, *, extra: dict[str, list[str]] | None = None) -> None:
    """Every bystander's memories, their history, their raw turns and a query, through mem0 itself;
    the subject has nothing left; and the memory still takes writes."""
    m = open_memory(built.root)
    try:
        for person in BYSTANDERS:
            want = set(built.memory_ids[person.id]) | set((extra or {}).get(person.id, []))
            got = m.get_all(filters={"user_id": person.id}, top_k=1000)["results"]
            assert {r["id"] for r in got} == want
            for mid in want:
                assert [h["event"] for h in m.history(mid)][:1] == ["ADD"]
            first = FACTS[person.id][0]
            hits = m.search(first, filters={"user_id": person.id}, top_k=1)["results"]
            assert hits and hits[0]["memory"] == first
            assert m.db.get_last_messages(f"user_id={person.id}", limit=10)
        # A bystander's own delete keeps its history (ADD, DELETE) through our erasure.
        assert [h["event"] for h in m.history(built.deleted_ids[0])] == ["ADD", "DELETE"]
        assert m.get_all(filters={"user_id": SUBJECT.id}, top_k=1000)["results"] == []
        added = m.add("Tomas Lindqvist wants a spare platen knob", user_id=BYSTANDERS[0].id, infer=False)
        assert m.get(added["results"][0]["id"])["memory"] == "Tomas Lindqvist wants a spare platen knob"
    finally:
        close_memory(m)


@pytest.fixture
def memory(tmp_path: Path) -> Built:
    return built_copy(tmp_path / "agent")


@pytest.fixture
def memory_with_mentions(tmp_path: Path) -> Built:
    return built_copy(tmp_path / "agent", mentions=True)


def test_erase_leaves_no_byte_of_the_subject_and_every_bystander_reads_back(memory: Built) -> None:
    target = memory.target()
    assert found_strings(memory.root, IDENTIFIERS + CONTENT), "the walk must see the subject before"
    assert found_vectors(memory.root, FACTS[SUBJECT.id]), "the walk must see the subject's vectors before"
    fp = run.take(target, SUBJECT)
    counts = ERASER.count(target, SUBJECT)
    assert all(counts[t] > 0 for t in ERASER.tiers), counts
    assert ERASER.mentions(target, SUBJECT) == 0 and fp.mentions == 0

    out = ERASER.erase(target, SUBJECT)

    assert {t: o.before for t, o in out.items()} == counts
    assert all(o.after == 0 for o in out.values()), out
    assert out[Tier.semantic].detail["memories"] == len(memory.memory_ids[SUBJECT.id])
    assert out[Tier.semantic].detail["entities"] > 0
    assert found_strings(memory.root, IDENTIFIERS + CONTENT) == {}
    assert found_vectors(memory.root, subject_texts()) == []
    assert_all_clear(run.probe(target, SUBJECT, fp))
    read_back_bystanders(memory)


def test_framework_delete_all_leaves_the_subject_on_disk_and_the_probe_catches_it(memory: Built) -> None:
    target = memory.target()
    fp = run.take(target, SUBJECT)

    framework_delete(memory.root, SUBJECT.id)

    # What mem0's own delete left, seen by the test's walk and rows...
    left = found_strings(memory.root, IDENTIFIERS + CONTENT)
    assert "mem0/history.db" in left["Periwinkle"] and SUBJECT.id in left
    rows = raw_rows(memory.root)
    mine = set(memory.memory_ids[SUBJECT.id])
    events = [r[4] for r in rows["history"] if r[1] in mine]
    assert events.count("DELETE") == len(mine) and events.count("ADD") == len(mine)  # copied again
    assert sum(1 for r in rows["messages"] if r[1].endswith(f"user_id={SUBJECT.id}")) == 10
    assert any(path.endswith("mem0_entities/storage.sqlite") for path in left["Noor Haddad"])
    # ... and by the probe.
    results = by_method(run.probe(target, SUBJECT, fp))
    assert results["history:rows-of-subject-memories"].residue == 2 * len(mine) + 1  # + the UPDATE row
    assert results["messages:subject-scopes"].residue == 10
    assert results["qdrant:mem0_entities:points-of-subject"].residue > 0
    assert results["qdrant:mem0:points-of-subject"].residue == 0
    assert results["qdrant:subject-vectors"].residue > 0
    assert results["scan:content"].residue > 0 and results["scan:vector"].residue > 0
    assert not any(r.lost_bystanders() for r in results.values())


def test_after_a_framework_delete_all_our_erasure_finishes_what_it_can_attribute(memory: Built) -> None:
    """After mem0's `delete_all` the history rows carry no user id: we find them through the entity records
    it left and the subject's identifiers; the probe, whose fingerprint saw the memory ids, reports the rest."""
    target = memory.target()
    fp = run.take(target, SUBJECT)
    framework_delete(memory.root, SUBJECT.id)

    out = ERASER.erase(target, SUBJECT)

    assert all(o.after == 0 for o in out.values())
    assert out[Tier.working].detail["messages"] == 10 and out[Tier.semantic].detail["entities"] > 0
    results = by_method(run.probe(target, SUBJECT, fp))
    left = results["history:rows-of-subject-memories"].residue
    mine = set(memory.memory_ids[SUBJECT.id])
    unattributable = [r for r in raw_rows(memory.root)["history"] if r[1] in mine]
    assert left == len(unattributable) > 0
    for r in unattributable:  # memories with no entity and no identifier: nothing on disk links them
        assert not extract_entities(r[2] or r[3]) and "Noor" not in (r[2] or r[3])
    assert results["messages:subject-scopes"].residue == 0
    assert results["qdrant:mem0_entities:points-of-subject"].residue == 0
    assert results["qdrant:subject-vectors"].residue == 0 and results["scan:vector"].residue == 0
    assert found_strings(memory.root, IDENTIFIERS) == {}


def test_erase_is_idempotent_and_a_rerun_changes_nothing(memory: Built) -> None:
    target = memory.target()
    fp = run.take(target, SUBJECT)
    ERASER.erase(target, SUBJECT)
    rows = raw_rows(memory.root)
    populations = run.take(target, SUBJECT).bystanders

    again = ERASER.erase(target, SUBJECT)

    assert all(o.before == 0 and o.after == 0 for o in again.values()), again
    assert all(v == 0 for d in (o.detail for o in again.values()) for k, v in d.items() if not k.endswith("_ms"))
    assert ERASER.count(target, SUBJECT) == dict.fromkeys(ERASER.tiers, 0)
    assert sorted(raw_rows(memory.root)["history"]) == sorted(rows["history"])
    assert sorted(raw_rows(memory.root)["messages"]) == sorted(rows["messages"])
    assert run.take(target, SUBJECT).bystanders == populations
    assert_all_clear(run.probe(target, SUBJECT, fp))


def test_mentions_are_counted_and_kept_not_erased(memory_with_mentions: Built) -> None:
    built = memory_with_mentions
    target = built.target()
    fp = run.take(target, SUBJECT)
    n = ERASER.mentions(target, SUBJECT)
    assert n > 0 and fp.mentions > 0

    out = ERASER.erase(target, SUBJECT)

    assert all(o.after == 0 for o in out.values())
    # The bystander's deleted memory that named the subject: an orphan, its owner unknown: erased.
    assert out[Tier.audit_log].detail["orphaned_rows_naming_subject"] == 2
    assert ERASER.mentions(target, SUBJECT) == n  # the orphans were never counted as mentions
    assert found_strings(built.root, [SUBJECT.id, *CONTENT]) == {}
    assert found_vectors(built.root, FACTS[SUBJECT.id]) == []
    results = run.probe(target, SUBJECT, fp)
    assert_all_clear(results)
    methods = by_method(results)
    assert methods["mentions-reported"].bystanders_after == fp.mentions
    # The name and email stay inside the bystanders' items and are explained; the id and phone are not in
    # any of them: had they stayed, they would be residue.
    assert methods["scan:identifier-in-reported-mentions"].bystanders_after > 0
    assert methods["scan:identifier"].residue == 0
    assert fp.mentioned_groups and len(fp.mentioned_groups) < fp.state["needle_stats"]["identifier"]
    m = open_memory(built.root)
    try:
        texts = {r["memory"] for p in BYSTANDERS for r in m.get_all(filters={"user_id": p.id}, top_k=1000)["results"]}
        assert MENTION in texts and MENTION_TURN in texts
        entities = m.entity_store.list(filters={"user_id": BYSTANDERS[0].id}, top_k=1000)[0]
        assert "Noor Haddad" in {e.payload["data"] for e in entities}
    finally:
        close_memory(m)


def test_erase_waits_for_the_agent_holding_the_memory_then_the_agent_keeps_working(memory: Built) -> None:
    """The agent's process holds the local Qdrant folder (its open `Memory`), writes, releases it while
    holding a write transaction on the history database; the erasure waits on both and completes."""
    target = memory.target()
    fp = run.take(target, SUBJECT)
    agent = subprocess.Popen(
        [sys.executable, "-m", "tests.mem0_fixtures", str(memory.root), "2.0", "2.0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert agent.stdout is not None
        assert agent.stdout.readline().split()[0] == "open"
        started = time.time()
        out = ERASER.erase(target, SUBJECT)
        finished = time.time()
        lines = [line.split() for line in agent.stdout.read().splitlines()]
        assert agent.wait(timeout=60) == 0
    finally:
        if agent.poll() is None:
            agent.kill()
    phases = {parts[0]: parts[1] for parts in lines}
    assert finished > float(phases["history-released"]) > float(phases["qdrant-released"]) > started
    assert all(o.after == 0 for o in out.values()) and out[Tier.semantic].before > 0
    assert found_strings(memory.root, IDENTIFIERS + CONTENT) == {}
    assert_all_clear(run.probe(target, SUBJECT, fp))
    read_back_bystanders(memory, extra={BYSTANDERS[1].id: [phases["wrote"]]})
    m = open_memory(memory.root)
    try:
        assert m.get(phases["wrote"])["memory"] == AGENT_FACT
    finally:
        close_memory(m)


def test_erase_gives_up_on_a_memory_never_released_and_changes_nothing(memory: Built) -> None:
    target = memory.target(lock_timeout=1)
    m = open_memory(memory.root)
    try:
        files = every_file(memory.root)
        counts = ERASER.count(target, SUBJECT)  # reading needs no lock: the agent keeps running
        assert counts[Tier.semantic] > 0
        with pytest.raises(StoreError, match="single-process"):
            ERASER.erase(target, SUBJECT)
        assert every_file(memory.root) == files
        assert m.get_all(filters={"user_id": SUBJECT.id}, top_k=1000)["results"]
    finally:
        close_memory(m)


def test_a_second_collection_in_the_folder_is_erased_by_its_own_target(memory: Built) -> None:
    """Two mem0 collections in one local Qdrant folder and one history database: a target each."""
    m = open_memory(memory.root, collection="travel")
    try:
        m.add("Noor Haddad wants a window seat on the sleeper to Inverness", user_id=SUBJECT.id, infer=False)
        m.add("Grace Mwangi wants an aisle seat to Mombasa", user_id=BYSTANDERS[1].id, infer=False)
    finally:
        close_memory(m)
    main, travel = memory.target(), mem0_target(memory.root, name="travel-memory", collection="travel")
    fps = [run.take(main, SUBJECT), run.take(travel, SUBJECT)]
    ERASER.erase(main, SUBJECT)
    # The main target's probe reads every collection on disk: the other one's copy is still residue.
    assert by_method(run.probe(main, SUBJECT, fps[0]))["qdrant:travel:points-of-subject"].residue == 1
    ERASER.erase(travel, SUBJECT)
    for target, fp in zip((main, travel), fps, strict=True):
        assert_all_clear(run.probe(target, SUBJECT, fp))
    assert found_strings(memory.root, [*IDENTIFIERS, "Inverness"]) == {}
    m = open_memory(memory.root, collection="travel")
    try:
        assert [r["memory"] for r in m.get_all(filters={"user_id": BYSTANDERS[1].id})["results"]] == [
            "Grace Mwangi wants an aisle seat to Mombasa"
        ]
    finally:
        close_memory(m)


@pytest.mark.parametrize(
    ("keys", "key"),
    [
        ({"history_db": None}, "history_db"),
        ({"qdrant_path": None}, "qdrant_path"),
        ({"history_db": "nowhere/history.db"}, "history_db"),
        ({"qdrant_path": "mem0"}, "qdrant_path"),
        ({"collection": "absent"}, "collection"),
        ({"collection": "../mem0"}, "collection"),
        ({"lock_timeout": "soon"}, "lock_timeout"),
    ],
)
def test_bad_configuration_names_the_key(memory: Built, keys: dict[str, Any], key: str) -> None:
    data: dict[str, Any] = {
        "name": "assistant-memory",
        "kind": "mem0",
        "base_dir": memory.root,
        "history_db": "mem0/history.db",
        "qdrant_path": "qdrant",
    }
    data.update(keys)
    target = Target.model_validate({k: v for k, v in data.items() if v is not None})
    with pytest.raises(ConfigError, match=repr(key)):
        ERASER.check(target)


def test_files_and_tiers(memory: Built) -> None:
    target = memory.target()
    assert ERASER.files(target) == [memory.root / "mem0/history.db", memory.root / "qdrant"]
    assert PROBE.files(target) == ERASER.files(target)
    assert ERASER.tiers == (Tier.working, Tier.semantic, Tier.vectors, Tier.audit_log)


def test_a_rerun_after_a_crash_between_history_and_points_finishes(memory: Built) -> None:
    """The eraser deletes history and messages first, points last: a crash in between leaves the points,
    which still lead a rerun to everything (here the first transaction's effect is made by hand)."""
    target = memory.target()
    fp = run.take(target, SUBJECT)
    mine = memory.memory_ids[SUBJECT.id]
    conn = sqlite3.connect(memory.root / "mem0/history.db")
    with conn:
        conn.executemany("DELETE FROM history WHERE memory_id = ?", [(m,) for m in mine])
        conn.execute("DELETE FROM messages WHERE session_scope LIKE ?", (f"%user_id={SUBJECT.id}",))
    conn.close()

    out = ERASER.erase(target, SUBJECT)

    assert out[Tier.semantic].before > 0 and all(o.after == 0 for o in out.values())
    assert found_strings(memory.root, IDENTIFIERS + CONTENT) == {}
    assert_all_clear(run.probe(target, SUBJECT, fp))


class _Planted:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_a_stored_row_that_is_not_a_qdrant_point_is_never_run_and_fails_closed(memory: Built, tmp_path: Path) -> None:
    """Both sides read pickles with restricted unpicklers: a planted row runs nothing; the probe counts it
    as residue (whose it is cannot be known), the eraser refuses to touch that collection."""
    target = memory.target()
    marker = tmp_path / "executed"
    fp = run.take(target, SUBJECT)
    conn = sqlite3.connect(memory.root / "qdrant/collection/mem0/storage.sqlite")
    with conn:
        conn.execute("INSERT INTO points VALUES (?, ?)", ("planted", pickle.dumps(_Planted(marker))))
    conn.close()

    results = by_method(run.probe(target, SUBJECT, fp))
    assert results["qdrant:unreadable-points"].residue == 1
    with pytest.raises(StoreError, match="could not be read"):
        ERASER.erase(target, SUBJECT)
    assert not marker.exists()


def test_erase_needs_neither_mem0_nor_qdrant_client(memory: Built) -> None:
    """The team's agent has its own environment: our side erases with mem0 and qdrant-client not importable."""
    code = (
        "import json, sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('mem0', 'qdrant_client', 'portalocker'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from pathlib import Path\n"
        "from erasure.subject import Subject\n"
        "from erasure.targets import Target\n"
        "from tasks.targets.mem0 import ERASER\n"
        "t = Target.model_validate({'name': 'm', 'kind': 'mem0', 'base_dir': Path(sys.argv[1]),\n"
        "                           'history_db': 'mem0/history.db', 'qdrant_path': 'qdrant'})\n"
        "out = ERASER.erase(t, Subject.model_validate_json(sys.argv[2]))\n"
        "print(json.dumps({k.value: [o.before, o.after] for k, o in out.items()}))\n"
        "assert not any(m.split('.')[0] in ('mem0', 'qdrant_client') for m in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(memory.root), SUBJECT.model_dump_json()],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    assert counts["semantic"][0] > 0 and all(after == 0 for _before, after in counts.values())
    assert found_strings(memory.root, IDENTIFIERS + CONTENT) == {}
    read_back_bystanders(memory)


def test_a_persistent_rollback_journal_of_the_agent_is_not_left_holding_the_subject(memory: Built) -> None:
    """An agent whose history connection runs in `journal_mode=PERSIST` leaves `history.db-journal`
    with the pre-images of its last transaction's pages; our connection writes in DELETE mode (per
    connection), so our commit removes the file."""
    m = open_memory(memory.root)
    try:
        assert m.db.connection.execute("PRAGMA journal_mode=PERSIST").fetchone() == ("persist",)
        m.update(memory.memory_ids[SUBJECT.id][1], text="Noor Haddad sold the dented silver hatchback")
        # The next transaction journals the page now holding that UPDATE row.
        m.update(memory.memory_ids[SUBJECT.id][1], text="Noor Haddad now takes the number 62 bus")
    finally:
        close_memory(m)
    journal = memory.root / "mem0/history.db-journal"
    assert b"Quarry Lane" in journal.read_bytes()

    ERASER.erase(memory.target(), SUBJECT)

    assert not journal.exists()
    assert found_strings(memory.root, [*IDENTIFIERS, *CONTENT, "hatchback", "number 62 bus"]) == {}
    read_back_bystanders(memory)


def test_case_variants_of_the_id_and_escaped_session_scopes_are_the_subject(memory: Built) -> None:
    """mem0 keeps user_id as given: the same person under another case is theirs too (as in the reference
    store); a user_id with `&`, `=` or `%` is escaped in the messages' session scope."""
    odd = Subject(id="m0-ops&team=7%", name="Ops Team Seven")
    m = open_memory(memory.root)
    try:
        m.add(
            [{"role": "user", "content": "Please remember: the canal permit renewal is due in March"}],
            user_id=SUBJECT.id.upper(),
            agent_id=AGENT,
        )
        m.add(
            [{"role": "user", "content": "Please remember: the rota spreadsheet lives in the blue folder"}],
            user_id=odd.id,
            run_id="night-shift",
        )
    finally:
        close_memory(m)
    scopes = [r[1] for r in raw_rows(memory.root)["messages"]]
    assert "run_id=night-shift&user_id=m0-ops%26team%3D7%25" in scopes

    for subject in (SUBJECT, odd):  # one request after the other
        fp = run.take(memory.target(), subject)
        out = ERASER.erase(memory.target(), subject)
        assert out[Tier.working].detail["messages"] > 0
        assert_all_clear(run.probe(memory.target(), subject, fp))

    assert found_strings(memory.root, [*IDENTIFIERS, "canal permit", "rota spreadsheet", "m0-ops%26team"]) == {}
    read_back_bystanders(memory)
