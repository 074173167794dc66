"""Truth in every spelling, on the erasing side: a bystander's item that names the subject in any
spelling software writes is redacted in every tier that holds it; a namesake's own item and an item
that uses the subject's everyday-word id as a word stay byte for byte; what is ambiguous or cannot be
redacted in place is reported with counts.

The cascade runs as the flow runs it (prepare, the nine steps), on a real store. The oracle below is
written apart from `erasure.spellings`: it decodes with the standard library (urllib, html, quopri,
json-style escapes, base64) and compares squashed canonical text (letters or digits only).
"""

from __future__ import annotations

import base64
import html
import json
import quopri
import re
import tempfile
import unicodedata
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from erasure.identity import Identity
from erasure.subject import Subject
from memory.ingest import ingest
from memory.items import MemoryItem
from memory.schema import create
from memory.sessions import session_path
from service.locks import store_lock
from tasks import mentions
from tasks.runner import run_cascade
from tests import budget
from tests.cascade_fixtures import BYSTANDER, SUBJECT, build_store, submit

NAMESAKE = Subject(id="user-nms-5521", email="a.quist.other@example.net", name=SUBJECT.name, phone="+1 555 0177")
"""Same name as the subject; another id, email and phone."""

# --- the oracle: decode with the standard library, compare squashed text --------------------------

_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"), "-")
_GERMAN = {"ä": "ae", "ö": "oe", "ü": "ue"}


def _canon(text: str) -> list[str]:
    t = unicodedata.normalize("NFKC", text)
    t = "".join(c for c in t if unicodedata.category(c) != "Cf").translate(_DASHES).casefold()
    out = []
    for v in (t, "".join(_GERMAN.get(c, c) for c in t)):
        out.append("".join(c for c in unicodedata.normalize("NFD", v) if not unicodedata.combining(c)))
    return out


def _decodings(text: str) -> Iterator[str]:
    yield text
    yield urllib.parse.unquote(text)
    yield html.unescape(text)
    yield quopri.decodestring(text.encode("utf-8", "surrogatepass")).decode("utf-8", "replace")
    yield re.sub(
        r"\\u([0-9a-fA-F]{4})|\\([ntr])",
        lambda m: chr(int(m.group(1), 16)) if m.group(1) else {"n": "\n", "t": "\t", "r": "\r"}[m.group(2)],
        text,
    )
    for run in re.findall(r"[A-Za-z0-9+/_-]{12,}", text):
        for off in range(4):
            body = run[off:]
            body = body[: len(body) - len(body) % 4] + (
                "" if len(body) % 4 < 2 else body[len(body) - len(body) % 4 :] + "=" * (4 - len(body) % 4)
            )
            for alt in (b"+/", b"-_"):
                try:
                    data = base64.b64decode(body, altchars=alt, validate=True)
                except ValueError:
                    continue
                yield data.decode("utf-8", "replace")


def oracle(text: str, person: Subject) -> set[str]:
    """The kinds of `person`'s identifiers that `text` holds in any decoding (squashed comparison)."""
    found: set[str] = set()
    digits = re.sub(r"\D", "", person.phone or "")
    nsn = digits[2:] if digits.startswith("44") else digits[1:]
    local, _, domain = (person.email or "").lower().partition("@")
    name = [re.sub(r"[^a-z]", "", t) for t in _canon(person.name or "")[0].split()]
    letters_id = re.sub(r"[\W_]", "", (person.id or "").lower())
    for dec in _decodings(text):
        for view in _canon(dec):
            if local and re.search(re.escape(local) + r"(\+[^@\s]*)?\s?@\s?" + re.escape(domain), view):
                found.add("email")
            if nsn and nsn in re.sub(r"\D", "", view):
                found.add("phone")
            flat = re.sub(r"[^a-z]", "", view)
            if name and ("".join(name) in flat or "".join(reversed(name)) in flat):
                found.add("name")
            if letters_id and letters_id in re.sub(r"[\W_]", "", view):
                found.add("id")
    return found


# --- one item in every tier -----------------------------------------------------------------------


