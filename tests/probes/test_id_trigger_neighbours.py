"""An id's token opens a window only where its neighbours allow the id (`probes.matcher._plausible`): the
letters and digits around `subj` in `subject_id` spell no piece of `subj-zz-000123`, and that key is in
every row of a store (docs/benchmarks.md, 2026-12-05). The generator spells ids every way the rule and
the text views read them (escapes of each kind, per character and between tokens, full-width and other
scripts' letters and digits, format characters, case), beside decoys and escapes' letters, and checks
the narrowed triggers against every token occurrence opening a window (the old reading, kept here as
the oracle): the same ids found, in raw bytes and in SQLite's short values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes import matcher
from probes.matcher import Matcher
from probes.view_payloads import FileScan, read_triggered
from probes.view_sqlite import _short_values
from tests import budget

IDS = ["subj-zz-000123", "usr_jd-4471", "CUST-8841", "ab12cd", "subj-0001"]


def _char(c: str, how: str) -> str:
    if how == "percent":
        return "".join(f"%{b:02X}" for b in c.encode())
    if how == "json":
        return f"\\u{ord(c):04x}"
    if how == "entity":
        return f"&#{ord(c)};"
    if how == "entity-bare":  # an HTML parser reads a numeric reference without its `;` too
        return f"&#{ord(c)}"
    if how == "hex-entity":
        return f"&#x{ord(c):x};"
    if how == "qp":
        return "".join(f"={b:02X}" for b in c.encode())
    if how == "upper":
        return c.upper()
    if how == "fullwidth" and "!" <= c <= "~":
        return chr(ord(c) - 0x21 + 0xFF01)
    if how == "script":  # Arabic-Indic digits, Cyrillic letters that transliterate to the same
        if c.isdigit():
            return chr(0x0660 + int(c))
        return {"a": "\u0430", "e": "\u0435", "o": "\u043e", "s": "\u0455", "j": "\u0458", "c": "\u0441"}.get(c, c)
    if how == "soft-hyphen":
        return c + "\u00ad"
    return c


HOWS = ["plain"] * 6 + [
    "percent",
    "json",
    "entity",
    "entity-bare",
    "hex-entity",
    "qp",
    "upper",
    "fullwidth",
    "script",
    "soft-hyphen",
]
SEPARATORS = ["-", "_", " ", ".", "", "%2D", "\\u002d", "&#45;", "&#45", "=2D", "\u2011", "\u00ad", "'", "\\n"]
AROUND = ["", " ", "x", "7", "\\n", "\\t", "%2D", "=2D", "&#45", "&#45;", "\\u002d", "_", '"', "%20", "&amp", "/", "Z"]
DECOYS = ["subject_id", "subj-0002", "user-000123", "000123x", "4471", "cust", "abc12cd", "subjzz000124", ""]


@st.composite
def spellings(draw: st.DrawFn) -> tuple[str, str, str]:
    """(id, the text with the decoy as tildes, the text)."""
    sid = draw(st.sampled_from(IDS))
    tokens = [t for t in sid.replace("_", "-").split("-") if t]
    pieces: list[str] = []
    for k, token in enumerate(tokens):
        if k:
            pieces.append(draw(st.sampled_from(SEPARATORS)))
        uniform = draw(st.booleans())
        how = draw(st.sampled_from(HOWS))
        pieces += [_char(c, how if uniform else draw(st.sampled_from(HOWS))) for c in token]
    before, after = draw(st.sampled_from(AROUND)), draw(st.sampled_from(AROUND))
    decoy = draw(st.sampled_from(DECOYS))
    gap = " " * draw(st.sampled_from([1, 40, 700, 2000]))
    text = draw(st.sampled_from(["{}", '{{"who": "{}", "n": 1}}', "row\x00{}\x00", "<p>{}</p>"]))
    body = text.format(before + "".join(pieces) + after)
    # the text, and the same with the decoy written as tildes (no word, and no JSON either)
    layout = draw(st.sampled_from(["{d}{g}{b}", "{b}{g}{d}", "{b}"]))
    return sid, layout.format(d="~" * len(decoy), g=gap, b=body), layout.format(d=decoy, g=gap, b=body)


def _found(sid: str, data: bytes) -> tuple[set[int], set[int]]:
    needles = [("identifier", sid)]
    raw = FileScan(Matcher(needles, once=True), {}, [])
    read_triggered(raw, data, 0, match_windows=True)
    values = FileScan(Matcher(needles, once=True), {}, [])
    _short_values(values, [b"nothing", *data.split(b"\x00"), b"subject_id"], {})
    return set(raw.hits), set(values.hits)


@settings(max_examples=budget.examples(600), deadline=None)
@given(spellings())
def test_narrowed_id_triggers_find_what_every_token_occurrence_finds(case: tuple[str, str, str]) -> None:
    sid, alone, text = case
    got = _found(sid, text.encode("utf-8"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(matcher, "_plausible", lambda *_a: True)
        old_alone, old = _found(sid, alone.encode("utf-8")), _found(sid, text.encode("utf-8"))
    # Every spelling the old reading finds without the decoy is found, and nothing more. A spelling none
    # of whose tokens is written out (`s\xadu\xadb\xadj\xad-000%31`) is found by neither reading alone:
    # the old one found it only when an unrelated word that starts with a token (`subject_id`) stood
    # within a window of it.
    for new, was_alone, was in zip(got, old_alone, old, strict=True):
        assert was_alone <= new <= was


def test_a_key_that_starts_with_the_ids_token_opens_no_window() -> None:
    m = Matcher([("identifier", "subj-zz-000123")], once=True)
    assert [t for t in m.triggers(b'{"subject_id": "user-000123x"}') if t[0] >= len(matcher.GENERIC_NAMES)] == []
    # ... while the id, its tokens escaped or glued to an escape's letters, does
    for spelt in (b"subj-zz-000123", b"%2Dsubj%2Dzz%2D000123", b"\\nSUBJ_zz_000123", b"subjzz000123", b"subj zz"):
        assert [t for t in m.triggers(spelt) if t[0] >= len(matcher.GENERIC_NAMES)], spelt
