"""The mention search never misses what the pattern finds, and the folded-id walk never misses an id
that folds to the request's: generated identities, spelled in odd letter case, with diacritics,
NFKC variants (full-width), the non-ASCII letters Python's case-insensitive matching equates with
ASCII ones, combining marks and private-use characters glued to the spelling, emails split into
tokens and phones with any separators, on a real store.

The rule is checked against the pattern itself: every row whose text `Identity.pattern()` finds a
spelling in must come back from `tasks.mentions` (frames, archive rows and sessions), searched alone
and searched in a window with another subject; the hyperscan prefilter is also checked on its own,
text by text.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import string
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure.identity import Identity, fold
from erasure.subject import Subject
from memory.schema import create
from tasks import mentions
from tasks.identity import ids_folding_to, personal_entities, values_folding_to
from tests import budget

NOW = "2026-01-01T00:00:00.000000Z"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[apsw.Connection]:
    conn = create(tmp_path_factory.mktemp("prefilter") / "store")
    yield conn
    conn.close()


def _clear(conn: apsw.Connection) -> None:
    for table in ("frames_fts", "frames", "raw_archive", "working_sessions", "kg_entities"):
        conn.execute(f"DELETE FROM {table}")
    conn.execute("DROP TRIGGER IF EXISTS raw_archive_append_only")  # test store: rows are cleared between examples


def _put(conn: apsw.Connection, texts: list[str], subject_ids: list[str]) -> None:
    _clear(conn)
    with conn:
        for i, text in enumerate(texts, start=1):
            kind = "derived" if i % 2 else "turn"
            conn.execute(
                "INSERT INTO frames(frame_id, kind, content, created_at) VALUES (?,?,?,?)", (i, kind, text, NOW)
            )
            conn.execute("INSERT INTO frames_fts(rowid, content) VALUES (?,?)", (i, text))
            conn.execute(
                "INSERT INTO raw_archive(archive_id, archive_uid, source, source_ref, subject_id, content,"
                " created_at) VALUES (?,?,?,?,?,?,?)",
                (i, f"u{i}", "chat", f"r{i}", "x", text, NOW),
            )
            conn.execute(
                "INSERT INTO working_sessions(session_id, subject_id, state, updated_at) VALUES (?,?,?,?)",
                (f"s{i}", "x", text, NOW),
            )
        for i, sid in enumerate(subject_ids, start=1):
            conn.execute(
                "INSERT INTO working_sessions(session_id, subject_id, state, updated_at) VALUES (?,?,?,?)",
                (f"id{i}", sid, "{}", NOW),
            )
            for kind in ("person", "email"):
                conn.execute(
                    "INSERT OR IGNORE INTO kg_entities(kind, name, created_at) VALUES (?,?,?)", (kind, sid, NOW)
                )


# --- generated identities and spellings -------------------------------------------------------------

LETTERS = string.ascii_letters + "éëøłßıİſKÅ"
word = st.text(alphabet=LETTERS, min_size=2, max_size=8)
names = st.lists(word, min_size=1, max_size=3).map(" ".join)
ids = st.text(alphabet=string.ascii_letters + string.digits + "-_.ıK", min_size=3, max_size=12)
emails = st.tuples(  # a dot-atom local part (one addr-spec, issue 23): no leading, trailing or double dot
    st.lists(st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=4), min_size=1, max_size=3).map(".".join),
    st.sampled_from(["example.org", "mail.example", "x.co"]),
).map(lambda t: f"{t[0]}@{t[1]}")
phones = st.tuples(
    st.sampled_from(["+1 555", "+44 20", "+254 7"]), st.text(alphabet=string.digits, min_size=6, max_size=8)
).map(" ".join)
subjects = st.builds(lambda i, e, n, p: Subject(id=i, email=e, name=n, phone=p), ids, emails, names, phones)

GLUE = ["\u0301", "\ue000", "\u0308"]  # a combining mark, a private-use character: tokens for FTS5, not for the pattern


def _fullwidth(s: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s)


def variants(draw: st.DrawFn, value: str) -> str:
    how = draw(
        st.sampled_from(["same", "upper", "lower", "title", "swap", "fullwidth", "nfd", "kelvin", "dotless", "spaces"])
    )
    if how == "spaces":  # the pattern's \s+ between words: any run of white space, ASCII or not
        return draw(st.sampled_from(["\t", "  ", "\n ", "\x1c", "\u00a0", "\u3000 "])).join(value.split(" "))
    if how == "upper":
        return value.upper()
    if how == "lower":
        return value.lower()
    if how == "title":
        return value.title()
    if how == "swap":
        return value.swapcase()
    if how == "fullwidth":
        return _fullwidth(value)
    if how == "nfd":
        return unicodedata.normalize("NFD", value)
    if how == "kelvin":
        return value.replace("k", "\u212a").replace("s", "\u017f")
    return value.replace("i", "\u0131")


def phone_spelling(draw: st.DrawFn, phone: str) -> str:
    digits = re.sub(r"\D", "", phone)
    if draw(st.booleans()):
        digits = {"1": digits[1:], "44": "0" + digits[2:], "254": "0" + digits[3:]}[
            next(cc for cc in ("254", "44", "1") if digits.startswith(cc))
        ]
    seps = st.sampled_from(["", "", " ", "-", ".", "(", ")", "/", "\t", " - "])
    return "".join(d + draw(seps) for d in digits[:-1]) + digits[-1]


@st.composite
def scenes(draw: st.DrawFn) -> tuple[Subject, list[str]]:
    subject = draw(subjects)
    texts = []
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        which = draw(st.sampled_from(["name", "email", "id", "phone", "none", "part"]))
        value = {
            "name": subject.name,
            "email": subject.email,
            "id": subject.id,
            "phone": subject.phone,
            "none": "",
            "part": (subject.name or "x").split(" ")[0],
        }[which] or ""
        spelled = phone_spelling(draw, value) if which == "phone" else variants(draw, value)
        before = draw(st.sampled_from(["", " ", "(", "_", "\n", "x", "9", "«", "é", *GLUE]))
        after = draw(st.sampled_from(["", " ", ")", "_", ".", "'s", "x", "9", "»", *GLUE]))
        filler = draw(st.text(alphabet=string.ascii_letters + " .,'", max_size=20))
        texts.append(f"{filler}{before}{spelled}{after}{filler}")
    return subject, texts


@settings(max_examples=budget.examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(scene=scenes())
def test_every_row_the_pattern_finds_is_found(store: apsw.Connection, scene: tuple[Subject, list[str]]) -> None:
    subject, texts = scene
    who = Identity.of(subject)
    _put(store, texts, [])
    named = {i for i, t in enumerate(texts, start=1) if who.names_in(t)}
    other = Identity.of(Subject(id="subj-other-1", name="Quill Ormsby", phone="+44 20 7946 0018"))
    for window in ([], [other, who]):
        with contextlib.ExitStack() as scope:
            if window:
                scope.enter_context(mentions.shared(Path(store.filename).parent, window))
            frames = set(mentions.frames_mentioning(store, who, set())) | mentions.derived_mentioning(store, who)
            assert frames == named
            assert set(mentions.archives_mentioning(store, who, set())) == named
            assert {int(s[1:]) for s in mentions.sessions_mentioning(store, who, set())} == named
    kept = mentions.Prefilter([other, who]).candidates(texts)[1]
    assert {i - 1 for i in named} <= kept


@st.composite
def id_scenes(draw: st.DrawFn) -> tuple[str, list[str]]:
    target = draw(ids)
    spelled = [variants(draw, target) for _ in range(draw(st.integers(min_value=1, max_value=4)))]
    spelled += [
        draw(st.sampled_from([" ", "\t", "", "  "])) + s + draw(st.sampled_from([" ", "\n", "", "\u0301", "x"]))
        for s in spelled
    ]
    others = draw(st.lists(ids, max_size=5))
    return target, spelled + others + [target[:-1], target + "0", "\u00e9" + target]


@settings(max_examples=budget.examples(200), deadline=None, suppress_health_check=list(HealthCheck))
@given(scene=id_scenes())
def test_every_store_id_that_folds_to_the_request_is_found(
    store: apsw.Connection, scene: tuple[str, list[str]]
) -> None:
    target, stored = scene
    _put(store, [], sorted(set(stored)))
    who = Identity(ids=(fold(target),), names=(fold(target),), emails=(fold(target),))
    want = {s for s in stored if fold(s) == fold(target)}
    assert ids_folding_to(store, who) & set(stored) == want
    walked = values_folding_to(store, "working_sessions", "subject_id", fold(target))
    assert want <= walked
    ents = personal_entities(store, who)
    names = {str(r[0]) for e in ents for r in store.execute("SELECT name FROM kg_entities WHERE entity_id = ?", (e,))}
    assert names == want | {
        s
        for s in stored
        if s.strip().lower() == fold(target) and unicodedata.normalize("NFKC", s).strip().lower() == fold(target)
    }


def test_an_identifier_of_punctuation_alone_matches_nothing_and_is_looked_for_nowhere(store: apsw.Connection) -> None:
    """docs/matching.md 2.6: a word whose canonical form is empty matches nothing, so an id of punctuation
    alone (or white space) is no hit anywhere and gives the prefilter nothing to look for."""
    blank, punct = Identity(ids=(" ",)), Identity(ids=("-+-",))
    _put(store, ["see -+- here", "nothing"], [])
    assert mentions.Prefilter([blank, punct]).candidates(["see -+- here", "a b", None]) == [set(), set()]
    assert not punct.names_in("see -+- here")
    assert mentions.derived_mentioning(store, punct) == set()


_JOINERS = st.sampled_from(["", "'", "-", "_", "`"])
_SEPARATORS = st.sampled_from([" ", ", ", "\n", " (", ") ", ".", " / ", "\t", " - "])


@st.composite
def ascii_spellings(draw: st.DrawFn) -> tuple[Identity, str]:
    """An ASCII text holding one of a subject's identifiers in a spelling the rule allows: words with
    joiners between letters, a possessive, either name order with an initial between, the address in
    any case or spelt out, its digest, the phone with any separators between digit groups."""
    given = draw(st.text(string.ascii_letters, min_size=2, max_size=8))
    family = draw(st.text(string.ascii_letters, min_size=2, max_size=8))
    local = draw(st.text(string.ascii_lowercase + string.digits, min_size=2, max_size=8))
    subject = Subject(
        id=f"u-{local}-77", email=f"{local}@mail.example", name=f"{given} {family}", phone="+44 20 7946 0001"
    )
    who = Identity.of(subject)

    def joined(word: str) -> str:
        return "".join(c + (draw(_JOINERS) if i < len(word) - 1 else "") for i, c in enumerate(word))

    kind = draw(st.sampled_from(["name", "id", "email", "spelt", "digest", "phone"]))
    if kind == "name":
        a, b = draw(st.permutations([joined(given), joined(family)]))
        middle = draw(st.sampled_from(["", " Q.", " Q"]))
        core = f"{a}{middle}{draw(_SEPARATORS)}{b}{draw(st.sampled_from(['', chr(39) + 's']))}"
    elif kind == "id":
        core = joined(f"u{local}77").upper() if draw(st.booleans()) else f"U_{local}_77"
    elif kind == "email":
        core = draw(st.sampled_from([f"{local}@mail.example", f"{local.upper()}+tag@MAIL.example"]))
    elif kind == "spelt":
        core = f"{local} at mail dot example"
    elif kind == "digest":
        core = f"https://gravatar.example/avatar/{hashlib.md5(subject.email.encode()).hexdigest()}?s=80"  # type: ignore[union-attr]
    else:
        sep = draw(st.sampled_from([" ", "-", ".", "", " (0)"]))
        core = draw(st.sampled_from([f"020{sep}7946{sep}0001", f"+44{sep}20{sep}7946{sep}0001", "0044 20 7946 0001"]))
    before = draw(st.text(string.ascii_letters + " .,;:", max_size=20))
    after = draw(st.text(string.ascii_letters + " .,;:", max_size=20))
    return who, f"{before} {core} {after}"


@settings(max_examples=budget.examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(case=ascii_spellings())
def test_the_prefilter_passes_every_ascii_text_the_rule_finds_a_hit_in(case: tuple[Identity, str]) -> None:
    """Oracle: the rule itself (`Identity.names_in`). Whatever it finds in an ASCII text, the prefilter
    (one hyperscan pass over the rule's own triggers) must have let through."""
    who, text = case
    if who.names_in(text):
        assert mentions.Prefilter([who]).candidates([text]) == [{0}], text


def test_the_answer_is_not_kept_across_a_write_outside_a_window(store: apsw.Connection) -> None:
    who = Identity.of(Subject(id="subj-memo-1", name="Quill Ormsby"))
    _put(store, ["nothing here", "nothing either"], [])
    assert mentions.derived_mentioning(store, who) == set()
    with store:
        store.execute("UPDATE frames SET content = 'ask Quill Ormsby' WHERE frame_id = 1")
    assert mentions.derived_mentioning(store, who) == {1}
    other = apsw.Connection(str(Path(store.filename)))  # another connection's commit is seen too
    with other:
        other.execute("DELETE FROM frames WHERE frame_id = 1")
    other.close()
    assert mentions.derived_mentioning(store, who) == set()


def test_a_window_reads_each_table_once_and_sees_rows_appended_and_redacted_since(store: apsw.Connection) -> None:
    """In a window a table is read whole at its first search only; a row appended later is still found
    (by its rowid), and a row redacted since is not."""
    who = Identity.of(Subject(id="subj-window-1", name="Quill Ormsby"))
    other = Identity.of(Subject(id="subj-window-2", name="Mabel Thorne"))
    _put(store, ["ask Quill Ormsby", "ask Mabel Thorne", "nothing"], [])
    whole_reads: list[str] = []

    def trace(_cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
        if "ORDER BY rowid" in sql and isinstance(bindings, tuple) and bindings == (-(2**63),):
            whole_reads.append(sql)
        return True

    store.set_exec_trace(trace)
    try:
        with mentions.shared(Path(store.filename).parent, [who, other]):
            assert mentions.derived_mentioning(store, who) == {1}
            assert set(mentions.frames_mentioning(store, other, set())) == {2}
            with store:
                store.execute(
                    "INSERT INTO frames(frame_id, kind, content, created_at) VALUES (9, 'derived', "
                    "'Quill Ormsby again', ?)",
                    (NOW,),
                )
                store.execute("UPDATE frames SET content = 'ask [redacted]' WHERE frame_id = 1")
            assert mentions.derived_mentioning(store, who) == {9}
            assert set(mentions.frames_mentioning(store, other, set())) == {2}
        assert len(whole_reads) == 1
        assert mentions.derived_mentioning(store, who) == {9}  # outside the window: a read of its own
        assert len(whole_reads) == 2
    finally:
        store.set_exec_trace(None)


def test_the_corpus_lines_naming_a_subject_are_read_once_per_file(tmp_path: Path, store: apsw.Connection) -> None:
    who = Identity.of(Subject(id="subj-corpus-1", name="Quill Ormsby", phone="+44 20 7946 0018"))
    other = Identity.of(Subject(id="subj-corpus-2", name="Mabel Thorne"))
    corpus = tmp_path / "v1.jsonl"
    corpus.write_text('{"t": "hello"}\n{"t": "call 020 7946-0018"}\n\n{"t": "QUILL  ormsby and Mabel Thorne"}\n')
    with mentions.shared(Path(store.filename).parent, [who, other]):
        assert mentions.lines_naming(store, corpus, who) == {1, 3}
        assert mentions.lines_naming(store, corpus, other) == {3}
        corpus.write_text('{"t": "hello"}\n')  # a new file (size, mtime): read again
        assert mentions.lines_naming(store, corpus, who) == frozenset()


def test_a_window_finds_the_same_phone_entities_as_a_search_alone_and_sees_changes(store: apsw.Connection) -> None:
    """Inside a window the phone entities come from one read of them (and rows added since); the answer
    is the scan's, spelling for spelling, and follows entities added, renamed and deleted in between."""
    who = Identity.of(Subject(id="subj-phone-1", phone="+44 20 7946 0018"))
    other = Identity.of(Subject(id="subj-phone-2", phone="+1 555 010 9999"))
    spelled = [
        "+44 20 7946 0018",
        "00442079460018",
        "+44 (20) 7946-0018",
        "\uff0b\uff14\uff14 20 7946 0018",
        "tel 442079460018",
        "+44 20 7946 0019",
        "+1 555 010 9999",
        "442079460018 ext",
    ]
    _clear(store)
    with store:
        for name in spelled:
            store.execute("INSERT INTO kg_entities(kind, name, created_at) VALUES ('phone', ?, ?)", (name, NOW))
    alone = personal_entities(store, who)
    assert len(alone) == 6  # all but the wrong last digit and the other person's
    with mentions.shared(Path(store.filename).parent, [other, who]):
        assert personal_entities(store, who) == alone
        with store:
            store.execute(
                "INSERT INTO kg_entities(kind, name, created_at) VALUES ('phone', '+44.20.7946.0018', ?)", (NOW,)
            )
            store.execute("UPDATE kg_entities SET name = '+44 20 0000 0000' WHERE name = '00442079460018'")
            store.execute("DELETE FROM kg_entities WHERE name = 'tel 442079460018'")
        inside = personal_entities(store, who)
    assert inside == personal_entities(store, who)
    assert len(inside) == 5
