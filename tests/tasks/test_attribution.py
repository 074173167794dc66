"""Attribution before redaction, on a real store built by ingest: whose is each hit of the subject's
identifiers (`tasks.attribution`), found through the mention index alone and in a window."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from erasure.identity import Identity
from erasure.spellings import Hit
from erasure.subject import Subject
from memory.ingest import ingest
from memory.items import MemoryItem
from memory.schema import create
from tasks import mentions
from tasks.attribution import AMBIGUOUS, REDACT, THEIRS, UNREDACTABLE, word_like

SUBJECT = Subject(id="subj-ann-7731", email="annabel.quist@example.org", name="Annabel Quist", phone="+44 20 7946 0001")
NAMESAKE = Subject(id="user-nms-5521", email="aq.other@example.net", name="ANNABEL  QUIST", phone="+1 555 0177")
HOUSEMATE = Subject(id="user-hm-0087", email="hm@example.net", name="Rowan Hale", phone="020 7946 0001")
BYSTANDER = Subject(id="user-bob-0042", email="bob.marsh@example.net", name="Bob Marsh", phone="+1 555 0100")


def _store(tmp: Path, people: list[Subject]) -> apsw.Connection:
    conn = create(tmp / "store")
    ingest(
        conn,
        tmp / "store",
        [
            MemoryItem.model_validate(
                {
                    "source": "chat",
                    "source_ref": f"conv-{p.id}",
                    "subject": p.model_dump(exclude_none=True),
                    "content": "Please refund the invoice.",
                }
            )
            for p in people
        ],
    )
    return conn


@pytest.fixture
def store(tmp_path: Path) -> Iterator[apsw.Connection]:
    conn = _store(tmp_path, [SUBJECT, NAMESAKE, HOUSEMATE, BYSTANDER])
    yield conn
    conn.close()


def test_a_namesake_and_a_housemate_carry_what_is_theirs(store: apsw.Connection) -> None:
    who = Identity.of(SUBJECT)
    att = mentions.attribution(store, who, [SUBJECT.id])
    assert att.namesakes == 1
    assert att.carried == {NAMESAKE.id: frozenset({"name"}), HOUSEMATE.id: frozenset({"phone"})}
    name, phone, email = Hit("name", 0, 5), Hit("phone", 0, 5), Hit("email", 0, 5)
    assert att.verdict(name, [NAMESAKE.id]) == THEIRS
    assert att.verdict(name, [BYSTANDER.id]) == AMBIGUOUS
    assert att.verdict(name, []) == AMBIGUOUS  # a derived text: no owner, still a namesake's name
    assert att.verdict(phone, [HOUSEMATE.id]) == THEIRS
    assert att.verdict(phone, [BYSTANDER.id]) == REDACT
    assert att.verdict(email, [NAMESAKE.id]) == REDACT
    assert att.verdict(Hit("email", 0, 5, inline=False), [BYSTANDER.id]) == UNREDACTABLE


def test_without_a_namesake_a_name_is_an_unambiguous_mention(tmp_path: Path) -> None:
    conn = _store(tmp_path, [SUBJECT, BYSTANDER])
    try:
        att = mentions.attribution(conn, Identity.of(SUBJECT), [SUBJECT.id])
        assert att.namesakes == 0
        assert att.verdict(Hit("name", 0, 5), [BYSTANDER.id]) == REDACT
    finally:
        conn.close()


def test_the_window_index_attributes_as_a_search_alone(store: apsw.Connection) -> None:
    who, other = Identity.of(SUBJECT), Identity.of(BYSTANDER)
    alone = mentions.attribution(store, who, [SUBJECT.id])
    with mentions.shared(Path(store.filename).parent, [other, who]):
        assert mentions.attribution(store, who, [SUBJECT.id]) == alone


@pytest.mark.parametrize(
    ("value", "word"),
    [
        ("jordan", True),
        ("Mike Ross", True),
        ("Zoë", True),
        ("subj-ann-7731", False),
        ("jordan7", False),
        ("j.doe", False),
    ],
)
def test_an_id_of_letters_only_reads_as_a_word(value: str, word: bool) -> None:
    assert word_like(value) is word


def test_an_item_keeps_what_is_not_to_redact(store: apsw.Connection) -> None:
    """Only the unambiguous mentions leave a bystander's text; the namesake's name stays and is counted."""
    who = Identity.of(SUBJECT)
    att = mentions.attribution(store, who, [SUBJECT.id])
    text = "Annabel Quist (annabel.quist+x@example.org, 0044 20 7946 0001) asked."
    found = mentions.item_mentions(who, att, text, [BYSTANDER.id])
    assert (len(found.redact), found.ambiguous, found.unredactable) == (2, 1, 0)
    new, n = mentions.redact_item(who, att, text, [BYSTANDER.id])
    assert (new, n) == ("Annabel Quist ([redacted], [redacted]) asked.", 2)
    assert mentions.redact_item(who, att, text, [NAMESAKE.id])[1] == 2
    assert mentions.redact_item(who, att, "Annabel Quist here: hello", [NAMESAKE.id]) == (
        "Annabel Quist here: hello",
        0,
    )
