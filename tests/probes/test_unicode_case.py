"""SQLite's own `lower()` folds ASCII letters only: `lower('Greta Östberg')` is 'greta Östberg'.

The probes compare names the store holds with the subject's spellings lower-cased in Python. Where the
store's side was lower-cased by SQL, a name with a capital non-ASCII letter (Ö, Ä, Ł, Ø, É, Я, Σ)
never compared equal: a namesake's own name was not seen as theirs, so the subject's request ended
`residue` for ever (red team, issue 22: every namesake named Östberg), and a person entity named by the
subject in such a spelling was not counted by the semantic probe.
"""

from __future__ import annotations

from pathlib import Path

import apsw
from hypothesis import given, settings
from hypothesis import strategies as st

from erasure.sqlite import connect
from erasure.subject import Subject
from memory.ingest import ingest
from memory.items import MemoryItem
from memory.schema import create
from probes.context import ProbeContext
from probes.fingerprint import take_fingerprint
from probes.semantic import measure
from probes.store_facts import StoreFacts
from tests import budget


def _store(path: Path, people: list[tuple[str, str]]) -> None:
    conn = create(path)
    items = [
        MemoryItem.model_validate(
            {
                "source": "chat",
                "source_ref": f"conv-{sid}",
                "subject": {"id": sid, "name": name},
                "content": f"Hello, this is {name}: my walnut shelves order is late.",
            }
        )
        for sid, name in people
    ]
    ingest(conn, path, items)
    conn.close()


def _facts(path: Path) -> tuple[apsw.Connection, StoreFacts]:
    conn = connect(path / "memory.db", readonly=True)
    return conn, StoreFacts(conn)


def test_a_namesake_named_with_a_capital_umlaut_owns_the_name(tmp_path: Path) -> None:
    _store(tmp_path, [("usr-a", "Greta Östberg"), ("usr-b", "Greta Östberg")])
    conn, facts = _facts(tmp_path)
    try:
        assert facts.belongs_to_someone_else("Greta Östberg", {"usr-a"})
        assert facts.belongs_to_someone_else("greta östberg", {"usr-a"})
        assert not facts.belongs_to_someone_else("Greta Östberg", {"usr-a", "usr-b"})
    finally:
        conn.close()


def test_the_semantic_probe_counts_an_entity_named_with_a_capital_umlaut(tmp_path: Path) -> None:
    _store(tmp_path, [("usr-a", "Ölof Ängström")])
    subject = Subject(id="usr-a", name="Ölof Ängström")
    ctx = ProbeContext(tmp_path, subject, take_fingerprint(tmp_path, subject))
    named = {m.method: m for m in measure(ctx)}["entities-by-identifier"]
    assert named.residue >= 1, named


CAPITALS = "ÖÄÜÉÈÂÇÑŁØÅŠŽČŐŰÍÓÚÝÆŒЯБΣΔ"
names = st.builds(
    lambda c1, rest1, c2, rest2: f"{c1}{rest1} {c2}{rest2}",
    st.sampled_from(CAPITALS + "ABKM"),
    st.text(alphabet="aeiloprstnß", min_size=2, max_size=7),
    st.sampled_from(CAPITALS),
    st.text(alphabet="aeiloprstnüö", min_size=2, max_size=7),
)


@settings(max_examples=budget.examples(25), deadline=None)
@given(name=names, spelled=st.sampled_from(["as is", "lower", "upper"]))
def test_any_capital_letter_of_a_namesake_name_is_folded_as_python_folds_it(name: str, spelled: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d)
        _store(path, [("usr-a", name), ("usr-b", name)])
        # The oracle: Python's lower() of both sides, as a person would compare them.
        asked = {"as is": name, "lower": name.lower(), "upper": name.upper()}[spelled]
        if asked.lower() != name.lower():  # e.g. ß upper-cases to SS: not the same string lower-cased
            return
        conn, facts = _facts(path)
        try:
            assert facts.belongs_to_someone_else(asked, {"usr-a"}), (name, asked)
        finally:
            conn.close()
