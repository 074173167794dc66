"""Source keys of erased items never stay in plaintext, whatever they spell (red team, case 4).

`contacts/jane.doe%40mail.example`, `ticket-jane-doe-0042`, `Jane.Doe/inbox/77` spell their person in
forms no identifier match foresees. After the erasure the archive skeleton and `erased_subjects` keep
them only as keyed hashes (and sticky erasure still works with them); other people's keys stay as they
are. Checked with a plain byte search of every file of the home outside the engine's vault."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure.config import Home
from erasure.subject import Subject
from memory import suppression
from memory.items import MemoryItem
from memory.schema import create
from tasks.runner import run_cascade
from tests import budget
from tests.cascade_fixtures import submit
from tests.memory.test_items_identity import _ingest

JANE = Subject(id="subj-7731", email="jane.doe@mail.example", name="Jane Doe")
RUTH = Subject(id="user-0042", email="ruth.moss@post.example", name="Ruth Moss")
JANE_KEYS = [
    ("contacts", "jane.doe%40mail.example"),
    ("tickets", "ticket-jane-doe-0042"),
    ("Jane.Doe", "inbox/77"),
    ("hmac:jane", "hmac:jane.doe"),
]  # a key that looks hashed is hashed too
SHARED = ("chat", "room-general")


def _item(
    subject: Subject, key: tuple[str, str], content: str, item_id: str | None = None, training: bool = False
) -> MemoryItem:
    body: dict[str, object] = {
        "source": key[0],
        "source_ref": key[1],
        "subject": subject.model_dump(),
        "content": content,
        "training": training,
    }
    if item_id is not None:
        body["item_id"] = item_id
    return MemoryItem.model_validate(body)


def home_bytes(home: Home) -> bytes:
    """Every byte of every file of the home and the evidence, except the engine's database (the request
    vault, where the subject's identifiers are kept while the request is evidence)."""
    files = [
        p
        for root in (home.root, home.evidence_root)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_relative_to(home.engine_dir)
    ]
    assert any(p.name == "memory.db" for p in files)
    return b"".join(p.read_bytes() for p in files)


def _plaintext(data: bytes, key: tuple[str, str]) -> list[str]:
    source, ref = key
    return [n for n in (ref, f"{source}/{ref}") if n.encode() in data]


def test_the_subjects_own_keys_are_hashed_whatever_they_spell(home: Home) -> None:
    jane = [_item(JANE, k, f"Note number {i} about the invoice.", training=i == 0) for i, k in enumerate(JANE_KEYS)]
    jane.append(_item(JANE, SHARED, "Who has the meeting room today?", item_id="jane-doe-msg-1"))
    ruth = [
        _item(RUTH, SHARED, "I have it until noon.", training=True),
        _item(RUTH, ("tickets", "ticket-ruth-moss-0043"), "My refund is late."),
    ]
    assert _ingest(home, [*jane, *ruth]).ingested == 7
    assert all(_plaintext(home_bytes(home), k) for k in JANE_KEYS)  # the search sees them before

    submit(home, "req-7731-1", JANE)
    run_cascade("req-7731-1", home)

    data = home_bytes(home)
    for key in JANE_KEYS:
        assert _plaintext(data, key) == [], key
    assert b"jane-doe-msg-1" not in data  # an item id is kept only inside the keyed item key
    for key in (SHARED, ("tickets", "ticket-ruth-moss-0043")):  # other people's keys stay as they are
        assert key[1].encode() in data
    conn = create(home.store_dir)
    try:
        rows = conn.execute("SELECT source, source_ref, item_key FROM erased_subjects").fetchall()
        assert len(rows) == 5 and all(
            str(s).startswith("hmac:") and str(r).startswith("hmac:") and k for s, r, k in rows
        )
        skeletons = conn.execute("SELECT source, source_ref FROM raw_archive WHERE erased_at IS NOT NULL").fetchall()
        assert len(skeletons) == 5 and all(
            str(s).startswith("hmac:") and str(r).startswith("hmac:") for s, r in skeletons
        )
        assert sorted(
            str(r[0]) for r in conn.execute("SELECT source_ref FROM raw_archive WHERE erased_at IS NULL")
        ) == ["room-general", "ticket-ruth-moss-0043"]
    finally:
        conn.close()

    again = _ingest(home, [*jane, *ruth, _item(RUTH, SHARED, "Room is free now.")])
    assert (again.skipped_suppressed, again.skipped_duplicate, again.ingested) == (5, 2, 1)


