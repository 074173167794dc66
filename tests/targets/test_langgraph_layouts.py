"""Case 7: the subject's own items labelled as someone else's. A LangGraph memory (built with the real
framework: SqliteStore with its vector index, SqliteSaver under a compiled graph) that keeps each
person under two namespace layouts (`("memories", uid)` and `("users", uid, "prefs")`), with threads
written under a newer and an older checkpoint metadata key.

Everything of the subject is theirs whatever layout or key the target names: with one layout
configured the erasure still erases the other (and says how many layouts were not configured), with
both layouts as two targets on one file neither target counts the other's erasures as bystanders
lost, and a rerun after an exit 10 retakes the bystander baseline the failed run made stale.

The oracle is the test's own: a byte search of every file of the memory, and the memory read back
through LangGraph's API (every namespace, every item, every checkpoint's metadata, every bystander's
thread). It shares nothing with the code it checks."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure.config import Home
from erasure.subject import Subject
from erasure.targets import Target
from erasure.tiers import Tier
from probes.targets import run
from tasks.targets.langgraph_sqlite import ERASER
from tests import budget
from tests.cli_fixtures import erasure
from tests.langgraph_sqlite_fixtures import chat_graph, open_saver, open_store

UID = "{subject_id}"
MEMORIES = ("memories", UID)
PREFS = ("users", UID, "prefs")
NEW_KEY, OLD_KEY = "user_id", "uid"

SUBJECT = Subject(id="usr-7f3a9c", email="dana.ortiz@example.org", name="Dana Ortiz", phone="+351 912 345 678")
BYSTANDERS = (
    Subject(id="usr-11b2e0", email="li.wei@example.net", name="Li Wei", phone="+44 20 7946 0811"),
    Subject(id="usr-52c8d4", email="amara.okafor@example.com", name="Amara Okafor", phone="+234 803 555 0199"),
)


# --- the memory, built with LangGraph -------------------------------------------------------------------


@dataclass
class Layouts:
    """What was built: the files, and every person's items and threads (to read bystanders back)."""

    root: Path
    shapes: list[tuple[str, ...]]
    items: dict[str, list[tuple[tuple[str, ...], str, dict[str, Any]]]] = field(default_factory=dict)
    threads: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """person id -> (thread id, the metadata key naming them)."""

    @property
    def store(self) -> Path:
        return self.root / "store.sqlite"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints.sqlite"


def secret(person: Subject) -> str:
    """Content only this person's items and turns hold."""
    return f"orchard-{person.id[-6:]}-lantern"


def namespace(shape: tuple[str, ...], person: Subject, upper: bool = False) -> tuple[str, ...]:
    uid = person.id.upper() if upper else person.id
    return tuple(uid if label == UID else label for label in shape)


def build(
    root: Path,
    people: list[Subject],
    shapes: list[tuple[str, ...]],
    keys: list[str],
    *,
    upper: frozenset[int] = frozenset(),
    keyed: bool = False,
) -> Layouts:
    """Each person: under every shape their email, phone, id and a note (all embedded: vectors), and
    one thread per metadata key. `upper`: shapes whose subject label the app wrote in capitals;
    `keyed`: also a profile in a shared namespace under the person's id as the item's key."""
    root.mkdir(parents=True, exist_ok=True)
    lay = Layouts(root=root, shapes=shapes)
    with open_store(lay.store, fast=True) as store:
        for person in people:
            items = []
            for i, shape in enumerate(shapes):
                ns = namespace(shape, person, upper=i in upper and person is people[0])
                items += [
                    (ns, "email", {"text": f"reach me at {person.email}", "kind": "email"}),
                    (ns, "phone", {"text": f"call {person.phone}", "kind": "phone"}),
                    (ns, "id", {"text": f"account {person.id}", "kind": "id"}),
                    (ns, f"note-{i}", {"text": f"{person.name} keeps the {secret(person)} by the door {i}"}),
                ]
            if keyed:
                items.append((("profiles",), person.id, {"text": f"profile: {person.name}, {person.email}"}))
            for ns, key, value in items:
                store.put(ns, key, value)
            lay.items[person.id] = items
    with open_saver(lay.checkpoints, fast=True) as saver:
        graph = chat_graph(saver)
        for person in people:
            lay.threads[person.id] = []
            for j, key in enumerate(keys):
                tid = f"thread-{person.id}-{j}"
                text = f"This is {person.name} ({person.email}); the {secret(person)} again, turn {j}"
                graph.invoke({"messages": [("user", text)]}, {"configurable": {"thread_id": tid, key: person.id}})
                lay.threads[person.id].append((tid, key))
    return lay


