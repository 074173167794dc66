"""Mentions: the subject named inside another person's item, found by every spelling of every
identifier, and redacted in place (the item stays: it is the other person's).

A mention has no key: it is free text. Candidates come from a prefilter that never misses a text the
identity's pattern (`erasure.identity`: token-bounded, case-insensitive) finds, and every candidate is
confirmed with that pattern. The prefilter (`SearchPlan`) rests on one split:

- A text that is all ASCII can match a spelling only through the spelling's ASCII shadow (the four
  non-ASCII letters Python's case-insensitive matching equates with ASCII ones, `ı İ ſ K`, mapped to
  them): it holds the shadow's longest word in any letter case, and, for a phone, its digits once the
  separators the pattern allows are removed. For frames the FTS5 index (`frames_fts`, unicode61) is
  exact on ASCII text: its tokens are the runs of ASCII letters and digits, lower-cased, which is where
  the pattern's token boundaries fall, so a phrase query of the shadow's tokens finds every frame that
  names the spelling. Phones are not asked of the index: their digits may be split into any groups,
  and the groups people share (country and area codes) make every query on them a long one; the
  frames that may hold one are found with the non-ASCII ones, in the same scan (the digits in order,
  a cheap GLOB, then the exact test in SQL).
- A text with any non-ASCII character is always a candidate. There the tokenizer and the pattern part
  ways (a combining mark or a private-use character glues tokens the pattern separates; `ı` is not
  folded to `i`; NFKC forms such as full-width letters stay apart), so no index is trusted: the rows
  are found by a scan in SQL (`length` in bytes and in characters differ), which costs C time only.
  A spelling that has no ASCII shadow matches only such texts.

Policy (`ERASURE_MENTIONS`): `redact` (default) rewrites every mention to `[redacted]` in every tier
that holds it; `report` leaves the text, and the steps open a `mention_reported` exception per tier so
the pack says `erasedWithExceptions` with the count.
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import apsw

from erasure.errors import ConfigError
from erasure.identity import Identity

PLACEHOLDER = "[redacted]"
POLICIES = ("redact", "report")
REPORT_GROUND = "mention kept by policy (ERASURE_MENTIONS=report): another person's item names the subject"

ASCII_EQUIVALENTS = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}
"""The only non-ASCII characters that Python's case-insensitive matching equates with an ASCII one
(checked over all of Unicode by tests/test_mention_prefilter.py)."""
PATTERN_SPACES = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f "
"""The ASCII characters `\\s` matches in a str pattern."""
PHONE_SEPARATORS = PATTERN_SPACES + "-.()/"
"""The ASCII characters a phone spelling may carry between its digits (`erasure.identity._PHONE_SEP`)."""
_ALNUM = re.compile(r"[a-z0-9]+")


def policy() -> str:
    """`redact` or `report` (ERASURE_MENTIONS)."""
    value = os.environ.get("ERASURE_MENTIONS", "redact").strip().lower()
    if value not in POLICIES:
        raise ConfigError(f"ERASURE_MENTIONS must be one of {', '.join(POLICIES)}")
    return value


def ascii_shadow(value: str) -> str | None:
    """`value` as an ASCII text spells it in the identity's case-insensitive pattern (lower case), or
    None when no ASCII text can match it (it has a character no ASCII character matches)."""
    out = []
    for ch in value:
        if ch.isascii():
            out.append(ch.lower())
        elif ch in ASCII_EQUIVALENTS:
            out.append(ASCII_EQUIVALENTS[ch])
        else:
            return None
    return "".join(out)


@dataclass(frozen=True)
class SearchPlan:
    """What an ASCII text that names the subject must hold, per spelling (see the module docstring)."""

    pieces: tuple[str, ...]
    """Lower-case words: an ASCII text matching a name/id/email spelling holds its longest one."""
    digits: tuple[str, ...]
    """Phone spellings: an ASCII text matching one holds it once `PHONE_SEPARATORS` are removed."""
    fts: str | None
    """An FTS5 query that finds every ASCII frame naming a name, id or email spelling; None when there
    is nothing to ask."""
    fts_complete: bool
    """False when some spelling cannot be asked of the index (it has no token): scan for `pieces` then."""

    @classmethod
    def of(cls, identity: Identity) -> SearchPlan:
        pieces: list[str] = []
        phrases: list[str] = []
        complete = True
        for kind, value in identity.items():
            if kind == "phone":
                continue
            shadow = ascii_shadow(value)
            if shadow is None:
                continue  # only a non-ASCII text can name it: always a candidate
            pieces.append(max(shadow.split(" "), key=len))
            tokens = _ALNUM.findall(shadow)
            if tokens:
                phrases.append('"' + " ".join(tokens) + '"')
            else:
                complete = False
        digits: list[str] = []
        for spelling in identity.phone_spellings():
            if not (spelling.isascii() and spelling.isdigit()):
                continue  # Unicode digits: only a non-ASCII text can hold them
            digits.append(spelling)
        return cls(pieces=tuple(dict.fromkeys(pieces)), digits=tuple(dict.fromkeys(digits)),
                   fts=" OR ".join(dict.fromkeys(phrases)) or None, fts_complete=complete)

    def sql(self, column: str, *, ascii_only: bool = False, pieces: bool = True) -> tuple[str, list[str]]:
        """A SQL condition true for every row whose `column` may name the subject (never misses one).
        With `ascii_only`, the condition for ASCII texts alone (the caller finds the others); without
        `pieces`, for phones alone (the caller asks the index for the rest)."""
        terms = [] if ascii_only else [non_ascii(column)]
        params: list[str] = []
        # LIKE folds ASCII letter case, as lower() would, and costs less (case_sensitive_like is never set).
        for piece in self.pieces if pieces else ():
            terms.append(f"{column} LIKE ? ESCAPE '\\'")
            params.append("%" + piece.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
        for d in self.digits:
            # The digits in order (a cheap GLOB) gate the exact test: the text without the separators
            # the pattern allows between digits holds them in one run.
            stripped = column
            for ch in PHONE_SEPARATORS:
                stripped = f"replace({stripped}, char({ord(ch)}), '')"
            terms.append(f"({column} GLOB ? AND instr({stripped}, ?))")
            params += ["*" + "*".join(d) + "*", d]
        return ("(" + " OR ".join(terms) + ")" if terms else "0"), params

    def may_name(self, text: str) -> bool:
        """The same test in Python, for files (a cheap check before the pattern)."""
        if not text.isascii():
            return True
        low = text.lower()
        if any(p in low for p in self.pieces):
            return True
        if self.digits:
            stripped = low.translate(_STRIP)
            return any(d in stripped for d in self.digits)
        return False


_STRIP = str.maketrans("", "", PHONE_SEPARATORS)


def non_ascii(column: str) -> str:
    """SQL: the text has a character outside ASCII (or a NUL, where `length` stops counting)."""
    return f"length(CAST({column} AS BLOB)) != length({column})"


@lru_cache(maxsize=64)
def plan(identity: Identity) -> SearchPlan:
    """The identity's search plan (kept: a request's steps ask for it many times)."""
    return SearchPlan.of(identity)


def _confirmed(identity: Identity, rows: Iterable[tuple[object, object]]) -> list[str]:
    pattern = identity.pattern()
    return [str(key) for key, text in rows if text is not None and pattern.search(str(text))]


# One frame search per store state: the steps' resolutions ask for it several times in a row.
_FRAME_MEMO: weakref.WeakKeyDictionary[apsw.Connection, tuple[tuple[Identity, int, int], dict[int, str]]] = \
    weakref.WeakKeyDictionary()


def _state(conn: apsw.Connection) -> tuple[int, int]:
    """Changes to the store since: other connections' commits (data_version) and this one's own."""
    row = conn.execute("PRAGMA data_version").fetchone()
    return int(row[0]) if row else -1, int(conn.total_changes())


def frame_mentions(conn: apsw.Connection, identity: Identity) -> dict[int, str]:
    """frame_id -> kind of every frame whose text names the subject (see the module docstring): the
    ASCII frames from the FTS5 index, the others from a scan, each confirmed with the pattern. The
    answer is kept while the store does not change (nothing committed by anyone, nothing written on
    `conn`), so a step's resolution asks the index once."""
    key = (identity, *_state(conn))
    hit = _FRAME_MEMO.get(conn)
    if hit is not None and hit[0] == key:
        return dict(hit[1])
    p = plan(identity)
    scan, params = p.sql("content", ascii_only=True, pieces=not p.fts_complete)
    rows: list[tuple[object, object, object]] = list(conn.execute(
        f"SELECT frame_id, kind, content FROM frames WHERE {non_ascii('content')} OR {scan}", params))
    if p.fts is not None:
        ids = [int(r[0]) for r in conn.execute("SELECT rowid FROM frames_fts WHERE frames_fts MATCH ?", (p.fts,))]
        for i in range(0, len(ids), 500):
            b = ids[i:i + 500]
            marks = ",".join("?" * len(b))
            rows += conn.execute(f"SELECT frame_id, kind, content FROM frames WHERE frame_id IN ({marks})", b)
    pattern = identity.pattern()
    found = {int(str(fid)): str(kind) for fid, kind, text in rows if text is not None and pattern.search(str(text))}
    _FRAME_MEMO[conn] = (key, found)
    return dict(found)