# --- the whole class: spellings of a person in their own keys, beside shared rooms ---------------------

PEOPLE = (JANE, RUTH, Subject(id="user-5150", email="li.wei@inbox.example", name="Li Wei"))
CASES = (str.lower, str.upper, str.title)


def _spelled(person: Subject, style: int, case: int, n: int) -> tuple[str, str]:
    """One of the person's own source keys: their email percent-encoded, their name with dashes, dots or
    underscores, in one letter case, or behind a prefix that looks hashed; `n` (4 digits) makes it
    unique in the store."""
    assert person.name is not None and person.email is not None
    first, last = (CASES[case](p) for p in person.name.split())
    return [
        ("contacts", f"{person.email.replace('@', '%40')}-{n}"),
        ("tickets", f"ticket-{first}-{last}-{n}"),
        (f"{first}.{last}", f"inbox/{n}"),
        ("mail", f"{first}_{last}.{n}"),
        ("hmac:notes", f"hmac:{first}.{last}.{n}"),
    ][style]


message = st.tuples(st.integers(0, 2), st.booleans(), st.integers(0, 4), st.integers(0, 2), st.booleans())


@settings(max_examples=budget.examples(10), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(message, min_size=2, max_size=8), erased=st.integers(0, 2))
def test_erased_keys_are_hashed_in_every_spelling(
    tmp_path_factory: pytest.TempPathFactory, messages: list[tuple[int, bool, int, int, bool]], erased: int
) -> None:
    home = Home.resolve(tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("ev")).ensure()
    items: list[MemoryItem] = []
    own: dict[int, list[tuple[str, str]]] = {0: [], 1: [], 2: []}
    ids: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for n, (person, shared, style, case, with_id) in enumerate(messages, start=1000):
        p = PEOPLE[person]
        key = SHARED if shared else _spelled(p, style, case, n)
        item_id = f"{_spelled(p, 1, case, n)[1]}-msg" if with_id else None
        items.append(_item(p, key, f"Message {n} about the weather.", item_id))
        if not shared:
            own[person].append(key)
        if item_id:
            ids[person].append(item_id)
    assert _ingest(home, items).ingested == len(items)  # every message is an item of its own

    submit(home, "req-9000-1", PEOPLE[erased])
    run_cascade("req-9000-1", home)

    data = home_bytes(home)
    for key in own[erased]:
        assert _plaintext(data, key) == [], key
    for item_id in ids[erased]:
        assert item_id.encode() not in data
    for person in (p for p in range(3) if p != erased):
        for key in own[person]:
            assert key[1].encode() in data  # a bystander's key stays as it is
    again = _ingest(home, items)
    mine = sum(1 for it in items if it.subject.id == PEOPLE[erased].id)
    assert (again.skipped_suppressed, again.skipped_duplicate, again.ingested) == (mine, len(items) - mine, 0)
    if any(it.source_ref == SHARED[1] and it.subject.id == PEOPLE[erased].id for it in items):
        conn = create(home.store_dir)
        try:  # the erased person's items in the shared room are suppressed, not the room
            assert not suppression.is_suppressed(conn, *SHARED, "another item")
            assert suppression.is_suppressed(conn, *SHARED)
        finally:
            conn.close()


def test_home_bytes_sees_every_file(home: Home, tmp_path: Path) -> None:
    """The byte search is not blind: a key written anywhere in the home (outside the vault) is found."""
    _ingest(home, [_item(RUTH, SHARED, "Hello.")])
    (home.root / "stray.txt").write_text("inbox/77")
    assert _plaintext(home_bytes(home), ("Jane.Doe", "inbox/77")) == ["inbox/77"]
