"""An id cut into other words than its own is found by the decoded views, as the rule finds it
(docs/matching.md 6.1b: consecutive words separated by exactly one character, whose canonical forms
joined equal the id's).

Found by the lead on 2026-12-06, looking at the class of the soft-hyphen finding: `u s r j d 4 4 7 1` and
`us rj d4 471` are the id `usr-jd-4471` to the rule on both sides, but the views read a file only around
triggers, and the id's triggers were its own tokens (`4471`): cut elsewhere, no token stands, no window
was read, and the verification said nothing was left. The class: an id of letters and digits cut at any
places, each cut one separator (ASCII punctuation or space, or a character beyond ASCII such as `·` or
`–`), in a plain file or as a SQLite value glued to the column before it. The oracle is the planting:
each case is built as 6.1b states it (pieces of word characters, exactly one separator between two, no
line break), so every one is the id to the rule, apart from either side's code.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from probes.views import scan_views
from tests import budget
from tests.views_plant import planted

SEPARATORS = [" ", ".", "-", "/", "_", ":", "\u00b7", "\u2013", "\u00a0"]
"""One character each, none a word character or a line break (U+00A0 is a space; `_` is a connector,
Pc, which 2.1 counts as a word character, so it is left out of the cuts below)."""

ids = st.from_regex(r"[a-z]{2,5}-[a-z0-9]{1,4}-[0-9]{2,6}", fullmatch=True).filter(
    lambda s: len(re.sub(r"\W", "", s)) >= 6
)


def _recut(value: str, cuts: list[bool], seps: list[str]) -> str:
    """The id's letters and digits, with one separator wherever `cuts` says, nothing elsewhere."""
    chars = re.sub(r"[\W_]", "", value)
    out = [chars[0]]
    for i, ch in enumerate(chars[1:]):
        if cuts[i % len(cuts)]:
            out.append(seps[i % len(seps)])
        out.append(ch)
    return "".join(out)


def _found(tmp: Path, text: str, where: str, value: str) -> dict[int, int]:
    store = planted(tmp, text, where, line="Bystander's note: {} (call back).\n")
    return scan_views(store, [("identifier", value)]).found


@settings(max_examples=budget.examples(120), deadline=None)
@given(
    value=ids,
    cuts=st.lists(st.booleans(), min_size=1, max_size=6),
    seps=st.lists(st.sampled_from([s for s in SEPARATORS if s != "_"]), min_size=1, max_size=3),
    where=st.sampled_from(["file", "sqlite"]),
)
@example(value="usr-jd-4471", cuts=[True], seps=[" "], where="file")  # u s r j d 4 4 7 1
@example(value="usr-jd-4471", cuts=[False, True], seps=[" "], where="file")  # us rj d4 47 1
def test_an_id_cut_anywhere_with_one_separator_is_found(
    tmp_path_factory: object, value: str, cuts: list[bool], seps: list[str], where: str
) -> None:
    text = _recut(value, cuts, seps)
    assume(text != re.sub(r"[\W_]", "", value) or where == "file")  # glued whole to the column: not a word
    tmp = Path(str(tmp_path_factory.mktemp("recut")))  # type: ignore[attr-defined]
    assert _found(tmp, text, where, value), (value, where, text)
    # The control: another id of the same shape is not read into this one.
    assert not _found(tmp, text, where, "zzq-qq-9090")