def item_texts(home: Home, source: str, ref: str) -> dict[str, str]:
    """Every text the store holds of one item: archive row, summary and turn frames, chunks, session
    row and file, corpus lines of the live versions."""
    conn = create(home.store_dir)
    out: dict[str, str] = {}
    try:
        for aid, content in conn.execute(
            "SELECT archive_id, content FROM raw_archive WHERE source = ? AND source_ref = ?", (source, ref)
        ):
            out[f"archive:{aid}"] = str(content)
            for fid, text in conn.execute("SELECT frame_id, content FROM frames WHERE archive_id = ?", (aid,)):
                out[f"frame:{fid}"] = str(text)
        for fid, text in conn.execute("SELECT frame_id, content FROM frames WHERE turn_key = ?", (f"{source}/{ref}",)):
            out[f"frame:{fid}"] = str(text)
        frames = [int(k.split(":")[1]) for k in out if k.startswith("frame:")]
        for fid in frames:
            for cid, text in conn.execute("SELECT chunk_id, content FROM frame_chunks WHERE frame_id = ?", (fid,)):
                out[f"chunk:{fid}:{cid}"] = str(text)
        for sid, state in conn.execute(
            "SELECT session_id, state FROM working_sessions WHERE source = ? AND source_ref = ?", (source, ref)
        ):
            out[f"session:{sid}"] = str(state)
            path = session_path(home.store_dir, str(sid))
            if path.exists():
                out[f"session-file:{sid}"] = path.read_text(encoding="utf-8")
        for (rel,) in conn.execute("SELECT path FROM ft_corpora WHERE removed_at IS NULL"):
            for n, line in enumerate((home.store_dir / str(rel)).read_text(encoding="utf-8").splitlines()):
                if line.strip() and json.loads(line).get("source_ref") == ref:
                    out[f"corpus:{rel}:{n}"] = line
    finally:
        conn.close()
    return {k: v for k, v in out.items() if not k.startswith("corpus:")} | _latest_corpus(out)


def _latest_corpus(out: dict[str, str]) -> dict[str, str]:
    lines = {k: v for k, v in out.items() if k.startswith("corpus:")}
    return {"corpus": sorted(lines.items())[-1][1]} if lines else {}


def add_items(home: Home, items: list[dict[str, Any]]) -> None:
    conn = create(home.store_dir)
    try:
        ingest(conn, home.store_dir, [MemoryItem.model_validate(i) for i in items])
    finally:
        conn.close()


def item(subject: Subject, ref: str, content: str) -> dict[str, Any]:
    return {
        "source": "chat",
        "source_ref": ref,
        "subject": subject.model_dump(exclude_none=True),
        "content": content,
        "training": True,
    }


def erase(home: Home, request_id: str, subject: Subject) -> list[Any]:
    submit(home, request_id, subject=subject)
    with store_lock(home):
        run_cascade(request_id, home)
    engine = open_engine(home.engine_db)
    try:
        return request_records.exceptions(engine, request_id, open_only=True)
    finally:
        engine.close()


def counted(exceptions: list[Any], kind: str) -> int:
    return sum(int(e.detail.get("mentions", 0)) for e in exceptions if e.kind == kind)


@pytest.fixture
def built(home: Home, tmp_path: Path) -> Home:
    build_store(home, tmp_path)
    return home


# --- the red team's examples -------------------------------------------------------------------------

PHONES = [
    "0044 20 7946 0001",
    "+44 20\u20117946\u20130001",
    "+44 20\u20127946\u20140001",
    "020\u22127946\u22120001",
    "+44 (0)20 7946 0001",
    "(020) 7946 0001",
    "020 7946 0001",
    "+44\u00a020\u00a07946\u00a00001",
    "[020] 7946.0001",
]
EMAILS = [
    "annabel.quist%40example.org",
    "annabel%2Equist%40example%2Eorg",
    "annabel.quist\\u0040example.org",
    "annabel.quist&#64;example.org",
    "annabel.quist&#x40;example.org",
    "annabel.quist&commat;example.org",
    "annabel.quist=40example.org",
    "annabel.quist+news@example.org",
    "ANNABEL.QUIST@EXAMPLE.ORG",
]
NAMES = [
    "Quist, Annabel",
    "Annabel Qu\u00adist",
    "Annabel Qu\u200bist",
    "Annabel\u2060Quist",
    "Annabel\nQuist",
    "Annabel\tQuist",
    "QUIST ANNABEL",
    "Annabel\ufeffQuist",
]


@pytest.mark.parametrize("spelled", PHONES + EMAILS + NAMES)
def test_a_bystanders_mention_in_any_spelling_is_redacted_in_every_tier(built: Home, spelled: str) -> None:
    add_items(built, [item(BYSTANDER, "conv-spell-1", f"Please forward this to {spelled} before Friday.")])
    assert oracle(" ".join(item_texts(built, "chat", "conv-spell-1").values()), SUBJECT)
    erase(built, "req-spell-1", SUBJECT)
    texts = item_texts(built, "chat", "conv-spell-1")
    assert {"archive", "session", "session-file", "corpus"} <= {k.split(":")[0] for k in texts}
    for where, text in texts.items():
        assert not oracle(text, SUBJECT), (where, text)
    assert "before Friday" in texts[next(k for k in texts if k.startswith("archive"))]


