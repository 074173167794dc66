"""The probes' implementation of the matching rule (`probes.rule`), section by section of docs/matching.md,
with the families of issue 33, and properties drawn by hypothesis."""

from __future__ import annotations

import hashlib
import json
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.rule import RULE_VERSION, Found, Person, Rule, _ucd, views, words
from probes.rule.text import ViewText
from tests import budget

BUDGET = settings(max_examples=budget.examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def spans(rule: Rule, text: str, kind: str | None = None) -> list[str]:
    """The text of every hit (of one kind)."""
    return [text[f.start : f.end] for f in rule.find(text) if kind is None or f.kind == kind]


def hits(rule: Rule, text: str) -> list[tuple[str, str, bool]]:
    """(kind, spanned text, ambiguous) of every hit."""
    return [(f.kind, text[f.start : f.end], f.ambiguous) for f in rule.find(text)]


def name_rule(*names: str) -> Rule:
    return Rule(Person(names=names))


# --- API ---------------------------------------------------------------------------------------------


def test_api_version_sorted_and_deduplicated() -> None:
    assert RULE_VERSION == "6"
    rule = Rule(Person(ids=("usr-jd-4471",), names=("Ann Lee",), emails=("lee@acme.com",)))
    text = "<p>Ann Lee</p> usr-jd-4471 lee@acme.com"
    found = rule.find(text)
    assert found == sorted(found)
    # The name is found in both views (raw and structure) at one span: one Found.
    assert [f for f in found if f.kind == "name"] == [Found("name", 3, 10, False)]
    assert {f.kind for f in found} == {"name", "id", "email"}
    assert Rule(Person()).find(text) == []


# --- 1.3 / 1.4: views and records --------------------------------------------------------------------


def test_1_3_structure_view_is_length_preserving_and_blanks_markup_and_keys() -> None:
    text = '<div class="a">x</div><b>y</b> {"first": "Ann", "tags": ["a", "b]"]}'
    view = views.structure_view(text)
    assert len(view) == len(text)
    assert view.startswith("\x1e" + " " * 14 + "x\x1e     ")  # block tags: U+001E then spaces
    assert "   y    " in view  # other tags: spaces
    assert '"first"' not in view and '"Ann"' in view  # a key and its colon become spaces, a value stays
    assert '"b "' in view  # every bracket is a space, inside a literal too (quotes are not paired)
    assert view.count("\x1e") == 2 + 2  # div open/close, then { }: brackets are spaces
    # h1-h6 are block tags (the tag name read as letters then digits)
    assert views.structure_view("<h2>t</h2>").startswith("\x1e   t\x1e")
    # a `<` not followed by a letter, `/`, `!` or `?` is no tag
    assert views.structure_view("a < b > c") == "a < b > c"
    # an unterminated literal: no key, brackets are spaces
    assert views.structure_view('"abc [x]') == '"abc  x '
    # JSON pasted into prose between quotes: its keys are found all the same
    pasted = 'They said: "Tool result: {"given_name": "Ann", "family_name": "Lee"}"'
    assert '"given_name"' not in views.structure_view(pasted) and '"Ann"' in views.structure_view(pasted)


def test_1_4_records_are_the_structure_views_in_every_view() -> None:
    # In the raw view the tag names and JSON keys are words, and one-letter ones would be initials (3.3);
    # but records are read on the structure view whichever view a hit is found in (1.4), so two paragraphs,
    # two list items or two JSON objects are never one name.
    rule = name_rule("Ann Lee")
    assert spans(rule, "<p>Ann</p><p>Lee</p>") == []
    assert spans(rule, '[{"n": "Ann"}, {"n": "Lee"}]') == []
    assert spans(rule, "<li>Ann</li><li>Lee</li>") == []
    assert spans(rule, "<p><b>Ann</b> <i>Lee</i></p>") == ["Ann</b> <i>Lee"]


def test_1_3_3_zero_width_view() -> None:
    rule = name_rule("Annabel Quist")
    assert spans(rule, "Annabel Qu\u200bist") == ["Annabel Qu\u200bist"]  # views 1-2: ignored
    assert spans(rule, "Annabel\u2060Quist") == ["Annabel\u2060Quist"]  # view 3: a space
    assert spans(rule, "<b>Annabel</b>\ufeffQuist") == ["Annabel</b>\ufeffQuist"]
    assert spans(rule, "Annabel\u00adQuist") == []  # a soft hyphen is not rewritten: one word


def test_1_4_records_separate_names() -> None:
    rule = name_rule("Ann Lee")
    assert spans(rule, "Ann\nLee") == ["Ann\nLee"]  # one line break: same record
    assert spans(rule, "Ann\n \nLee") == []  # a blank line
    assert spans(rule, "Ann\r\n\r\nLee") == []
    assert spans(rule, "Ann\x1eLee") == []  # U+001E
    assert spans(rule, "Ann\r\nLee") == ["Ann\r\nLee"]
    # one table row is one record, two rows are two
    assert spans(rule, "<table><tr><td>Ann</td><td>Lee</td></tr></table>") == ["Ann</td><td>Lee"]
    assert spans(rule, "<table><tr><td>Ann</td></tr><tr><td>Lee</td></tr></table>") == []
    # the values of one JSON object are one record; two objects are two
    assert spans(rule, json.dumps({"first": "Ann", "last": "Lee"})) == ['Ann", "last": "Lee']
    assert spans(rule, json.dumps([{"first": "Ann"}, {"last": "Lee"}])) == []


# --- 2: words ----------------------------------------------------------------------------------------


def test_2_words_and_canonical_forms() -> None:
    def canon(text: str) -> list[str]:
        return [w.canon for w in words.words(text)]

    # 2.6's examples
    assert canon("O’Brien O'Brien OBrien") == ["obrien"] * 3
    assert canon("Müller Иван ٤٥ usr_jd-4471") == ["muller", "ivan", "45", "usrjd4471"]
    assert canon("ｕｓｒ－ｊｄ－４４７１") == ["usrjd4471"]
    # 2.4: ignored characters neither separate nor belong
    assert canon("Jo\u00adhann Jo\u200bhann") == ["johann", "johann"]
    assert [w.text for w in words.words("\u200bAnn\u200b")] == ["Ann"]  # span: first to last word character
    # 2.3: a joiner joins only between two word characters
    assert canon("Ann--Lee -Lee Lee- Lee's") == ["ann", "lee", "lee", "lee", "lees"]
    assert words.possessive("Lee's") == "lee" and words.possessive("Lee’S") == "lee"
    assert words.possessive("'s") is None and words.possessive("Less") is None
    # 2.6 keeps only ASCII letters and digits
    assert canon("ʻOhana") == ["ohana"]
    # 2.2: each character-script character (with its marks) is a word; joiners do not join them
    assert canon("李娜-王") == ["李", "娜", "王"]
    assert [w.text for w in words.words("กี")] == ["กี"]
    assert canon("Ann李") == ["ann", "李"]
    # 2.7
    assert words.is_capitalised("Ann") and words.is_capitalised("李") and words.is_capitalised("4ever")
    assert not words.is_capitalised("ann")


def test_2_ascii_and_general_word_regexes_agree() -> None:
    text = "a-b c--d 'e' f_g `h` x-y-z 12-34 _ -"
    assert [m.span() for m in words.word_regex().finditer(text)] == [
        m.span() for m in words.ASCII_WORD_RE.finditer(text)
    ]


@pytest.mark.slow
def test_2_unicode_tables_match_the_interpreter() -> None:
    tables = _ucd.compute_tables()
    assert tables == {
        "WORD": _ucd.WORD,
        "MARK": _ucd.MARK,
        "IGNORED": _ucd.IGNORED,
        "DASH": _ucd.DASH,
        "PC": _ucd.PC,
        "DIGIT": _ucd.DIGIT,
    }


# --- 3: names ----------------------------------------------------------------------------------------


def test_3_names_in_markup_fields_and_with_middles() -> None:
    rule = name_rule("Ann Lee")
    assert spans(rule, "<b>Ann</b> <i>Lee</i>") == ["Ann</b> <i>Lee"]
    assert spans(rule, "<tr><td>Lee</td><td>Ann</td></tr>") == ["Lee</td><td>Ann"]  # either order
    assert spans(rule, '{"first": "Ann", "last": "Lee"}') == ['Ann", "last": "Lee']
    assert spans(rule, "Ann B. Lee") == ["Ann B. Lee"]  # an initial
    assert spans(rule, "Ann Marie Lee") == ["Ann Marie Lee"]  # a capitalised word
    assert spans(rule, "Ann B. C. Lee") == ["Ann B. C. Lee"]  # two words between
    assert spans(rule, "Ann B. C. D. Lee") == []  # three
    assert spans(rule, "Ann and Lee") == []  # a lower-case word between
    assert spans(name_rule("Ann Marie Lee"), "Ann marie Lee") == ["Ann marie Lee"]  # a middle name of the request
    assert spans(rule, "Lee, Ann") == ["Lee, Ann"]


def test_3_1_variants_and_apostrophes() -> None:
    texts = ("Hans Müller", "Hans Mueller", "Hans Muller", "Hans MÜLLER", "Hans Mu\u0308ller")
    for request in ("Hans Müller", "Hans Mueller", "Hans Mu\u0308ller"):
        rule = name_rule(request)
        for written in texts:
            assert spans(rule, f"by {written}.") == [written]
    # The variants are the request's part's only (3.1): a request `Muller` has no `ü` and no `ue`, so its one
    # form `muller` meets `Müller` and `Muller` but not `Mueller` (whose canonical form is `mueller`).
    muller = name_rule("Hans Muller")
    assert [w for w in texts if spans(muller, f"by {w}.")] == [
        "Hans Müller",
        "Hans Muller",
        "Hans MÜLLER",
        "Hans Mu\u0308ller",
    ]
    rule = name_rule("Seán O'Brien")
    assert spans(rule, "Sean O’Brien and Seán OBrien") == ["Sean O’Brien", "Seán OBrien"]


def test_3_4_character_names() -> None:
    spaced = name_rule("李 娜")
    assert spans(spaced, "我和李娜去了") == ["李娜"]  # inside CJK text
    assert spans(spaced, "李 娜") == ["李 娜"]
    assert spans(spaced, "娜李") == ["娜李"]  # the request wrote a space: swapped too
    assert spans(spaced, "李，娜") == []  # only white space or nothing between
    joined = name_rule("李娜")
    assert spans(joined, "李 娜 and 李娜") == ["李 娜", "李娜"]
    assert spans(joined, "娜李") == []  # no space in the request: no swap
    assert spans(joined, "李\n\n娜") == []  # never across a record
    assert spans(joined, "<b>李</b><i>娜</i>") == ["李</b><i>娜"]  # the structure view
    assert spans(joined, "李\u00ad娜") == []  # "only white space ... in the source": a soft hyphen breaks it
    assert spans(joined, "李\u200b娜") == ["李\u200b娜"]  # the zero-width view (1.3.3) reads a space there


def test_3_3_possessives_initials_and_pairs() -> None:
    rule = name_rule("Ann Lee")
    assert spans(rule, "Ann Lee's car, Ann Lee’s bike, ANN LEE'S") == ["Ann Lee's", "Ann Lee’s", "ANN LEE'S"]
    assert spans(name_rule("Ann Lees"), "Ann Lee's") == ["Ann Lee's"]  # the first form `lees`
    assert spans(rule, "Ann's Lee") == ["Ann's Lee"]
    assert spans(rule, "Ann J5 Lee") == ["Ann J5 Lee"]  # an initial: exactly one L* in its span
    assert spans(rule, "Ann Lee Ann") == ["Ann Lee", "Lee Ann"]  # every pair is a hit
    assert spans(name_rule("Lee Lee"), "Lee said") == []  # two different words
    assert spans(Rule(Person(ids=("usr-jd-4471",))), "usr-jd-4471's") == ["usr-jd-4471's"]  # 6 reads both forms
    assert spans(Rule(Person(emails=("lee@acme.com",))), "lee at acme dot com's") == []  # 4 the first only


def test_3_1_mixed_names_are_character_names_and_never_ambiguous() -> None:
    mixed = name_rule("王 Wei")
    assert spans(mixed, "王Wei, 王 Wei, Wei王, Wei 王, 王 x Wei") == ["王Wei", "王 Wei", "Wei王", "Wei 王"]
    assert hits(name_rule("李"), "李") == [("name", "李", False)]


def test_3_5_glued_parts_never_match() -> None:
    assert spans(name_rule("Li Na"), "Lina and LiNa") == []
    assert spans(name_rule("Ann"), "Annabel") == []
    assert spans(name_rule("Ann Lee"), "Ann Leeson and Joanna Lee") == []


def test_3_6_everyday_names_are_ambiguous_unless_capitalised() -> None:
    rule = name_rule("April May")
    assert hits(rule, "in april may be") == [("name", "april may", True)]
    assert hits(rule, "April May wrote") == [("name", "April May", False)]
    assert hits(name_rule("Will"), "Will said") == [("name", "Will", True)]  # one everyday word: always
    assert hits(name_rule("Annabel Quist"), "annabel quist") == [("name", "annabel quist", False)]


# --- 4: emails ---------------------------------------------------------------------------------------


def test_4_1_addresses_are_maximal() -> None:
    rule = Rule(Person(emails=("lee@acme.com",)))
    assert spans(rule, "mary-lee@acme.com lee@acme.com.au mary.lee@acme.com lee@acme.community") == []
    assert spans(rule, "Mail LEE@Acme.COM. Or lee+news@acme.com, <lee@acme.com>") == [
        "LEE@Acme.COM",
        "lee+news@acme.com",
        "lee@acme.com",
    ]


def test_4_1_local_part_and_domain_boundaries() -> None:
    # The local part is the run of word characters and `.`, `+`, `-`, `'` directly before the `@`, less
    # its leading non-word characters; `=`, `/`, `?` and a backquote are boundaries.
    rule = Rule(Person(emails=("lee@acme.com",)))
    text = "'lee@acme.com' ?email=lee@acme.com&x=1 /lee@acme.com `lee@acme.com` .lee@acme.com"
    assert spans(rule, text) == ["lee@acme.com"] * 5
    assert spans(rule, "x.lee@acme.com o'lee@acme.com lee@acme..com lee@acme.com_x") == []
    assert spans(rule, '(lee@acme.com) {lee@acme.com} "lee@acme.com" mailto:lee@acme.com') == ["lee@acme.com"] * 4
    # a domain's labels are outside the character-scripts: an IDN domain in CJK is found in punycode only
    cjk = Rule(Person(emails=("lee@例え.jp",)))
    assert spans(cjk, "lee@例え.jp lee@xn--r8jz45g.jp") == ["lee@xn--r8jz45g.jp"]


def test_4_2_punycode_both_ways() -> None:
    text = "a jane@xn--bcher-kva.example b jane@bücher.example"
    for request in ("jane@bücher.example", "jane@xn--bcher-kva.example", "Jane@BÜCHER.example"):
        assert spans(Rule(Person(emails=(request,))), text) == ["jane@xn--bcher-kva.example", "jane@bücher.example"]


def test_4_3_spelt_out() -> None:
    rule = Rule(Person(emails=("jane.doe@mail.example",)))
    assert spans(rule, "write to jane dot doe at mail dot example today") == ["jane dot doe at mail dot example"]
    assert spans(rule, "JANE DOE AT MAIL EXAMPLE") == ["JANE DOE AT MAIL EXAMPLE"]
    assert spans(rule, "jane.doe [at] mail [dot] example.") == ["jane.doe [at] mail [dot] example"]
    assert spans(rule, "mary.jane doe at mail dot example") == []  # preceded by `.`
    assert spans(rule, "jane doe at mail dot example dot org") == []  # followed by the word dot
    assert spans(rule, "jane doe at mail dot example.org") == []  # followed by `.` and a word character
    assert spans(rule, "jane doe at mail dot\n\nexample") == []  # one record


def test_4_4_digests() -> None:
    address = " Lee@Acme.com "
    rule = Rule(Person(emails=(address,)))
    md5 = hashlib.md5(b"lee@acme.com").hexdigest()
    sha256 = hashlib.sha256(b"lee@acme.com").hexdigest()
    sha1 = hashlib.sha1(b"lee@acme.com").hexdigest()
    text = f"https://www.gravatar.com/avatar/{md5}?s=80 https://gravatar.com/{sha256.upper()} {sha1}"
    assert spans(rule, text) == [md5, sha256.upper(), sha1]
    assert spans(rule, f"x{md5}") == []  # a word equal to it, not a part of one


# --- 5: phones ---------------------------------------------------------------------------------------


def test_5_phones() -> None:
    rule = Rule(Person(phones=("+44 20 7946 0001",)))
    assert spans(rule, "call 020 7946 0001 or +44 20 7946 0001") == ["020 7946 0001", "+44 20 7946 0001"]
    assert spans(rule, "Eastern-Arabic ٠٢٠٧٩٤٦٠٠٠١, Persian ۰۲۰ ۷۹۴۶ ۰۰۰۱") == ["٠٢٠٧٩٤٦٠٠٠١", "۰۲۰ ۷۹۴۶ ۰۰۰۱"]
    assert spans(rule, "INV-2079460001 a/2079460001 x2079460001") == []  # 5.2: part of another token
    assert spans(rule, "- 2079460001 -") == ["2079460001"]
    assert spans(rule, "020 7946 0002") == []  # another number
    assert spans(rule, "<td>020 7946</td>\n<td>0001</td>") == []
    many = "\n".join(["order 1234 5678"] * 50 + ["tel: ٠٢٠ ٧٩٤٦ ٠٠٠١"] + ["x 460001"] * 3 + ["+44 20 7946 0001"])
    assert spans(rule, many) == ["٠٢٠ ٧٩٤٦ ٠٠٠١", "+44 20 7946 0001"]


def test_5_1_request_phone_with_00_and_its_main_region() -> None:
    rule = Rule(Person(phones=("0044 20 7946 0001",)))
    assert spans(rule, "020 7946 0001") == ["020 7946 0001"]
    # +1: the main region of the country code (US) is the default for national numbers
    us = Rule(Person(phones=("+1 212 555 0100",)))
    assert spans(us, "(212) 555-0100") == ["(212) 555-0100"]


def test_5_3_unparsed_phone_matches_nothing() -> None:
    rule = Rule(Person(phones=("020 7946 0001", "not a phone")))
    assert rule.find("020 7946 0001") == []
    assert rule.unparsed_phones == ("020 7946 0001", "not a phone")


# --- 6: ids ------------------------------------------------------------------------------------------


def test_6_ids() -> None:
    rule = Rule(Person(ids=("usr-jd-4471",)))
    assert hits(rule, "usr-jd-4471 USR_JD_4471 ｕｓｒ－ｊｄ－４４７１ usr.jd.4471") == [
        ("id", "usr-jd-4471", False),
        ("id", "USR_JD_4471", False),
        ("id", "ｕｓｒ－ｊｄ－４４７１", False),
        ("id", "usr.jd.4471", False),  # 6.1b: one separator between its words
    ]
    assert hits(rule, "usr jd 44712, usr\njd 4471, usr  jd 4471") == []  # 6.1b: whole words, one separator
    numeric = Rule(Person(ids=("48213",)))
    assert hits(numeric, "a48213f 48213") == [("id", "48213", True)]  # 6.2: digits only
    assert hits(Rule(Person(ids=("Garden",))), "the garden") == [("id", "garden", True)]  # an ordinary word


# --- properties ---


def _reference_words(text: str) -> list[tuple[int, int]]:
    """Section 2 read character by character, the slow way: the spans of the words of `text`."""

    def cat(c: str) -> str:
        return unicodedata.category(c)

    def script(c: str) -> bool:
        return any(a <= ord(c) <= b for a, b in words.CHAR_SCRIPT_RANGES)

    def word(c: str) -> bool:
        return (cat(c)[0] in "LM" or cat(c) in ("Nd", "Pc")) and not script(c)

    def ignored(c: str) -> bool:
        return cat(c) == "Cf"

    def joiner(c: str) -> bool:
        return (c in words.JOINER_CHARS or cat(c) == "Pd") and not script(c)

    out: list[tuple[int, int]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if script(c):
            end = j = i + 1
            while j < n and (ignored(text[j]) or cat(text[j])[0] == "M"):
                j += 1
                if cat(text[j - 1])[0] == "M":
                    end = j
            out.append((i, end))
            i = end
        elif word(c):
            end = j = i + 1
            while j < n:
                d = text[j]
                if ignored(d):
                    j += 1
                elif word(d):
                    j += 1
                    end = j
                elif joiner(d):
                    k = j + 1
                    while k < n and ignored(text[k]):
                        k += 1
                    if k < n and word(text[k]):
                        j = k + 1
                        end = j
                    else:
                        break
                else:
                    break
            out.append((i, end))
            i = end
        else:
            i += 1
    return out


_WORDY = st.text(
    alphabet=st.sampled_from(
        [*"aZé_0٤ \n.,-'’\u00ad\u200b\u0301\u0e31กข李娜ｶﾞ\u30fb\u30a0\u2212\uff0d`´\u02bc", "\U00020001", "\U0001d400"]
    ),
    max_size=60,
)


@BUDGET
@given(text=_WORDY)
def test_property_words_match_a_character_by_character_reading(text: str) -> None:
    assert [(w.start, w.end) for w in words.words(text)] == _reference_words(text)
    assert [m.span() for m in words.word_regex().finditer(text)] == _reference_words(text)
    if text.isascii():
        assert [m.span() for m in words.ASCII_WORD_RE.finditer(text)] == _reference_words(text)


_MARKUP = st.lists(
    st.sampled_from(
        [
            "<p>",
            "</p>",
            "<b>",
            "</b>",
            "<tr>",
            "<td>",
            '<a href="x">',
            "<!-- c -->",
            '{"k": ',
            '"v"',
            "}",
            "[",
            "]",
            ", ",
            "Ann",
            "Lee",
            " ",
            "\n",
            "\n\n",
            '"',
            "\\",
            ":",
            "<",
            ">",
            "李",
            "x-y",
        ]
    ),
    max_size=25,
).map("".join)


@BUDGET
@given(text=_MARKUP)
def test_property_structure_view_words_are_the_unblanked_raw_words(text: str) -> None:
    view = views.structure_view(text)
    assert len(view) == len(text)
    assert ViewText.cut(text).restrict(view).starts == ViewText.cut(view).starts


# --- properties -------------------------------------------------------------------------------------

_SEPARATORS = st.sampled_from([" ", "  ", "\n", ", ", " - ", "</b> <b>", "\t", '", "', "\u00a0", " (", ") "])
_FILLER = st.text(alphabet=st.sampled_from("abcdefgh ,.;:!?\n-'\"<>{}[]0123"), max_size=40)
_NAME_WORD = st.from_regex(r"\A[A-Z][a-z]{3,8}\Z")


@BUDGET
@given(given_=_NAME_WORD, family=_NAME_WORD, sep=_SEPARATORS, before=_FILLER, after=_FILLER)
def test_property_planted_name_is_found_at_its_span(
    given_: str, family: str, sep: str, before: str, after: str
) -> None:
    rule = name_rule(f"{given_} {family}")
    planted = f"{given_}{sep}{family}"
    text = f"{before} {planted} {after}"
    start = len(before) + 1
    assert (start, start + len(planted)) in {(f.start, f.end) for f in rule.find(text) if f.kind == "name"}


@BUDGET
@given(given_=_NAME_WORD, family=_NAME_WORD, glue=st.sampled_from("abcxyzé0ß"), side=st.booleans())
def test_property_a_glued_letter_removes_the_hit(given_: str, family: str, glue: str, side: bool) -> None:
    rule = name_rule(f"{given_} {family}")
    assert spans(rule, f"x {given_} {family} y")
    glued = f"x {given_}{glue} {family} y" if side else f"x {given_} {glue}{family} y"
    assert spans(rule, glued) == []


@BUDGET
@given(text=st.text(max_size=120))
def test_property_views_and_skeleton(text: str) -> None:
    view = views.structure_view(text)
    assert len(view) == len(text)
    raw = ViewText.cut(text)
    # the structure view's words are the raw words it did not blank
    assert raw.restrict(view).starts == ViewText.cut(view).starts
    # every canonical form outside the character-scripts is in the skeleton (the prefilter is sound)
    sk = words.skeleton(text)
    assert all(c in sk for c in raw.canon if c.isascii())


@BUDGET
@given(
    text=st.text(
        alphabet=st.sampled_from(list("Ann Lee@acme.com 020 7946 0001 +44 <b>{}\"':-\n\x1e李娜usr-jd-4471٠٢")),
        max_size=80,
    )
)
def test_property_find_is_consistent(text: str) -> None:
    rule = Rule(
        Person(
            ids=("usr-jd-4471",),
            emails=("lee@acme.com",),
            names=("Ann Lee", "李娜"),
            phones=("+44 20 7946 0001",),
        )
    )
    found = rule.find(text)
    assert found == sorted(set(found))
    assert len({(f.kind, f.start, f.end) for f in found}) == len(found)
    assert all(0 <= f.start < f.end <= len(text) for f in found)


_PLAIN = st.text(alphabet=st.sampled_from("abc XYZ,.;!?\n"), max_size=30)


@BUDGET
@given(
    before=_PLAIN,
    after=_PLAIN,
    local=st.from_regex(r"\A[a-z]{1,6}(?:\.[a-z]{1,6})?\Z"),
    tag=st.sampled_from(["", "+news", "+x1"]),
    upper=st.booleans(),
)
def test_property_planted_email_is_found_at_its_span(
    before: str, after: str, local: str, tag: str, upper: bool
) -> None:
    rule = Rule(Person(emails=(f"{local}@acme.example",)))
    planted = f"{local}{tag}@acme.example"
    planted = planted.upper() if upper else planted
    text = f"{before} {planted} {after}"
    start = len(before) + 1
    assert ("email", start, start + len(planted)) in {(f.kind, f.start, f.end) for f in rule.find(text)}


_GB = ["+44 20 7946 0001", "020 7946 0001", "+442079460001", "(020) 7946 0001", "٠٢٠ ٧٩٤٦ ٠٠٠١", "۰۲۰۷۹۴۶۰۰۰۱"]


@BUDGET
@given(before=_PLAIN, after=_PLAIN, written=st.sampled_from(_GB), lines=st.integers(0, 3))
def test_property_planted_phone_is_found_at_its_span(before: str, after: str, written: str, lines: int) -> None:
    rule = Rule(Person(phones=("+44 20 7946 0001",)))
    prefix = "order 1234 5678\n" * lines + before + " "
    text = f"{prefix}{written} {after}"
    assert [(f.kind, f.start, f.end) for f in rule.find(text)] == [("phone", len(prefix), len(prefix) + len(written))]


@BUDGET
@given(text=st.text(max_size=200))
def test_property_find_never_fails_on_any_text(text: str) -> None:
    rule = Rule(
        Person(
            ids=("usr-jd-4471", "48213"),
            emails=("jane.doe@bücher.example", "lee@acme.com"),
            names=("Ann Lee", "李 娜", "April May", "Hans Müller"),
            phones=("+44 20 7946 0001", "+1 212 555 0100"),
        )
    )
    for f in rule.find(text):
        assert 0 <= f.start < f.end <= len(text)
        assert f.kind in ("id", "email", "name", "phone")