def target(lay: Layouts, name: str, shapes: list[tuple[str, ...]], keys: list[str], *, lists: bool = True) -> Target:
    """A target on the memory's files: several layouts and keys as lists, or one of each as before."""
    extra: dict[str, Any] = (
        {"namespaces": [list(s) for s in shapes], "thread_keys": keys}
        if lists
        else {"namespace": list(shapes[0]), "thread_key": keys[0]}
    )
    return Target.model_validate(
        {
            "name": name,
            "kind": "langgraph-sqlite",
            "base_dir": lay.root,
            "store": lay.store.name,
            "checkpoints": lay.checkpoints.name,
            **extra,
        }
    )


# --- the oracle: bytes, and LangGraph's own API ------------------------------------------------------------


def subject_strings(person: Subject) -> list[bytes]:
    assert person.email and person.phone and person.name
    return [
        s.lower().encode()
        for s in (person.id, person.email, person.phone, person.phone.replace(" ", ""), person.name, secret(person))
    ]


def byte_hits(root: Path, person: Subject) -> list[str]:
    """Files under `root` (sidecars included) holding any identifier or the secret of `person`."""
    needles = subject_strings(person)
    hits = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            data = (Path(dirpath) / name).read_bytes().lower()
            hits += [name for n in needles if n in data]
    return sorted(set(hits))


def assert_gone_and_bystanders_intact(lay: Layouts, subject: Subject, bystanders: list[Subject]) -> None:
    assert byte_hits(lay.root, subject) == []
    for b in bystanders:
        assert byte_hits(lay.root, b)  # the scan sees bystanders: it would see the subject
    want = subject.id.lower()
    with open_store(lay.store) as store:
        every = store.search((), limit=1_000_000)
        assert all(want not in (label.lower() for label in item.namespace) for item in every)
        assert all(want not in (label.lower() for label in ns) for ns in store.list_namespaces(limit=100_000))
        for b in bystanders:
            for ns, key, value in lay.items[b.id]:
                got = store.get(ns, key)
                assert got is not None and got.value == value, (ns, key)
        near = store.search((), query=f"{subject.name} keeps the {secret(subject)} by the door 0", limit=5)
        assert near and all(h.value.get("text", "").find(secret(subject)) < 0 for h in near)
    with open_saver(lay.checkpoints) as saver:
        for c in saver.list(None):
            assert all(str(v).lower() != want for v in c.metadata.values()), c.metadata
        graph = chat_graph(saver)
        for b in bystanders:
            for tid, key in lay.threads[b.id]:
                messages = graph.get_state({"configurable": {"thread_id": tid, key: b.id}}).values["messages"]
                assert len(messages) == 2 and secret(b) in messages[0].content
        for tid, key in lay.threads[subject.id]:
            assert graph.get_state({"configurable": {"thread_id": tid, key: subject.id}}).values == {}


# --- erasing and probing, as the request flow does (every fingerprint first, then every erase) -------------


def erase_and_probe(targets: list[Target], subject: Subject) -> tuple[list[dict[Tier, Any]], list[Any]]:
    fps = [run.take(t, subject) for t in targets]
    assert all(fp.mentions == 0 for fp in fps)  # the subject's own items are never "someone else's"
    outs = [ERASER.erase(t, subject) for t in targets]
    results = [r for t, fp in zip(targets, fps, strict=True) for r in run.probe(t, subject, fp)]
    return outs, results


@pytest.fixture(scope="module")
def case7(tmp_path_factory: pytest.TempPathFactory) -> Layouts:
    return build(
        tmp_path_factory.mktemp("case7") / "agent", [SUBJECT, *BYSTANDERS], [MEMORIES, PREFS], [NEW_KEY, OLD_KEY]
    )


def copy_of(lay: Layouts, dest: Path) -> Layouts:
    shutil.copytree(lay.root, dest)
    return Layouts(root=dest, shapes=lay.shapes, items=lay.items, threads=lay.threads)


