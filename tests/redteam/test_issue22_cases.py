"""Issue "The certificate tells the truth about every spelling": its ten cases, each through the real CLI.

Every test builds a store (the reference store through `erasure ingest`, or a LangGraph / Chroma /
mem0 memory built with the real framework), plants the case, checks that the red team's oracle
(tests/oracle.py, written apart from probes/) FINDS the subject before the erasure, runs
`erasure request run`, and ends with one rule (`assert_truthful`): either the run says all clear and
the oracle finds nothing of the subject in any decoded view of any file, or the run says specifically
that it is not (exit 7, or `erasedWithExceptions` with an `unscanned_content` / `mention_ambiguous` /
`mention_reported` exception). Cases 7 and 10 must end all clear. Namesakes' and everyday-word
bystanders' items must come out byte for byte.
"""

from __future__ import annotations

import base64
import gc
import gzip
import io
import json
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.cli_fixtures import erasure
from tests.oracle import scan_tree
from tests.oracle_person import Person
from tests.redteam_fixtures import (
    archive_content,
    assert_truthful,
    cli_home_fixture,  # noqa: F401 (the `cli_home` fixture)
    ingest,
    init_store,
    ok,
    oracle_after,
    run,
    submit,
)

JANE = {"id": "usr-jd-4471", "email": "jane.doe@mail.example", "name": "Jane Doe", "phone": "+44 20 7946 0001"}
BOB = {"id": "usr-bob-0042", "email": "bob.marsh@example.net", "name": "Bob Marsh", "phone": "+1 555 0100"}
CARA = {"id": "usr-cara-0077", "email": "cara.nunes@example.com", "name": "Cara Nunes", "phone": "+351 912 345 678"}


def person(d: dict[str, str]) -> Person:
    return Person(d["id"], d.get("email"), d.get("name"), d.get("phone"))


def item(subject: dict[str, str], source: str, ref: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"source": source, "source_ref": ref, "subject": subject, "content": content, **extra}


def base_items(subject: dict[str, str]) -> list[dict[str, Any]]:
    """The subject's own items and two bystanders' everyday items."""
    return [
        item(
            subject,
            "chat",
            "conv-1001",
            f"Hello, this is {subject['name']}. My parcel to the orange gate "
            "never arrived, please refund the courier fee.",
            training=True,
        ),
        item(
            subject, "email", "msg-2002", "Change the delivery address of my tea subscription, the old one was wrong."
        ),
        item(BOB, "chat", "conv-3003", "The router in the study drops the connection every evening."),
        item(CARA, "chat", "conv-4004", "Please renew the library loan of the atlas of trade routes."),
    ]


def reference_home(home: Any, inputs: Path, subject: dict[str, str], planted: list[dict[str, Any]]) -> None:
    init_store(home)
    report = ingest(home, inputs, base_items(subject) + planted)
    assert report.get("skipped_suppressed", 0) == 0 and report.get("held_erased_identity", 0) == 0, report


def found_before(home: Any, who: Person, kinds: set[str], extra: tuple[Path, ...] = ()) -> None:
    """The oracle sees the planted case before the erasure (a blind oracle fails here)."""
    scan = oracle_after(home, who, extra)
    assert kinds <= scan.kinds(), f"the oracle misses {kinds - scan.kinds()} before the erasure:\n{scan.summary()}"


# --- 1. phones in other spellings inside other people's items -------------------------------------


