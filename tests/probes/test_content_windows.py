"""Content windows are cut at whole words of the text they come from.

A window that begins or ends inside a word ("mann discussed general matters" out of "Großmann
discussed general matters") is not a phrase the full-text index holds (its tokens are whole words), so
the check that withholds a window other people's frames also hold could not see a namesake's
identical sentence: the subject's request then ended `residue` forever (issue 22, red team).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from probes.needles import plain_windows
from tests import budget


def at_word_boundaries(window: str, text: str) -> bool:
    """Oracle: some occurrence of `window` in `text` neither starts nor ends inside a word."""
    start = text.find(window)
    while start != -1:
        end = start + len(window)
        before_ok = start == 0 or not (text[start - 1].isalnum() and window[0].isalnum())
        after_ok = end == len(text) or not (text[end].isalnum() and window[-1].isalnum())
        if before_ok and after_ok:
            return True
        start = text.find(window, start + 1)
    return False


def test_a_name_with_a_sharp_s_does_not_leave_a_word_fragment_in_a_window() -> None:
    text = "Tobias Großmann discussed general matters in chat. They said: hello there"
    windows = plain_windows(text)
    assert windows, "the sentence has plain runs long enough for a window"
    assert all(not w.startswith("mann") for w in windows), windows
    assert all(at_word_boundaries(w, text) for w in windows), windows


def test_a_window_ending_before_an_umlaut_word_drops_the_fragment() -> None:
    text = "Hello, this is a note to Herr Müller"
    windows = plain_windows(text)
    assert windows and all(at_word_boundaries(w, text) for w in windows), windows


ascii_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=9)
accented_word = st.builds(
    lambda a, c, b: a + c + b,
    st.text(alphabet="abcdefghij", max_size=5),
    st.sampled_from(["ß", "ü", "ö", "é", "ø", "ł", "ç", "ñ", "я", "\u00ad"]),
    st.text(alphabet="klmnopqrst", max_size=5),
)
separator = st.sampled_from([" ", " ", " ", ", ", ": ", ". ", " (", ") ", "\n", " \u201c", "\u201d "])


@settings(max_examples=budget.examples(300), deadline=None)
@given(st.lists(st.tuples(st.one_of(ascii_word, ascii_word, accented_word), separator), min_size=1, max_size=40))
def test_every_window_is_made_of_whole_words(parts: list[tuple[str, str]]) -> None:
    text = "".join(w + s for w, s in parts)
    for window in plain_windows(text, limit=5):
        assert at_word_boundaries(window, text), (window, text)