def test_one_layout_configured_erases_the_other_layout_and_the_old_key_too(case7: Layouts, tmp_path: Path) -> None:
    lay = copy_of(case7, tmp_path / "agent")
    t = target(lay, "memories", [MEMORIES], [NEW_KEY], lists=False)  # the old single-value keys
    assert ERASER.mentions(t, SUBJECT) == 0
    (out,), results = erase_and_probe([t], SUBJECT)
    assert out[Tier.semantic].detail["unconfigured_namespace_layouts"] == 1
    assert out[Tier.semantic].detail["items_under_unconfigured_layouts"] == 4
    assert out[Tier.working].detail["threads_under_unconfigured_metadata_keys"] == 1
    assert out[Tier.semantic].after == 0 and out[Tier.working].after == 0
    assert [r for r in results if r.failing()] == []
    assert_gone_and_bystanders_intact(lay, SUBJECT, list(BYSTANDERS))


def test_the_probe_calls_an_unerased_other_layout_residue_never_a_mention(case7: Layouts, tmp_path: Path) -> None:
    """Before the erasure the probe sees the subject's items under the layout nobody configured as
    theirs: residue, counted by layout, and not one mention."""
    lay = copy_of(case7, tmp_path / "agent")
    t = target(lay, "memories", [MEMORIES], [NEW_KEY])
    fp = run.take(t, SUBJECT)
    assert fp.mentions == 0
    assert fp.subject_before["unconfigured-namespace-layouts"] == 1
    assert fp.subject_before["items-under-unconfigured-layouts"] == 4
    assert fp.subject_before["threads-under-unconfigured-metadata-keys"] == 1
    found = {(r.tier, r.method): r.residue for r in run.probe(t, SUBJECT, fp)}
    assert found[("semantic", "unconfigured-namespace-layouts")] == 1
    assert found[("semantic", "items-under-unconfigured-layouts")] == 4
    assert found[("working", "threads-under-unconfigured-metadata-keys")] == 1


def test_both_layouts_as_two_targets_on_one_file_are_not_each_others_bystanders(case7: Layouts, tmp_path: Path) -> None:
    lay = copy_of(case7, tmp_path / "agent")
    targets = [
        target(lay, "memories", [MEMORIES], [NEW_KEY], lists=False),
        target(lay, "prefs", [PREFS], [OLD_KEY], lists=False),
    ]
    _outs, results = erase_and_probe(targets, SUBJECT)
    assert [r for r in results if r.failing()] == []
    assert_gone_and_bystanders_intact(lay, SUBJECT, list(BYSTANDERS))


def test_a_changed_bystander_item_is_bystanders_lost_though_every_count_holds(case7: Layouts, tmp_path: Path) -> None:
    """Content digests, not counts: the same number of items, one of them rewritten, is a loss."""
    lay = copy_of(case7, tmp_path / "agent")
    t = target(lay, "both", [MEMORIES, PREFS], [NEW_KEY, OLD_KEY])
    fp = run.take(t, SUBJECT)
    ERASER.erase(t, SUBJECT)
    ns, key, value = lay.items[BYSTANDERS[0].id][0]
    with open_store(lay.store) as store:
        store.put(ns, key, {**value, "text": "rewritten by someone"})
    results = run.probe(t, SUBJECT, fp)
    lost = [r for r in results if r.lost_bystanders()]
    assert [(r.tier, r.method) for r in lost] == [("semantic", "items-content-digests")]
    assert lost[0].bystanders_before - lost[0].bystanders_after == 1
    assert all(r.residue == 0 for r in results)


# --- generated layouts -------------------------------------------------------------------------------------

LABELS = ["memories", "users", "prefs", "profile", "org", "acme", "notes", "facts"]
KEYS = ["user_id", "uid", "userId", "owner", "customer_ref"]


@st.composite
def shapes_of(draw: st.DrawFn) -> list[tuple[str, ...]]:
    """1-3 distinct namespace shapes, each with the subject's label at some position."""
    out: list[tuple[str, ...]] = []
    for _ in range(draw(st.integers(1, 3))):
        fixed = draw(st.lists(st.sampled_from(LABELS), min_size=0, max_size=3))
        at = draw(st.integers(0, len(fixed)))
        shape = (*fixed[:at], UID, *fixed[at:])
        if shape not in out:
            out.append(shape)
    return out


