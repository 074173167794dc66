"""Which of other people's records name the subject, read as the decoded views read a file.

A store kind's probe counts the records of other people that name the subject (mentions: reported by the
eraser, never erased; their hits in the files are explained, docs/matching.md 7.2). Counted with a literal
search, a record that names the subject in a spelling the rule reads (a format character inside the
address, a phone in Eastern Arabic digits, the name in a JSON escape, base64 of a note pasted into the
message) was no mention to the probe, while the eraser, which reads it by the rule, reported it and left it;
the views then found the subject in it after every erasure: residue for ever. Here each record is read by
the views' own reader (`probes.view_payloads.read_payload`: documents, base64 runs, escapes, the rule), so
the probe counts what its own views will find.

Records are looked at together: one trigger pass over them all (joined by NULs), and only those with a
trigger in them are read whole, as `probes.view_sqlite` reads a database's short values."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Sequence

from probes.matcher import Matcher
from probes.needles import MIN_IDENTIFIER_BYTES, NeedleKind, NeedleSet
from probes.view_payloads import FileScan, read_payload


class Naming:
    """`needles` ((kind, text) as `probes.views.scan_views` takes them) looked for in other people's
    records, one matcher for every call (its databases are compiled once)."""

    def __init__(self, needles: Sequence[tuple[str, str]]) -> None:
        self.matcher = Matcher(needles)

    def __call__(self, texts: Sequence[str | bytes]) -> list[set[int]]:
        """Per text, the indexes of the needles the decoded views find in it, inside base64 runs included."""
        out: list[set[int]] = [set() for _ in texts]
        if self.matcher.empty or not texts:
            return out
        data = [t.encode("utf-8", "surrogatepass") if isinstance(t, str) else bytes(t) for t in texts]
        starts: list[int] = []
        at = 0
        for d in data:
            starts.append(at)
            at += len(d) + 1
        joined = b"\x00".join(data)
        for i in sorted({bisect_right(starts, end - 1) - 1 for _pid, end in self.matcher.triggers(joined)}):
            scan = FileScan(self.matcher, {}, [])
            read_payload(scan, data[i], 1, whole_file=False, speculative=True)
            out[i] = set(scan.hits).union(*scan.encoded.values())
        return out


def naming(texts: Sequence[str | bytes], needles: Sequence[tuple[str, str]]) -> list[set[int]]:
    """Per text, the indexes of `needles` that the decoded views find in it (`Naming`, for one call)."""
    return Naming(needles)(texts)


WORD = r"[0-9A-Za-z]"
"""A character a spelling must not touch on either side to stand as a whole token in a record."""


def fold_id(text: str) -> str:
    """An id as the probes compare ids: NFKC, case folded, runs of white space as one space."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


class Spelled:
    """The subject's spellings looked for in other people's records: as whole tokens (a caseless pattern on
    token boundaries), and by the rule as the views read them (`Naming`)."""

    def __init__(self, spellings: Sequence[str]) -> None:
        self.words = [s for s in spellings if s.strip()]
        alts = sorted({r"\s+".join(re.escape(w) for w in s.split()) for s in self.words}, key=len, reverse=True)
        self.pattern = re.compile(rf"(?<!{WORD})(?:{'|'.join(alts)})(?!{WORD})", re.IGNORECASE) if alts else None
        self.reader = Naming([("identifier", s) for s in self.words])

    def names(self, texts: Sequence[object]) -> bool:
        """Whether any of `texts` (strings; anything else is passed over) names the subject."""
        strings = [t for t in texts if isinstance(t, str)]
        if self.pattern is not None and any(self.pattern.search(unicodedata.normalize("NFKC", t)) for t in strings):
            return True
        return any(self.reader(strings))

    def read_in(self, texts: list[str]) -> set[str]:
        """The spellings the rule reads in any of `texts`."""
        return {self.words[i] for found in self.reader(texts) for i in found}


def identifier_needles(
    needles: NeedleSet, spelled: Spelled, candidates: Sequence[str], theirs: list[str], others: set[str]
) -> list[int]:
    """Identifier needles for `candidates` (the subject's spellings, at least `MIN_IDENTIFIER_BYTES`);
    returns the groups found inside other people's records `theirs` (their byte hits are explained by the
    reported mentions). A spelling inside another person's record but not as a whole token there (a longer
    id containing it), or equal to another person's id (`others`, folded), is a shared identifier: its hits
    prove nothing about the subject."""
    low = [t.lower() for t in theirs]
    read = spelled.read_in(theirs)
    mentioned: list[int] = []
    for text in dict.fromkeys(candidates):
        data = text.encode()
        if len(data) < MIN_IDENTIFIER_BYTES:
            needles.bump("identifier_too_short")
            continue
        inside = [t for t, t_low in zip(theirs, low, strict=True) if text.lower() in t_low]
        bounded = re.compile(rf"(?<!{WORD}){re.escape(text)}(?!{WORD})", re.IGNORECASE)
        if fold_id(text) in others or not all(bounded.search(t) for t in inside):
            needles.add_group(NeedleKind.shared_identifier, [data], caseless=True)
            continue
        if needles.add_group(NeedleKind.identifier, [data], caseless=True) and (inside or text in read):
            mentioned.append(needles.needles[-1].group)
    return mentioned