def frames_mentioning(conn: apsw.Connection, identity: Identity, exclude: set[int]) -> list[int]:
    """Summary and turn frames not in `exclude` whose text names the subject."""
    return sorted(f for f, kind in frame_mentions(conn, identity).items() if kind != "derived" and f not in exclude)


def derived_mentioning(conn: apsw.Connection, identity: Identity) -> set[int]:
    """Derived frames whose text names the subject (they are derivatives: the derivatives step deletes them)."""
    return {f for f, kind in frame_mentions(conn, identity).items() if kind == "derived"}


def archives_mentioning(conn: apsw.Connection, identity: Identity, exclude: set[int]) -> list[int]:
    """Live archive rows not in `exclude` whose content names the subject (no index: a scan in SQL
    with the plan's condition, then the pattern on the few rows it keeps)."""
    cond, params = plan(identity).sql("content")
    rows = conn.execute(f"SELECT archive_id, content FROM raw_archive WHERE erased_at IS NULL AND {cond}", params)
    return sorted(int(k) for k in _confirmed(identity, rows) if int(k) not in exclude)


def sessions_mentioning(conn: apsw.Connection, identity: Identity, exclude: set[str]) -> list[str]:
    """Sessions not in `exclude` whose state names the subject."""
    cond, params = plan(identity).sql("state")
    rows = conn.execute(f"SELECT session_id, state FROM working_sessions WHERE {cond}", params)
    return sorted(str(k) for k in _confirmed(identity, rows) if str(k) not in exclude)


def redact_text(identity: Identity, text: str) -> tuple[str, int]:
    """`text` with every spelling of the subject replaced by the placeholder; and the count."""
    return identity.redact(text, PLACEHOLDER)