@st.composite
def layouts(draw: st.DrawFn) -> dict[str, Any]:
    shapes = draw(shapes_of())
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True))
    configured = draw(st.lists(st.sampled_from(shapes), min_size=1, max_size=len(shapes), unique=True))
    configured_keys = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=len(keys), unique=True))
    return {
        "shapes": shapes,
        "keys": keys,
        "configured": configured,
        "configured_keys": configured_keys,
        "bystanders": draw(st.integers(1, 2)),
        "two_targets": draw(st.booleans()),
        "upper": frozenset(draw(st.sets(st.integers(0, len(shapes) - 1), max_size=1))),
        "keyed": draw(st.booleans()),
    }


@settings(
    max_examples=budget.examples(25),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=layouts())
def test_generated_layouts_end_with_nothing_of_the_subject_and_every_bystander_intact(
    tmp_path_factory: pytest.TempPathFactory, case: dict[str, Any]
) -> None:
    root = tmp_path_factory.mktemp("gen") / "agent"
    people = [SUBJECT, *BYSTANDERS[: case["bystanders"]]]
    lay = build(root, people, case["shapes"], case["keys"], upper=case["upper"], keyed=case["keyed"])
    assert byte_hits(lay.root, SUBJECT)
    shapes, keys = case["configured"], case["configured_keys"]
    if case["two_targets"] and (len(shapes) > 1 or len(keys) > 1):
        parts = [(shapes[:1], keys[:1]), (shapes[1:] or shapes[:1], keys[1:] or keys[:1])]
    else:
        parts = [(shapes, keys)]
    targets = [target(lay, f"t{i}", s, k, lists=len(s) > 1 or len(k) > 1) for i, (s, k) in enumerate(parts)]
    outs, results = erase_and_probe(targets, SUBJECT)
    assert [r for r in results if r.failing()] == []
    assert all(o[t].after == 0 for o in outs for t in o)
    assert_gone_and_bystanders_intact(lay, SUBJECT, people[1:])


# --- through the real CLI -----------------------------------------------------------------------------------


def _setup_home(home: Home, lay: Layouts, tables: list[dict[str, Any]], request_id: str) -> None:
    shutil.rmtree(home.store_dir)  # no reference store: targets.toml alone
    body = []
    for t in tables:
        body.append("[[targets]]")
        body += [f"{k} = {json.dumps(v)}" for k, v in t.items()]
    (home.root / "targets.toml").write_text("\n".join(body) + "\n")
    assert erasure("keys", "generate", "--role", "engine", "--home", str(home.root)).code == 0
    _submit(home, request_id, SUBJECT)


def _submit(home: Home, request_id: str, subject: Subject) -> None:
    h = str(home.root)
    envelope = {
        "request_id": request_id,
        "tenant_id": "default",
        "subject": subject.model_dump(exclude_none=True),
        "legal_basis": "GDPR",
        "received_at": (datetime.now(UTC) - timedelta(days=1)).isoformat(),
        "requester_identity_proof_ref": "idv/case7",
        "reason": "Art.17 request",
    }
    req = home.root.parent / f"{request_id}.json"
    req.write_text(json.dumps(envelope))
    assert erasure("request", "submit", str(req), "--home", h).code == 0


def _table(lay: Layouts, name: str, shape: tuple[str, ...], key: str) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "langgraph-sqlite",
        "store": str(lay.store),
        "checkpoints": str(lay.checkpoints),
        "namespace": list(shape),
        "thread_key": key,
    }


