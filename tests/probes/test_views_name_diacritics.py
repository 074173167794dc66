"""A name written with diacritics the request did not write is found by the decoded views, as the rule
finds it (docs/matching.md 2.6: a word's canonical form is its transliteration, so `Jóhann Quïst` is
`Johann Quist`).

Found by the lead on 2026-12-06, probing the views with the rule's own spellings: a request for `Jose
Garcia` and a file that says `José García` meet in the rule, but the views read a file only around
triggers, and a name's triggers were its tokens as the request spelled them: with a diacritic on every
third letter no fragment stood, no window was read, and the verification said nothing was left. The class:
any letters of the name's words given diacritics (precomposed, or a base letter and combining marks), in
any letter case, in a plain file or as a SQLite value glued to the column before it. The oracle is the
planting: the accented letters are written out here with the letter each stands for.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from probes.views import scan_views
from tests import budget
from tests.views_plant import planted

ACCENTED = {
    "a": "áàâäãåāăą",
    "c": "çćčĉ",
    "e": "éèêëēėęě",
    "i": "íìîïīį",
    "n": "ñńňņ",
    "o": "óòôöõōő",
    "s": "śšşș",
    "u": "úùûüūůű",
    "y": "ýÿ",
    "z": "źżž",
    "g": "ğģ",
    "r": "řŕ",
}
"""Precomposed letters with diacritics, by the letter each transliterates to (written out here)."""
COMBINING = "\u0301\u0300\u0308\u0302\u030c\u0327"
"""Acute, grave, diaeresis, circumflex, caron, cedilla: written after a base letter."""

NAMES = ["Johann Quist", "Jose Garcia", "Annabel Szczepanski", "Renee Oconnor", "Zoran Lindqvist", "Marcus Oyelaran"]


def _accent(name: str, picks: list[int], decomposed: bool, upper: bool) -> str:
    out = []
    for i, ch in enumerate(name):
        low = ch.lower()
        if low in ACCENTED and picks[i % len(picks)] % 3 == 0:
            if decomposed:
                out.append(ch + COMBINING[picks[i % len(picks)] % len(COMBINING)])
                continue
            new = ACCENTED[low][picks[i % len(picks)] % len(ACCENTED[low])]
            out.append(new.upper() if ch.isupper() else new)
        else:
            out.append(ch)
    text = "".join(out)
    return text.upper() if upper else text


def _found(tmp: Path, text: str, where: str, name: str) -> dict[int, int]:
    store = planted(tmp, text, where, line="Bystander's note: {} called about the walnut shelves.\n")
    return scan_views(store, [("identifier:name", name)]).found


@settings(max_examples=budget.examples(120), deadline=None)
@given(
    name=st.sampled_from(NAMES),
    picks=st.lists(st.integers(0, 29), min_size=1, max_size=7),
    decomposed=st.booleans(),
    upper=st.booleans(),
    where=st.sampled_from(["file", "sqlite"]),
)
@example(name="Johann Quist", picks=[0, 1, 2], decomposed=False, upper=False, where="file")  # Jóhãnn Qüíst
def test_a_name_written_with_diacritics_is_found(
    tmp_path_factory: object, name: str, picks: list[int], decomposed: bool, upper: bool, where: str
) -> None:
    text = _accent(name, picks, decomposed, upper)
    tmp = Path(str(tmp_path_factory.mktemp("accents")))  # type: ignore[attr-defined]
    assert _found(tmp, text, where, name), (name, where, text)
    # The control: a name the text does not hold.
    assert not _found(tmp, text, where, "Imogen Thistlewood")