def test_a_name_split_over_two_lines_leaves_no_tier_naming_them(built: Home) -> None:
    """The archive keeps the line break, the session and the corpus line keep the turns as two JSON
    strings: all of them read through one matcher, and the name leaves all of them."""
    add_items(built, [item(BYSTANDER, "conv-spell-2", "I spoke with Annabel\nQuist about the refund.")])
    erase(built, "req-spell-2", SUBJECT)
    texts = item_texts(built, "chat", "conv-spell-2")
    for where, text in texts.items():
        if not where.startswith(("frame", "chunk")):  # a turn frame holds one line: half a name
            assert not oracle(text, SUBJECT), (where, text)
        json.loads(text) if where.startswith(("session", "corpus")) else None


def test_a_base64_run_is_reported_not_skipped(built: Home) -> None:
    blob = base64.b64encode(f"to: {SUBJECT.email}".encode()).decode()
    add_items(built, [item(BYSTANDER, "conv-spell-3", f"Log line payload={blob} end.")])
    before = item_texts(built, "chat", "conv-spell-3")
    found = erase(built, "req-spell-3", SUBJECT)
    assert item_texts(built, "chat", "conv-spell-3") == before
    assert counted(found, "mention_unredactable") >= 1


def test_a_sharp_s_name_is_found_as_the_request_writes_it(home: Home, tmp_path: Path) -> None:
    """The request says `Strauß`; the bystander writes `Strauß` and `Strauss`, `Jürgen` and `Juergen`."""
    build_store(home, tmp_path)
    strauss = Subject(id="subj-js-3301", email="js@example.org", name="Jürgen Strauß")
    add_items(
        home,
        [
            item(strauss, "conv-js-1", "My own note about taxes."),
            item(BYSTANDER, "conv-spell-4", "Ask Jürgen Strauß, or Juergen Strauss, or Strauss, Jurgen."),
        ],
    )
    found = erase(home, "req-spell-4", strauss)
    for where, text in item_texts(home, "chat", "conv-spell-4").items():
        assert not oracle(text, strauss), (where, text)
    assert counted(found, "mention_ambiguous") == 0


# --- attribution: over-erasure nobody reported -------------------------------------------------------


def test_a_namesakes_own_item_stays_byte_for_byte_and_a_bystanders_name_is_reported(built: Home) -> None:
    add_items(
        built,
        [
            item(NAMESAKE, "conv-nms-1", "Annabel Quist here: move my pharmacy appointment."),
            item(BYSTANDER, "conv-spell-5", f"Annabel Quist ({SUBJECT.email}) asked for a refund."),
        ],
    )
    namesake_before = item_texts(built, "chat", "conv-nms-1")
    found = erase(built, "req-spell-5", SUBJECT)
    assert item_texts(built, "chat", "conv-nms-1") == namesake_before
    after = " ".join(item_texts(built, "chat", "conv-spell-5").values())
    assert "email" not in oracle(after, SUBJECT)  # unambiguous: redacted
    assert "name" in oracle(after, SUBJECT)  # a namesake carries it: kept, reported
    assert counted(found, "mention_ambiguous") >= 1


@pytest.mark.parametrize(
    "sentence",
    [
        "We went hiking in Jordan last spring.",
        "JORDAN, then Petra.",
        "Jor\u00addan's deserts",
        "a trip to %4Aordan and back",
    ],
)
def test_an_everyday_word_id_is_never_redacted_from_other_peoples_sentences(built: Home, sentence: str) -> None:
    jordan = Subject(id="jordan", email="jordan.k@example.org")
    add_items(built, [item(jordan, "conv-jd-1", "Book me a table for two."), item(BYSTANDER, "conv-spell-6", sentence)])
    before = item_texts(built, "chat", "conv-spell-6")
    found = erase(built, "req-spell-6", jordan)
    assert item_texts(built, "chat", "conv-spell-6") == before
    assert counted(found, "mention_ambiguous") >= 1


# --- generated: identifier kind x spelling x encoding x whose item ------------------------------------