def _verification(home: Home, request_id: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((home.evidence_dir(request_id) / "verification.json").read_text())
    return doc


@pytest.mark.parametrize("two_targets", [False, True], ids=["one-layout", "both-layouts-two-targets"])
def test_case7_through_the_cli_ends_all_clear(
    case7: Layouts, home: Home, tmp_path: Path, prefect_harness: None, two_targets: bool
) -> None:
    lay = copy_of(case7, tmp_path / "agent")
    tables = [_table(lay, "memories", MEMORIES, NEW_KEY)]
    if two_targets:
        tables.append(_table(lay, "prefs", PREFS, OLD_KEY))
    _setup_home(home, lay, tables, "req-case7-0001")
    res = erasure("request", "run", "req-case7-0001", "--json", "--home", str(home.root))
    doc = _verification(home, "req-case7-0001")
    assert res.code == 0, [p for p in doc["probes"] if p["residue"] or p["bystanders_after"] < p["bystanders_before"]]
    assert json.loads(res.out)["all_clear"] is True
    assert not any(p["method"] == "mentions-reported" for p in doc["probes"])
    assert_gone_and_bystanders_intact(lay, SUBJECT, list(BYSTANDERS))
    steps = (home.evidence_dir("req-case7-0001") / "steps.jsonl").read_text()
    assert '"unconfigured_namespace_layouts": 1' in steps or two_targets
    text = steps + json.dumps(doc)
    assert all(s.decode() not in text.lower() for s in subject_strings(SUBJECT))


def _earlier_release(mp: pytest.MonkeyPatch) -> None:
    """The probe as the release before this one attributed namespaces: only a configured prefix made
    an item the subject's, so each of two targets on one file counted the other's items as bystanders
    (its sealed fingerprint says so: that is what a rerun after upgrading finds)."""
    from probes.targets.langgraph_sqlite import records as probe

    def is_subject(self: Any, prefix: str, key: str) -> bool:
        return self._template(prefix.split("."), True) is not None

    mp.setattr(probe._Namespaces, "is_subject", is_subject)
    mp.setattr(probe._Namespaces, "unconfigured", lambda self, prefix, key: None)


def test_a_rerun_after_exit_10_retakes_the_baseline_the_failed_run_made_stale(
    case7: Layouts, home: Home, tmp_path: Path, prefect_harness: None
) -> None:
    lay = copy_of(case7, tmp_path / "agent")
    _setup_home(
        home, lay, [_table(lay, "memories", MEMORIES, NEW_KEY), _table(lay, "prefs", PREFS, OLD_KEY)], "req-case7-0002"
    )
    h = str(home.root)
    with pytest.MonkeyPatch.context() as mp:
        _earlier_release(mp)
        first = erasure("request", "run", "req-case7-0002", "--json", "--home", h)
    assert first.code == 10, first
    assert json.loads(first.out)["all_clear"] is False  # issue 35: the JSON never claims what the pack does not
    lost = _verification(home, "req-case7-0002")["lost_bystander_tiers"]
    assert lost and not _verification(home, "req-case7-0002")["residue_tiers"]

    again = erasure("request", "run", "req-case7-0002", "--json", "--home", h)

    doc = _verification(home, "req-case7-0002")
    assert again.code == 0, [p for p in doc["probes"] if p["residue"] or p["bystanders_after"] < p["bystanders_before"]]
    assert "retaken after a run of this request lost other people's data" in doc["fingerprint"]
    assert_gone_and_bystanders_intact(lay, SUBJECT, list(BYSTANDERS))


def test_lists_and_single_keys_configure_the_same_layouts(case7: Layouts, tmp_path: Path) -> None:
    lay = copy_of(case7, tmp_path / "agent")
    single = target(lay, "one", [MEMORIES], [NEW_KEY], lists=False)
    both = Target.model_validate(
        {
            **single.model_dump(),
            "base_dir": lay.root,
            "namespace": list(MEMORIES),
            "namespaces": [list(PREFS)],
            "thread_key": NEW_KEY,
            "thread_keys": [OLD_KEY],
        }
    )
    assert ERASER.count(single, SUBJECT) == ERASER.count(both, SUBJECT)
    fp = run.take(both, SUBJECT)
    assert fp.subject_before["unconfigured-namespace-layouts"] == 0
    assert fp.subject_before["threads-under-unconfigured-metadata-keys"] == 0
    out = ERASER.erase(both, SUBJECT)
    assert out[Tier.semantic].detail["unconfigured_namespace_layouts"] == 0
    assert out[Tier.semantic].before == 8 and out[Tier.working].before == 2


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"namespaces": [["users", "everyone"]]}, "'namespaces' must hold"),
        ({"namespaces": ["users"]}, "'namespaces' must be a list"),
        ({"namespaces": []}, "'namespaces' must be a list"),
        ({"namespaces": [["users.all", UID]]}, "'namespaces': LangGraph"),
        ({"thread_keys": ["ok", "no way"]}, "'thread_keys'"),
        ({"thread_keys": "uid"}, "'thread_keys' must be a list"),
    ],
)
def test_bad_lists_name_their_key(tmp_path: Path, extra: dict[str, Any], says: str) -> None:
    from erasure.errors import ConfigError

    t = Target.model_validate(
        {
            "name": "lg",
            "kind": "langgraph-sqlite",
            "base_dir": tmp_path,
            "store": "s.sqlite",
            "checkpoints": "c.sqlite",
            "namespace": list(MEMORIES),
            "thread_key": NEW_KEY,
            **extra,
        }
    )
    with pytest.raises(ConfigError, match=says):
        ERASER.check(t)


