"""Items are not conversations (red team, case 9: "two people in one conversation").

An item's identity is its `(source, source_ref)` plus its `item_id`, or plus its subject and content:
three messages of two people in one room are three items; an exact re-delivery is a duplicate; the
erasure of one person reaches their items in the room and suppresses them, never the other person's
items there nor that person's next message. A store written before items had keys keeps working."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure.config import Home
from erasure.errors import InputError
from erasure.sqlite import transaction
from erasure.subject import Subject
from memory import suppression
from memory.ingest import IngestReport, ingest
from memory.items import MemoryItem, read_jsonl
from memory.schema import create, open_store
from probes.fingerprint import take_fingerprint
from probes.run import run_probes
from tasks.runner import run_cascade
from tests import budget
from tests.cascade_fixtures import submit

ANN = Subject(id="subj-ann-7731", email="annabel.quist@example.org", name="Annabel Quist")
BOB = Subject(id="user-bob-0042", email="bob.marsh@example.net", name="Bob Marsh")
CAL = Subject(id="user-cal-5150", email="cal.ortega@example.com", name="Cal Ortega")
ROOM = ("chat", "room-general")


def item(subject: Subject, content: str, room: tuple[str, str] = ROOM, item_id: str | None = None) -> MemoryItem:
    body: dict[str, object] = {
        "source": room[0],
        "source_ref": room[1],
        "subject": subject.model_dump(),
        "content": content,
    }
    if item_id is not None:
        body["item_id"] = item_id
    return MemoryItem.model_validate(body)


def _ingest(home: Home, items: list[MemoryItem]) -> IngestReport:
    conn = create(home.store_dir)
    try:
        return ingest(conn, home.store_dir, items)
    finally:
        conn.close()


def _live(home: Home) -> list[tuple[str, str, str, str]]:
    """(source, source_ref, subject_id, content) of every live archive row, read with a plain query."""
    conn = create(home.store_dir)
    try:
        return sorted(
            (str(r[0]), str(r[1]), str(r[2]), str(r[3]))
            for r in conn.execute(
                "SELECT source, source_ref, subject_id, content FROM raw_archive WHERE erased_at IS NULL"
            )
        )
    finally:
        conn.close()


def _turns(home: Home) -> list[str]:
    conn = create(home.store_dir)
    try:
        return sorted(str(r[0]) for r in conn.execute("SELECT content FROM frames WHERE kind = 'turn'"))
    finally:
        conn.close()


A1, B1, A2 = "The printer on floor two jams.", "Mine jams too since Monday.", "It jams on every invoice."


def test_three_messages_of_two_people_in_one_room_are_three_items(home: Home) -> None:
    report = _ingest(home, [item(ANN, A1), item(BOB, B1), item(ANN, A2)])
    assert (report.ingested, report.skipped_duplicate) == (3, 0)
    assert [r[2:] for r in _live(home)] == sorted([(ANN.id, A1), (BOB.id, B1), (ANN.id, A2)])
    assert _turns(home) == sorted([A1, B1, A2])


def test_an_exact_redelivery_is_a_duplicate(home: Home) -> None:
    first = [item(ANN, A1), item(BOB, B1), item(ANN, A2, item_id="m-3")]
    _ingest(home, first)
    again = _ingest(home, [*first, item(ANN, "It jams on every invoice, edited.", item_id="m-3")])
    assert (again.ingested, again.skipped_duplicate) == (0, 4)  # an item id names the item whatever its text
    # within one file too, and an item id is the item's, not the text's
    twice = _ingest(
        home,
        [item(CAL, "Hello."), item(CAL, "Hello."), item(CAL, "Hello.", item_id="x"), item(CAL, "Hello.", item_id="y")],
    )
    assert (twice.ingested, twice.skipped_duplicate) == (3, 1)


def test_item_id_is_an_optional_field_of_an_ingest_line(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    line = {"source": "chat", "source_ref": "room-1", "subject": {"id": "u-1"}, "content": "hi", "item_id": "m-1"}
    path.write_text(json.dumps(line) + "\n" + json.dumps({**line, "item_id": None}) + "\n")
    assert [i.item_id for i in read_jsonl(path)] == ["m-1", None]
    path.write_text(json.dumps({**line, "item_id": "a\x01b"}) + "\n")
    with pytest.raises(InputError, match="item_id"):
        read_jsonl(path)


def test_erasing_one_person_leaves_the_other_in_the_room(home: Home) -> None:
    _ingest(home, [item(ANN, A1), item(BOB, B1), item(ANN, A2), item(ANN, "Call me.", room=("chat", "dm-ann"))])
    submit(home, "req-ann-1", ANN)
    fingerprint = take_fingerprint(home.store_dir, ANN)
    assert set(fingerprint.keys.frame_ids)  # the probes see the subject's turns in the shared room
    run_cascade("req-ann-1", home)
    # The independent probes agree: the other person's message in the room is not the subject's residue.
    verification = run_probes(home.store_dir, ANN, fingerprint)
    assert verification.all_clear, [p for p in verification.probes if p.failing()]

    assert _live(home) == [(*ROOM, BOB.id, B1)]
    assert _turns(home) == [B1]
    conn = create(home.store_dir)
    try:
        assert (
            int(
                cast(
                    tuple[Any, ...],
                    conn.execute("SELECT count(*) FROM working_sessions WHERE subject_id = ?", (BOB.id,)).fetchone(),
                )[0]
            )
            == 1
        )
    finally:
        conn.close()

    after = _ingest(
        home,
        [
            item(BOB, "Fixed now, thanks."),
            item(ANN, A1),
            item(ANN, A2),
            item(BOB, B1),
            item(ANN, "A new message of the erased person."),
        ],
    )
    assert after.ingested == 1  # the other person's next message in that room
    assert after.skipped_suppressed == 2  # the erased person's re-delivered messages
    assert after.skipped_duplicate == 1  # the other person's re-delivered message
    assert after.held_erased_identity == 1  # the erased person's new message (sticky by identity)
    assert [r[3] for r in _live(home)] == sorted([B1, "Fixed now, thanks."])


def _legacy_store(home: Home) -> None:
    """A store as it was before items had keys: erased_subjects unique per (source, source_ref) with one
    half in plaintext, a skeleton whose key stayed in plaintext, and live rows without an item key."""
    conn = create(home.store_dir)
    try:
        ingest(conn, home.store_dir, [item(BOB, B1, room=("chat", "room-old"))])
        conn.execute("BEGIN")
        conn.execute("DROP TABLE erased_subjects")
        conn.execute(
            "CREATE TABLE erased_subjects(id INTEGER PRIMARY KEY, source TEXT NOT NULL, source_ref TEXT"
            " NOT NULL, erased_at TEXT NOT NULL, request_ref TEXT, UNIQUE (source, source_ref))"
        )
        conn.execute(
            "INSERT INTO erased_subjects(source, source_ref, erased_at, request_ref) VALUES"
            " ('chat', 'ticket-annabel-0042', '2026-01-01', 'req-old'),"
            " ('chat', 'room-gone', '2026-01-01', 'req-old')"
        )
        conn.execute(
            "INSERT INTO raw_archive(archive_uid, source, source_ref, created_at, erased_at, erasure_ref)"
            " VALUES ('u1', 'chat', 'ticket-annabel-0042', '2026-01-01', '2026-01-02', 'req-old')"
        )
        conn.execute("DROP INDEX ix_raw_archive_item")
        conn.execute("DROP INDEX ix_frames_turn_item")
        conn.execute("ALTER TABLE raw_archive DROP COLUMN item_key")
        conn.execute("ALTER TABLE frames DROP COLUMN item_key")
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_a_store_from_before_item_keys_is_migrated_on_open(home: Home) -> None:
    _legacy_store(home)
    conn = open_store(home.store_dir)
    try:
        keys = suppression.list_suppressed(conn)
        assert len(keys) == 2 and all(
            k.source.startswith("hmac:") and k.source_ref.startswith("hmac:") and k.item_key is None for k in keys
        )
        skeleton = conn.execute("SELECT source, source_ref FROM raw_archive WHERE erased_at IS NOT NULL").fetchone()
        assert skeleton is not None
        assert str(skeleton[0]).startswith("hmac:") and str(skeleton[1]).startswith("hmac:")
        # a list row from before item keys still suppresses its whole conversation (fail-closed)
        assert suppression.is_suppressed(conn, "chat", "room-gone", "any-item")
        assert not suppression.is_suppressed(conn, "chat", "room-old", "any-item")
    finally:
        conn.close()
    data = b"".join(p.read_bytes() for p in home.store_dir.rglob("*") if p.is_file())
    assert b"ticket-annabel-0042" not in data
    # the old live item is still a duplicate of itself, and its room takes new items
    assert (
        _ingest(home, [item(BOB, B1, room=("chat", "room-old"))]).skipped_duplicate,
        _ingest(home, [item(CAL, "New here.", room=("chat", "room-old"))]).ingested,
    ) == (1, 1)
    # erasing its subject reaches the old item's turn frames (no item key), not the new item's
    submit(home, "req-legacy-1", BOB)
    run_cascade("req-legacy-1", home)
    assert _turns(home) == ["New here."]


# --- the whole class: interleavings of 2-3 people in shared rooms -------------------------------------

PEOPLE = (ANN, BOB, CAL)
WORDS = ("lorem", "ipsum", "dolor", "amet", "tempor", "magna", "aliqua", "veniam")

message = st.tuples(
    st.integers(0, 2),
    st.integers(0, 1),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    st.one_of(st.none(), st.sampled_from(("m1", "m2", "m3"))),
)


def _oracle_identity(room: int, person: int, text: str, item_id: str | None) -> tuple[object, ...]:
    return (room, "id", item_id) if item_id is not None else (room, "text", person, text)


@settings(max_examples=budget.examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(message, min_size=2, max_size=9), erased=st.integers(0, 2))
def test_interleaved_people_in_shared_rooms(
    tmp_path_factory: pytest.TempPathFactory, messages: list[tuple[int, int, list[str], str | None]], erased: int
) -> None:
    home = Home.resolve(tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("ev")).ensure()
    rooms = [("chat", "room-a"), ("chat", "room-b")]
    sent = [(p, r, " ".join(words) + ".", i) for p, r, words, i in messages]
    items = [item(PEOPLE[p], text, rooms[r], i) for p, r, text, i in sent]
    # the oracle: the first delivery of an identity is the item (its sender owns it), any later one
    # is a duplicate of it
    first: dict[tuple[object, ...], tuple[int, int, str, str | None]] = {}
    for p, r, text, i in sent:
        first.setdefault(_oracle_identity(r, p, text, i), (p, r, text, i))
    owner = [first[_oracle_identity(r, p, text, i)][0] for p, r, text, i in sent]
    report = _ingest(home, items)
    assert (report.ingested, report.skipped_duplicate) == (len(first), len(items) - len(first))

    submit(home, "req-x-1", PEOPLE[erased])
    run_cascade("req-x-1", home)
    assert _live(home) == sorted((*rooms[r], PEOPLE[p].id, text) for p, r, text, _i in first.values() if p != erased)

    again = _ingest(home, items)
    assert again.ingested == 0
    assert again.skipped_suppressed == sum(1 for o in owner if o == erased)  # the erased items, redelivered
    assert again.held_erased_identity == sum(
        1 for o, (p, *_rest) in zip(owner, sent, strict=True) if o != erased and p == erased
    )
    assert again.skipped_duplicate == sum(
        1 for o, (p, *_rest) in zip(owner, sent, strict=True) if o != erased and p != erased
    )
    after = _ingest(
        home,
        [item(PEOPLE[p], f"Next message of {p} in {r}.", rooms[r]) for p in range(3) if p != erased for r in range(2)],
    )
    assert after.ingested == 4


def test_store_can_be_read_by_plain_sqlite(home: Home) -> None:
    """The schema stays readable by a bare apsw connection (no project helpers)."""
    _ingest(home, [item(ANN, A1)])
    conn = apsw.Connection(str(home.store_dir / "memory.db"))
    try:
        cols = {str(r[1]) for r in conn.execute("PRAGMA table_info(erased_subjects)")}
        assert {"source", "source_ref", "item_key"} <= cols
    finally:
        conn.close()


def test_reconsent_of_one_request_keeps_another_requests_items_in_the_room(home: Home) -> None:
    conn = create(home.store_dir)
    try:
        with transaction(conn):
            suppression.record(conn, *ROOM, "req-a", "item-of-ann")
            suppression.record(conn, *ROOM, "req-b", "item-of-bob")
        assert suppression.allow(conn, *ROOM, "re-consent given", "dpo", request_ref="req-a")
        assert not suppression.is_suppressed(conn, *ROOM, "item-of-ann")
        assert suppression.is_suppressed(conn, *ROOM, "item-of-bob")
        assert not suppression.is_suppressed(conn, *ROOM, "item-of-cal")
    finally:
        conn.close()