def test_case_1_phones_in_other_spellings_in_bystanders_items(cli_home: Any, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    planted = [
        item(BOB, "chat", "conv-5101", "Jane said to call her back on 0044 20 7946 0001 about the refund."),
        item(BOB, "chat", "conv-5102", "Her mobile is +44\u201120\u20117946\u20110001 (non-breaking hyphens)."),
        item(CARA, "chat", "conv-5103", "Neighbour's landline: +44 (20) 7946\u20130001, evenings only."),
        item(CARA, "email", "msg-5104", "Reach the tenant at (020) 7946 0001 before Friday."),
    ]
    reference_home(cli_home, inputs, JANE, planted)
    # only the phone spellings (the name alone is not in these items)
    phone_only = Person(JANE["id"] + "-x", None, None, JANE["phone"])
    assert len(oracle_after(cli_home, phone_only).hits) >= 4
    found_before(cli_home, person(JANE), {"phone"})
    submit(cli_home, inputs, "req-case-01", JANE)
    res = run(cli_home, "req-case-01")
    assert_truthful(cli_home, "req-case-01", res, person(JANE))


# --- 2. emails encoded ----------------------------------------------------------------------------


EMAIL_ENCODED = [
    "See https://crm.example/contacts?mail=jane.doe%40mail.example for the history.",
    'Pasted tool result: {"tool": "lookup", "result": {"email": "jane.doe\\u0040mail.example", "ok": true}}',
    "Forwarded from jane.doe&#64;mail.example &lt;html&gt;",
    "From: =?utf-8?q?Jane?= <jane.doe=40mail.example>",
    "2026-11-30T10:01:02Z INFO notify payload=" + base64.b64encode(b"to=jane.doe@mail.example").decode(),
    "Please cc jane.doe+billing@mail.example on the invoice.",
]


@pytest.mark.parametrize(
    "n",
    range(len(EMAIL_ENCODED)),
    ids=["percent", "json-u0040", "html-entity", "quoted-printable", "base64-log", "plus-tag"],
)
def test_case_2_emails_encoded_in_bystanders_items(cli_home: Any, tmp_path: Path, n: int) -> None:
    inputs = tmp_path / "in"
    reference_home(cli_home, inputs, JANE, [item(BOB, "chat", "conv-5201", EMAIL_ENCODED[n])])
    email_only = Person("nobody-x", JANE["email"])
    assert oracle_after(cli_home, email_only), "the oracle misses the planted email"
    submit(cli_home, inputs, "req-case-02", JANE)
    res = run(cli_home, "req-case-02")
    assert_truthful(cli_home, "req-case-02", res, person(JANE))


# --- 3. names in other forms ----------------------------------------------------------------------

JANA = {"id": "usr-jw-5512", "email": "jana.w@mail.example", "name": "Jana Weiß", "phone": "+49 30 1234 5678"}
NAME_FORMS = [
    "Weiß, Jana called about the boiler.",
    "Jana Wei\u00adß wants the boiler fixed.",
    "Note from Jana\nWeiss: boiler again.",
    "Caller:\tJana\tWEISS (boiler).",
    "Jana Weiss left a voicemail about the boiler.",
]


@pytest.mark.parametrize(
    "n", range(len(NAME_FORMS)), ids=["last-first", "soft-hyphen", "line-break", "tab", "ss-for-sz"]
)
def test_case_3_names_in_other_forms_in_bystanders_items(cli_home: Any, tmp_path: Path, n: int) -> None:
    inputs = tmp_path / "in"
    reference_home(cli_home, inputs, JANA, [item(BOB, "chat", "conv-5301", NAME_FORMS[n])])
    name_only = Person("nobody-x", None, JANA["name"])
    assert oracle_after(cli_home, name_only), "the oracle misses the planted name"
    submit(cli_home, inputs, "req-case-03", JANA)
    res = run(cli_home, "req-case-03")
    assert_truthful(cli_home, "req-case-03", res, person(JANA))


# --- 4. the subject's own source keys spelling them -----------------------------------------------


def test_case_4_source_keys_spelling_the_subject_leave_no_plaintext(cli_home: Any, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    planted = [
        item(JANE, "contacts", "jane.doe%40mail.example", "Imported contact card, no notes."),
        item(JANE, "tickets", "ticket-jane-doe-0042", "Printer on floor two is jammed again."),
        item(JANE, "mail", "Jane.Doe/inbox/77", "Out of office until Monday."),
    ]
    reference_home(cli_home, inputs, JANE, planted)
    found_before(cli_home, person(JANE), {"email", "name"})
    submit(cli_home, inputs, "req-case-04", JANE)
    res = run(cli_home, "req-case-04")
    _, found = assert_truthful(cli_home, "req-case-04", res, person(JANE), honest=frozenset())
    # whatever the verdict: no source key of hers in plaintext in the store
    in_store = [h for h in found.hits if h.file.startswith("store/")]
    assert not in_store, "the subject's source keys stay in plaintext:\n" + "\n".join(map(str, in_store[:10]))


# --- 5. attachments that are not plain text -------------------------------------------------------


def _attachments(folder: Path) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    text = f"Contact sheet: {JANE['name']}, {JANE['email']}, {JANE['phone']}\n"
    (folder / "contact.txt.gz").write_bytes(gzip.compress(text.encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("sheet/contact.txt", text)
    (folder / "contacts.zip").write_bytes(buf.getvalue())
    (folder / "contact-utf16.txt").write_bytes(text.encode("utf-16"))
    stream = zlib.compress(f"BT /F1 12 Tf 72 712 Td ({text.strip()}) Tj ET".encode())
    (folder / "contact.pdf").write_bytes(
        b"%PDF-1.4\n1 0 obj\n<< /Length "
        + str(len(stream)).encode()
        + b" /Filter /FlateDecode >>\nstream\n"
        + stream
        + b"\nendstream\nendobj\ntrailer\n<< >>\n%%EOF\n"
    )
    return [str(folder / n) for n in ("contact.txt.gz", "contacts.zip", "contact-utf16.txt", "contact.pdf")]


@pytest.mark.parametrize("which", ["gzip", "zip", "utf16", "pdf"])
def test_case_5_attachments_that_are_not_plain_text(cli_home: Any, tmp_path: Path, which: str) -> None:
    inputs = tmp_path / "in"
    files = _attachments(inputs / "files")
    chosen = [
        f
        for f in files
        if (which == "gzip" and f.endswith(".gz"))
        or (which == "zip" and f.endswith(".zip"))
        or (which == "utf16" and "utf16" in f)
        or (which == "pdf" and f.endswith(".pdf"))
    ]
    planted = [item(BOB, "email", "msg-5501", "Attached the contact sheet you asked for.", attachments=chosen)]
    reference_home(cli_home, inputs, JANE, planted)
    found_before(cli_home, person(JANE), {"email", "phone", "name"})
    blob_hits = [h for h in oracle_after(cli_home, Person("nobody-x", JANE["email"])).hits if "blobs" in h.file]
    assert blob_hits, "the attachment was not stored as a blob"
    submit(cli_home, inputs, "req-case-05", JANE)
    res = run(cli_home, "req-case-05")
    # A bystander's attachment the erasure may not rewrite: attributed to its owner and declared
    # (docs/matching.md 7.2), where the last round said mention_reported or residue.
    assert_truthful(
        cli_home,
        "req-case-05",
        res,
        person(JANE),
        honest=frozenset({"unscanned_content", "mention_reported", "mention_in_others_content"}),
    )


# --- framework stores -----------------------------------------------------------------------------


def _release_chroma() -> None:
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()
    gc.collect()


def build_langgraph(
    root: Path, items: list[tuple[tuple[str, ...], str, dict[str, Any]]], threads: list[tuple[str, dict[str, str], str]]
) -> None:
    """A LangGraph memory with the framework: store items and chat threads (thread id, configurable, text)."""
    from tests.langgraph_sqlite_fixtures import chat_graph, open_saver, open_store

    root.mkdir(parents=True, exist_ok=True)
    with open_store(root / "store.sqlite", fast=True) as store:
        for ns, key, value in items:
            store.put(ns, key, value)
    with open_saver(root / "checkpoints.sqlite", fast=True) as saver:
        graph = chat_graph(saver)
        for tid, conf, text in threads:
            graph.invoke({"messages": [("user", text)]}, {"configurable": {"thread_id": tid, **conf}})


def langgraph_values(root: Path, keys: list[tuple[tuple[str, ...], str]]) -> dict[str, Any]:
    from tests.langgraph_sqlite_fixtures import open_store

    with open_store(root / "store.sqlite") as store:
        out = {}
        for ns, key in keys:
            got = store.get(ns, key)
            out[f"{'/'.join(ns)}:{key}"] = None if got is None else got.value
        return out


def langgraph_threads(root: Path, threads: list[tuple[str, dict[str, str]]]) -> dict[str, Any]:
    from tests.langgraph_sqlite_fixtures import chat_graph, open_saver

    with open_saver(root / "checkpoints.sqlite") as saver:
        graph = chat_graph(saver)
        return {
            tid: [
                m.content
                for m in graph.get_state({"configurable": {"thread_id": tid, **conf}}).values.get("messages", [])
            ]
            for tid, conf in threads
        }


def build_chroma(path: Path, records: list[tuple[str, str, str, dict[str, Any]]]) -> None:
    """(collection, id, document, metadata) records through chromadb, then the client released."""
    from tests import chroma_fixtures

    c = chroma_fixtures.reopen(path)
    try:
        ef = chroma_fixtures.hash_embedding()
        by_col: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
        for col, rid, doc, meta in records:
            by_col.setdefault(col, []).append((rid, doc, meta))
        for col, recs in by_col.items():
            coll = c.get_or_create_collection(col, embedding_function=ef)
            for s in range(0, len(recs), 200):
                part = recs[s : s + 200]
                coll.add(ids=[r[0] for r in part], documents=[r[1] for r in part], metadatas=[r[2] for r in part])
    finally:
        c.close()
    _release_chroma()


def chroma_documents(path: Path, collection: str, ids: list[str]) -> dict[str, str | None]:
    from tests import chroma_fixtures

    c = chroma_fixtures.reopen(path)
    try:
        got = c.get_collection(collection, embedding_function=chroma_fixtures.hash_embedding()).get(ids=ids)
        docs = dict(zip(got["ids"], got["documents"] or [], strict=False))
    finally:
        c.close()
    _release_chroma()
    return {i: docs.get(i) for i in ids}


def build_mem0(root: Path, memories: list[tuple[str, str]]) -> None:
    """(user_id, text) memories through mem0 (raw, infer=False)."""
    from tests import mem0_fixtures

    m = mem0_fixtures.open_memory(root)
    try:
        for uid, text in memories:
            m.add([{"role": "user", "content": text}], user_id=uid, infer=False)
    finally:
        mem0_fixtures.close_memory(m)


def mem0_texts(root: Path, user_id: str) -> list[str]:
    from tests import mem0_fixtures

    m = mem0_fixtures.open_memory(root)
    try:
        got = m.get_all(filters={"user_id": user_id}) if _mem0_filters() else m.get_all(user_id=user_id)
        rows = got["results"] if isinstance(got, dict) else got
        return sorted(r["memory"] for r in rows)
    finally:
        mem0_fixtures.close_memory(m)


def _mem0_filters() -> bool:
    import inspect

    from mem0 import Memory

    return "user_id" not in inspect.signature(Memory.get_all).parameters


def write_targets(home: Any, body: str) -> None:
    (home.root / "targets.toml").write_text(body)


def _lg_target(name: str, root: Path, namespace: list[str], thread_key: str) -> str:
    return (
        f'[[targets]]\nname = "{name}"\nkind = "langgraph-sqlite"\nstore = "{root}/store.sqlite"\n'
        f'checkpoints = "{root}/checkpoints.sqlite"\nnamespace = {json.dumps(namespace)}\n'
        f'thread_key = "{thread_key}"\n\n'
    )


def _chroma_target(path: Path) -> str:
    return f'[[targets]]\nname = "kb-vectors"\nkind = "chroma"\npath = "{path}"\nsubject_key = "user_id"\n\n'


def _mem0_target(root: Path) -> str:
    from tests import mem0_fixtures

    return (
        f'[[targets]]\nname = "assistant-memory"\nkind = "mem0"\nhistory_db = "{root}/{mem0_fixtures.HISTORY_DB}"\n'
        f'qdrant_path = "{root}/{mem0_fixtures.QDRANT_PATH}"\ncollection = "{mem0_fixtures.COLLECTION}"\n'
        "lock_timeout = 60\n\n"
    )


# --- 6. framework stores: mentions in other people's items ----------------------------------------

JANE_PL = {**JANE, "phone": "+48 22 123 45 67"}


def test_case_6_framework_stores_hold_encoded_mentions(cli_home: Any, tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    uid, bob = JANE_PL["id"], BOB["id"]
    pasted = json.dumps({"tool": "crm", "contact": JANE_PL["name"]}).replace("Jane Doe", "\\u004aane\\u0020Doe")
    lg_items: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
        (("users", uid, "memories"), "m-1", {"text": "Jane likes the window seat on trains"}),
        (("users", bob, "memories"), "m-1", {"text": "Bob keeps bees near the tram depot"}),
    ]
    lg_threads = [
        ("t-jane-1", {"user_id": uid}, f"Hi, this is {JANE_PL['name']} about my refund."),
        ("t-bob-1", {"user_id": bob}, f"Pasted from the CRM: {pasted}"),
        ("t-bob-2", {"user_id": bob}, "Reschedule the typewriter repair to Monday."),
    ]
    build_langgraph(agents / "langgraph", lg_items, lg_threads)
    records = [
        (
            "notes",
            f"n-{i}",
            f"{'Jane' if i % 2 else 'Bob'} logged walrus item {i} at the harbour",
            {"user_id": uid if i % 2 else bob},
        )
        for i in range(40)
    ]
    records.append(
        ("notes", "n-bob-link", "CRM link https://crm.example/c/jane.doe%40mail.example for Bob", {"user_id": bob})
    )
    build_chroma(agents / "chroma", records)
    build_mem0(
        agents / "mem0",
        [
            (uid, "Jane Doe prefers callbacks after six"),
            (bob, "Bob says to call his colleague at 0048 22 123 45 67 for the keys"),
            (bob, "Bob restores vintage typewriters"),
        ],
    )
    write_targets(
        cli_home,
        _lg_target("support-agent", agents / "langgraph", ["users", "{subject_id}"], "user_id")
        + _chroma_target(agents / "chroma")
        + _mem0_target(agents / "mem0"),
    )
    who = person(JANE_PL)
    for sub, kind in (("langgraph", "name"), ("chroma", "email"), ("mem0", "phone")):
        assert kind in scan_tree(agents / sub, who).kinds(), f"the oracle misses the {kind} in {sub}"
    submit(cli_home, tmp_path / "in", "req-case-06", JANE_PL)
    res = run(cli_home, "req-case-06")
    extra = (agents / "langgraph", agents / "chroma", agents / "mem0")
    assert_truthful(cli_home, "req-case-06", res, who, extra=extra)


# --- 7. LangGraph: two namespace layouts, threads under an older metadata key ---------------------


def _two_layouts(root: Path) -> tuple[list[tuple[tuple[str, ...], str]], list[tuple[str, dict[str, str]]]]:
    uid, bob, cara = JANE["id"], BOB["id"], CARA["id"]
    items: list[tuple[tuple[str, ...], str, dict[str, Any]]] = []
    for who in (uid, bob, cara):
        for i in range(3):
            items.append((("memories", who), f"m-{i}", {"text": f"memory {i} of {who}: walrus harbour {i}"}))
        items.append((("users", who, "prefs"), "seat", {"text": f"{who} prefers the aisle seat", "v": 2}))
    threads = [
        ("t-new-jane", {"user_id": uid}, "Hi, please move my dentist appointment."),
        ("t-old-jane", {"uid": uid}, "Old thread: my parcel to the orange gate never arrived."),
        ("t-new-bob", {"user_id": bob}, "Bob: reschedule the typewriter repair."),
        ("t-old-cara", {"uid": cara}, "Cara: renew the atlas loan."),
    ]
    build_langgraph(root, items, threads)
    bystander_keys = [(ns, key) for ns, key, _ in items if ns[1] != uid]
    return bystander_keys, [(tid, conf) for tid, conf, _ in threads if uid not in conf.values()]


@pytest.mark.parametrize("layout", ["one-layout-configured", "both-layouts-as-two-targets"])
def test_case_7_langgraph_two_layouts_and_an_older_thread_key_end_all_clear(
    cli_home: Any, tmp_path: Path, layout: str
) -> None:
    root = tmp_path / "agents" / "langgraph"
    by_keys, by_threads = _two_layouts(root)
    values_before = langgraph_values(root, by_keys)
    threads_before = langgraph_threads(root, by_threads)
    if layout == "one-layout-configured":
        write_targets(cli_home, _lg_target("support-agent", root, ["memories", "{subject_id}"], "user_id"))
    else:
        write_targets(
            cli_home,
            _lg_target("memories-layout", root, ["memories", "{subject_id}"], "user_id")
            + _lg_target("prefs-layout", root, ["users", "{subject_id}", "prefs"], "uid"),
        )
    who = Person(JANE["id"])  # the id is how these stores spell her
    assert scan_tree(root, who), "the oracle misses the subject's id"
    submit(cli_home, tmp_path / "in", "req-case-07", JANE)
    res = run(cli_home, "req-case-07")
    first = res.code
    if first == 10:  # a rerun after an exit 10 must retake the baseline and converge
        res = run(cli_home, "req-case-07")
    assert_truthful(cli_home, "req-case-07", res, person(JANE), extra=(root,), must_be_clear=True)
    assert first != 10, "the first run ended in exit 10 (other people's data shrank): over-erasure verdict"
    assert langgraph_values(root, by_keys) == values_before
    assert langgraph_threads(root, by_threads) == threads_before


# --- 8. a namesake, and an id that is an everyday word --------------------------------------------

NAMESAKE = {"id": "usr-jd-9090", "email": "jd.other@post.example", "name": "Jane Doe", "phone": "+44 161 496 0999"}
JORDAN = {"id": "jordan", "email": "j.kline@mail.example", "name": "Jordan Kline", "phone": "+44 20 7946 0777"}


def test_case_8_a_namesake_keeps_their_item_byte_for_byte(cli_home: Any, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    planted = [
        item(NAMESAKE, "chat", "conv-5801", "Jane Doe here: my allotment shed lock is broken."),
        item(BOB, "chat", "conv-5802", "Jane Doe from the pottery club lent me her kiln."),
    ]
    reference_home(cli_home, inputs, JANE, planted)
    before = {ref: archive_content(cli_home, "chat", ref) for ref in ("conv-5801", "conv-5802")}
    found_before(cli_home, person(JANE), {"name", "email", "id"})
    submit(cli_home, inputs, "req-case-08", JANE)
    res = run(cli_home, "req-case-08")
    assert_truthful(cli_home, "req-case-08", res, person(JANE), honest=frozenset({"mention_ambiguous"}))
    after = {ref: archive_content(cli_home, "chat", ref) for ref in ("conv-5801", "conv-5802")}
    assert after == before, "a namesake's item (or an ambiguous mention) was changed"


def test_case_8_an_everyday_word_id_is_not_redacted_and_is_reported_ambiguous(cli_home: Any, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    planted = [
        item(BOB, "chat", "conv-5811", "We are hiking in Jordan next spring, Petra first."),
        item(CARA, "chat", "conv-5812", "Michael Jordan posters for the garage sale."),
    ]
    reference_home(cli_home, inputs, JORDAN, planted)
    before = {ref: archive_content(cli_home, "chat", ref) for ref in ("conv-5811", "conv-5812")}
    found_before(cli_home, person(JORDAN), {"id"})
    submit(cli_home, inputs, "req-case-08b", JORDAN)
    res = run(cli_home, "req-case-08b")
    v, _ = assert_truthful(cli_home, "req-case-08b", res, person(JORDAN), honest=frozenset({"mention_ambiguous"}))
    after = {ref: archive_content(cli_home, "chat", ref) for ref in ("conv-5811", "conv-5812")}
    assert after == before, f"an everyday word was redacted: {after}"
    assert "mention_ambiguous" in v.kinds, f"not reported as mention_ambiguous: {sorted(v.kinds)}"


# --- 9. two people in one conversation ------------------------------------------------------------


def test_case_9_two_people_in_one_conversation(cli_home: Any, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    init_store(cli_home)
    room = [
        item(JANE, "chat", "room-12", "Jane: can we move the book club to Thursday?"),
        item(BOB, "chat", "room-12", "Bob: Thursday works, I will bring the walnut cake."),
        item(JANE, "chat", "room-12", "Jane: great, see you at the library annex."),
    ]
    report = ingest(cli_home, inputs, room, "room.jsonl")
    assert report.get("ingested") == 3, f"three messages by two people in one room: {report}"
    bob_before = [r for r in archive_content(cli_home, "chat", "room-12") if r[0] == BOB["id"]]
    assert len(bob_before) == 1
    submit(cli_home, inputs, "req-case-09", JANE)
    res = run(cli_home, "req-case-09")
    assert_truthful(cli_home, "req-case-09", res, person(JANE))
    bob_after = [r for r in archive_content(cli_home, "chat", "room-12") if r[0] == BOB["id"]]
    assert bob_after == bob_before, "the other person's message in the room was touched"
    again = ingest(cli_home, inputs, [item(BOB, "chat", "room-12", "Bob: the cake is walnut and fig.")], "next.jsonl")
    assert again.get("ingested") == 1 and again.get("skipped_suppressed", 0) == 0, (
        f"the other person's next message in the room was not ingested: {again}"
    )


# --- 10. Chroma collections under 1,000 writes end all clear --------------------------------------


@pytest.mark.parametrize("size", [30, 300, 900])
def test_case_10_small_chroma_collections_end_all_clear(cli_home: Any, tmp_path: Path, size: int) -> None:
    path = tmp_path / "agents" / "chroma"
    uid = JANE["id"]
    records = []
    for col in ("notes", "facts"):
        for i in range(size // 2):
            owner = (uid, BOB["id"], CARA["id"])[i % 3]
            doc = (
                f"{JANE['name']} wrote {col} {i}: zebra lighthouse, reach her at {JANE['email']}"
                if owner == uid
                else f"{owner} logged {col} {i} walrus harbour at noon"
            )
            records.append((col, f"{col}-{i}", doc, {"user_id": owner}))
    build_chroma(path, records)
    by_ids = {col: [r[1] for r in records if r[0] == col and r[3]["user_id"] != uid] for col in ("notes", "facts")}
    docs_before = {col: chroma_documents(path, col, ids) for col, ids in by_ids.items()}
    write_targets(cli_home, _chroma_target(path))
    assert scan_tree(path, person(JANE)), "the oracle misses the subject"
    submit(cli_home, tmp_path / "in", "req-case-10", JANE)
    res = run(cli_home, "req-case-10")
    assert_truthful(cli_home, "req-case-10", res, person(JANE), extra=(path,), must_be_clear=True)
    assert {col: chroma_documents(path, col, ids) for col, ids in by_ids.items()} == docs_before


def test_the_cli_is_real(cli_home: Any) -> None:
    """The harness: `erasure targets list` answers through the entry point on this home."""
    ok(erasure("targets", "list", "--home", str(cli_home.root), "--json"))