def test_a_subject_whose_id_is_a_step_number_takes_no_one_elses_thread(tmp_path: Path) -> None:
    """LangGraph writes `step` (and `source`, `parents`) into every checkpoint's metadata: subject `1`
    owns none of the threads at step 1."""
    one = Subject(id="1", email="one@example.org", name="Olu Eins", phone="+49 30 1234 5678")
    lay = build(tmp_path / "agent", [one, *BYSTANDERS], [MEMORIES], [NEW_KEY])
    t = target(lay, "agent", [MEMORIES], [NEW_KEY])
    assert ERASER.count(t, one)[Tier.working] == 1
    (out,), results = erase_and_probe([t], one)
    assert out[Tier.working].before == 1 and out[Tier.working].detail["threads_under_unconfigured_metadata_keys"] == 0
    assert [r for r in results if r.failing()] == []
    with open_saver(lay.checkpoints) as saver:
        graph = chat_graph(saver)
        for b in BYSTANDERS:
            for tid, key in lay.threads[b.id]:
                assert len(graph.get_state({"configurable": {"thread_id": tid, key: b.id}}).values["messages"]) == 2


def test_another_subjects_erasure_from_the_same_target_after_the_seal_is_discounted(
    case7: Layouts, home: Home, tmp_path: Path, prefect_harness: None
) -> None:
    """A's fingerprint sealed, then a crash; B (a bystander of A's) erased from the same LangGraph file;
    A's rerun retakes the bystander baseline at once instead of counting B's erasure as A's loss."""
    from service.verification import take_and_seal_fingerprint

    lay = copy_of(case7, tmp_path / "agent")
    both = {
        "name": "agent",
        "kind": "langgraph-sqlite",
        "store": str(lay.store),
        "checkpoints": str(lay.checkpoints),
        "namespaces": [list(MEMORIES), list(PREFS)],
        "thread_keys": [NEW_KEY, OLD_KEY],
    }
    _setup_home(home, lay, [both], "req-case7-a")
    _submit(home, "req-case7-b", BYSTANDERS[0])
    assert take_and_seal_fingerprint("req-case7-a", home)["fingerprint"] == "taken"  # then "crash"
    h = str(home.root)
    assert erasure("request", "run", "req-case7-b", "--json", "--home", h).code == 0

    res = erasure("request", "run", "req-case7-a", "--json", "--home", h)

    doc = _verification(home, "req-case7-a")
    assert res.code == 0, [p for p in doc["probes"] if p["residue"] or p["bystanders_after"] < p["bystanders_before"]]
    assert "retaken after another erasure" in doc["fingerprint"]
    assert byte_hits(lay.root, BYSTANDERS[0]) == []
    assert_gone_and_bystanders_intact(lay, SUBJECT, [BYSTANDERS[1]])


def test_an_item_keyed_by_the_subjects_id_in_a_shared_namespace_is_theirs(tmp_path: Path) -> None:
    """`store.put(("profiles",), user_id, ...)`: the key spells the subject, so the item is theirs
    (erased, counted as a layout nobody configured), never another person's item that mentions them."""
    lay = build(tmp_path / "agent", [SUBJECT, *BYSTANDERS], [MEMORIES], [NEW_KEY], keyed=True)
    t = target(lay, "agent", [MEMORIES], [NEW_KEY])
    assert ERASER.mentions(t, SUBJECT) == 0
    fp = run.take(t, SUBJECT)
    assert fp.subject_before["unconfigured-namespace-layouts"] == 1
    assert fp.subject_before["items-under-unconfigured-layouts"] == 1
    (out,), results = erase_and_probe([t], SUBJECT)
    assert out[Tier.semantic].detail["unconfigured_namespace_layouts"] == 1
    assert out[Tier.semantic].before == 5 and out[Tier.vectors].before == 5
    assert [r for r in results if r.failing()] == []
    assert_gone_and_bystanders_intact(lay, SUBJECT, list(BYSTANDERS))