assert SUBJECT.email is not None and SUBJECT.name is not None
SPELLINGS: dict[str, list[str]] = {
    "email": [SUBJECT.email, "annabel.quist+tag7@example.org", "Annabel.Quist@Example.org"],
    "phone": PHONES,
    "name": [SUBJECT.name, "Quist, Annabel", "Annabel Qu\u00adist", "ANNABEL\tQUIST", "Annabel \u200bQuist"],
    "id": [SUBJECT.id, "SUBJ-ANN-7731", "subj\u2011ann\u20117731"],
}


def encode(text: str, how: str, pick: int = 0) -> str:
    if how == "percent":
        return urllib.parse.quote(text, safe="")
    if how == "json":
        return json.dumps(text, ensure_ascii=True)[1:-1].replace("@", "\\u0040")
    if how == "html":
        return "".join(f"&#{ord(c)};" if not c.isalnum() or not c.isascii() else c for c in text)
    if how == "qp":
        return quopri.encodestring(text.encode("utf-8"), quotetabs=True).decode("ascii").replace("@", "=40")
    if how == "base64":
        return base64.urlsafe_b64encode((" " * (pick % 3) + text).encode("utf-8")).decode("ascii")
    return text


scenes = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(sorted(SPELLINGS)),
        "pick": st.integers(min_value=0, max_value=99),
        "encoding": st.sampled_from(["none", "percent", "json", "html", "qp", "base64"]),
        "whose": st.sampled_from(["bystander", "namesake", "own"]),
    }
)


@settings(max_examples=budget.examples(40), deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(s=scenes)
def test_generated_every_spelling_encoding_and_owner(s: dict[str, Any]) -> None:
    kind, whose, how = str(s["kind"]), str(s["whose"]), str(s["encoding"])
    options = SPELLINGS[kind]
    written = encode(options[int(s["pick"]) % len(options)], how, int(s["pick"]) // len(options))
    content = f"Note for the file: {written} called about the invoice."
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home = Home.resolve(root / "home", root / "evidence").ensure()
        build_store(home, root)
        owner = {"bystander": BYSTANDER, "namesake": NAMESAKE, "own": SUBJECT}[whose]
        extra = [item(owner, "conv-gen-1", content)]
        if whose != "namesake":  # the namesake exists in every namesake example only
            extra.append(item(NAMESAKE.model_copy(update={"name": "Quill Ormsby"}), "conv-gen-2", "Hello there."))
        add_items(home, extra)
        before = item_texts(home, "chat", "conv-gen-1")
        assert kind in oracle(before[next(k for k in before if k.startswith("archive"))], SUBJECT), s
        found = erase(home, "req-gen-1", SUBJECT)
        after = item_texts(home, "chat", "conv-gen-1")
        if whose == "own":
            assert all(
                not k.startswith(("archive", "session", "corpus")) or not oracle(v, SUBJECT) for k, v in after.items()
            ), s
            return
        ambiguous = whose == "namesake" and kind == "name"
        if ambiguous:
            assert after == before, s  # the namesake's own name in their own item: theirs
        elif how == "base64":
            assert after == before, s  # cannot be redacted in place: kept and reported
            assert counted(found, "mention_unredactable") >= 1, s
        else:
            for where, text in after.items():
                assert kind not in oracle(text, SUBJECT), (s, where, text)
            assert "called about the invoice" in " ".join(after.values()), s


# --- the eraser's search finds what the oracle finds, and its prefilter never drops it ---------------

OTHER = Identity.of(Subject(id="subj-other-1", name="Quill Ormsby", phone="+44 20 7946 0018"))
texts = st.lists(
    st.tuples(
        st.sampled_from(sorted(SPELLINGS)),
        st.integers(min_value=0, max_value=99),
        st.sampled_from(["none", "percent", "json", "html", "qp", "base64"]),
        st.sampled_from(["Note: ", "(", "\n", "mailto:", "\u00ab"]),
        st.sampled_from([" thanks.", ")", "\n", ".", "\u00bb"]),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=budget.examples(150), deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(parts=texts)
def test_generated_the_search_finds_every_spelling_the_oracle_finds(
    parts: list[tuple[str, int, str, str, str]],
) -> None:
    who = Identity.of(SUBJECT)
    written = []
    for kind, pick, how, before, after in parts:
        options = SPELLINGS[kind]
        written.append(before + encode(options[pick % len(options)], how, pick // len(options)) + after)
    for text in written:
        assert oracle(text, SUBJECT), text
        assert who.names_in(text), text
    kept = mentions.Prefilter([OTHER, who]).candidates(written)[1]
    assert set(range(len(written))) <= kept
