"""The matching rule, the probes' implementation: what counts as the person (docs/matching.md, version 6).

The rule is implemented twice, by code that shares nothing: here, for verification, and on the erasing
side. `tests/probes/test_matching_differential.py` compares both on generated texts; section numbers in comments
are those of docs/matching.md.

`Rule(person).find(text)` returns every hit of the person in the text read in the raw view (1.3.1) and
the structure view (1.3.2); the escape views of the decoders (1.3.3) are the caller's (the probes'
decoders), each decoded text being passed here in turn.

Speed: everything that depends only on the person is compiled once in `Rule.__init__`. `find` prefilters
cheaply: the word-based patterns (names, ids, spelt-out emails, digests) run only when their canonical
forms occur in the text's skeleton (`probes.rule.words.skeleton`, a superset of every word's canonical
form), addresses only when the text holds `@`, phones only when the text's digits (every script, as
ASCII) hold the last 6 digits of a subject's national number. The words are cut once, on the raw view;
the structure view's words are the raw ones it did not blank.

Readings taken where docs/matching.md leaves a choice (each also commented where it is taken):
1.3.2 tags are blanked first, JSON literals recognised on the tag-blanked text; a key's white space is
`str.isspace`, and the whole key becomes spaces. 1.3.3 the zero-width views are read like views 1 and 2
(the structure view's zero-width view is the structure view with the three characters as spaces).
1.4 a line break is CR LF, CR or LF; a blank line's white space excludes line breaks.
2.2 every character in the ranges is a word, whatever its category. 2.3 a joiner joins only when it
stands directly (ignored characters skipped) between two word characters. 2.6 U+02BC is dropped
wherever it stands in a word; a character-script word drops ignored characters too; the possessive
test is made on the word without its ignored characters.
3.1 a consonant is an ASCII letter other than a e i o u; the umlauts are read in NFC; text words have
no variants. 3.4 the swapped orders are one swap of two adjacent space-separated groups at a time;
the gap is read on the source characters: white space only (an ignored character there breaks it).
4.2 the request address splits at its last `@`. 4.3 the spelt words are those of the address as 4.2
compares it (no `+tag`, Unicode domain); "followed by the word dot" is the next word in any record.
4.4 the digests are of `address.strip().lower()` in UTF-8 and a word is compared in canonical form.
5.1 the leading `00` is looked for after surrounding white space is removed. 5.2 a letter or digit is
a category L* or Nd character. 6.2 "digits only" is read on the canonical form. Two hits at one span
with different flags: unambiguous.
"""

from __future__ import annotations

from dataclasses import dataclass

from probes.rule import emails, ids, names, phones, views, words
from probes.rule.text import ViewText

RULE_VERSION = "6"

__all__ = ["RULE_VERSION", "Found", "Person", "Rule"]


@dataclass(frozen=True)
class Person:
    """One subject's identity (1.1): every value of each kind (a confirmed alias adds more)."""

    ids: tuple[str, ...] = ()
    emails: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    phones: tuple[str, ...] = ()


@dataclass(frozen=True, order=True)
class Found:
    """One hit (7.1): kind ("id" | "email" | "name" | "phone"), source offsets, ambiguity."""

    kind: str
    start: int
    end: int
    ambiguous: bool


def _ascii_targets_in(targets: tuple[str, ...], skeleton: str) -> bool:
    # A canonical form outside ASCII only comes from a character-script word (2.6): the skeleton cannot
    # rule it out.
    return all(t in skeleton for t in targets if t.isascii())


class Rule:
    """The rule compiled for one person."""

    def __init__(self, person: Person) -> None:
        """Compile every identifier of `person` once (parsing, canonical forms, variants, frequencies)."""
        self.person = person
        self._names = [p for p in (names.compile_name(n) for n in dict.fromkeys(person.names)) if p is not None]
        self._emails = [emails.compile_email(e) for e in dict.fromkeys(person.emails)]
        self._ids = [p for p in (ids.compile_id(i) for i in dict.fromkeys(person.ids)) if p is not None]
        self._phones = [p for p in (phones.compile_phone(v) for v in dict.fromkeys(person.phones)) if p is not None]
        # 5.3: the request's phones that cannot be parsed match nothing (the pack says `phone_unparsed`).
        self.unparsed_phones = tuple(v for v in dict.fromkeys(person.phones) if phones.compile_phone(v) is None)
        self._wordy = bool(self._names or self._ids or self._emails)

    def find(self, text: str) -> list[Found]:
        """Every hit of the person in `text` read in views 1.3.1 (raw), 1.3.2 (structure) and 1.3.3
        (zero-width), deduplicated by (kind, start, end), sorted. The decoders' escape views (1.3.4) are
        NOT applied here."""
        hits: dict[tuple[str, int, int], bool] = {}
        # Which word-based patterns can occur at all. The structure view's words are a subset of the raw
        # view's (1.3.2 only blanks whole runs between separators), so the raw text's skeleton bounds both.
        name_ps: list[names.NamePattern] = []
        id_ps: list[ids.IdPattern] = []
        spelt_ps: list[emails.EmailPattern] = []
        digest_ps: list[emails.EmailPattern] = []
        if self._wordy:
            sk = words.skeleton(text)
            has_cs = words.CHAR_SCRIPT_RE.search(text) is not None
            name_ps = [p for p in self._names if p.may_occur(sk, has_cs)]
            squeezed = words.squeeze(sk) if any(p.spaced for p in self._ids) else sk
            id_ps = [p for p in self._ids if not p.canon.isascii() or p.canon in (squeezed if p.spaced else sk)]
            spelt_ps = [p for p in self._emails if p.spelt and _ascii_targets_in(p.spelt, sk)]
            digest_ps = [p for p in self._emails if p.may_digest(sk)]
        wordy = bool(name_ps or id_ps or spelt_ps or digest_ps)
        lookups = frozenset().union(
            *(p.lookups() for p in name_ps),
            (p.canon for p in id_ps),
            (p.spelt[0] for p in spelt_ps),
            *(p.digests for p in digest_ps),
        )
        at = bool(self._emails) and any(sign in text for sign in emails.AT_SIGNS)
        # The structure view only removes characters (blanks them), so its digits are a subsequence of the
        # raw view's: a tail that is not even a subsequence of the raw digits is in neither view.
        raw_digits = phones.digits(text) if self._phones else ""
        phone = any(phones.subsequence(p.tail, raw_digits) for p in self._phones)
        if not (wordy or at or phone):
            return []
        structure = views.structure_view(text)
        # (view, the view whose words it restricts, or None for a view cut into words of its own)
        plan: list[tuple[str, str | None]] = [(text, None)]
        if structure != text:
            plan.append((structure, text))
        if views.has_zero_width(text):
            # 1.3.3: views 1 and 2 with U+200B, U+2060 and U+FEFF written as spaces
            zw_text = views.zero_width(text)
            plan.append((zw_text, None))
            if structure != text:
                plan.append((views.zero_width(structure), zw_text))

        cut: dict[str, ViewText] = {}
        bounds = views.record_bounds(structure)
        for view, base in plan:
            if wordy:
                if base is None:
                    t = cut[view] = ViewText.cut(view)
                    t.targets = lookups
                else:
                    t = cut[base].restrict(view)
                    t.targets = lookups
                # 1.4: records are the structure view's, whichever view the words come from
                t.__dict__["bounds"] = bounds
                for np in name_ps:
                    for s, e, amb in names.find_names(np, t):
                        _add(hits, "name", s, e, amb)
                for ip in id_ps:
                    for s, e in ids.find_ids(ip, t):
                        _add(hits, "id", s, e, ip.ambiguous)
                for ep in spelt_ps:
                    for s, e in emails.find_spelt(ep, t):
                        _add(hits, "email", s, e, False)
                for ep in digest_ps:
                    for s, e in emails.find_digests(ep, t):
                        _add(hits, "email", s, e, False)
            if at and any(sign in view for sign in emails.AT_SIGNS):
                for s, e in emails.find_addresses(self._emails, view):
                    _add(hits, "email", s, e, False)
            if phone:
                for s, e in phones.find_phones(self._phones, view):
                    _add(hits, "phone", s, e, False)
        return sorted(Found(kind, s, e, amb) for (kind, s, e), amb in hits.items())


def _add(hits: dict[tuple[str, int, int], bool], kind: str, start: int, end: int, ambiguous: bool) -> None:
    # One hit per (kind, start, end). Should two identifiers of the person (say two names) give the same
    # span with different flags, the unambiguous reading wins: under one of them it is plainly the person.
    key = (kind, start, end)
    hits[key] = hits.get(key, True) and ambiguous
