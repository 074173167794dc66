"""Mentions: the subject named inside another person's item, found by every spelling of every
identifier, and redacted in place (the item stays: it is the other person's).

A mention has no key: it is free text. Finding one is a scan of the text columns with a cheap
prefilter in SQL (`instr` of each spelling, the last digits of each phone), confirmed in Python with
the identity's token-bounded, case-insensitive pattern (`erasure.identity`).

Policy (`ERASURE_MENTIONS`): `redact` (default) rewrites every mention to `[redacted]` in every tier
that holds it; `report` leaves the text, and the steps open a `mention_reported` exception per tier so
the pack says `erasedWithExceptions` with the count.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import apsw

from erasure.errors import ConfigError
from erasure.identity import Identity

PLACEHOLDER = "[redacted]"
POLICIES = ("redact", "report")
REPORT_GROUND = "mention kept by policy (ERASURE_MENTIONS=report): another person's item names the subject"


def policy() -> str:
    """`redact` or `report` (ERASURE_MENTIONS)."""
    value = os.environ.get("ERASURE_MENTIONS", "redact").strip().lower()
    if value not in POLICIES:
        raise ConfigError(f"ERASURE_MENTIONS must be one of {', '.join(POLICIES)}")
    return value


def _prefilter(identity: Identity, column: str) -> tuple[str, list[str]]:
    """A SQL condition true for every row whose `column` may hold a spelling (never misses one)."""
    terms: list[str] = []
    params: list[str] = []
    for kind, value in identity.items():
        if kind == "phone":
            continue
        if not value.isascii():
            return "1", []  # SQLite's lower() folds ASCII only: no safe prefilter, check every row
        first = value.split(" ")[0]
        terms.append(f"instr(lower({column}), ?)")
        params.append(first)
    for digits in identity.phone_spellings():
        terms.append(f"instr({column}, ?)")
        params.append(digits[-2:])
    return ("(" + " OR ".join(terms) + ")" if terms else "0"), params


def _confirmed(identity: Identity, rows: Iterable[tuple[object, object]]) -> list[str]:
    pattern = identity.pattern()
    return [str(key) for key, text in rows if text is not None and pattern.search(str(text))]


def frames_mentioning(conn: apsw.Connection, identity: Identity, exclude: set[int]) -> list[int]:
    """Summary and turn frames not in `exclude` whose text names the subject."""
    cond, params = _prefilter(identity, "content")
    rows = conn.execute(f"SELECT frame_id, content FROM frames WHERE kind != 'derived' AND {cond}", params)
    return sorted(int(k) for k in _confirmed(identity, rows) if int(k) not in exclude)


def derived_mentioning(conn: apsw.Connection, identity: Identity) -> set[int]:
    """Derived frames whose text names the subject (they are derivatives: the derivatives step deletes them)."""
    cond, params = _prefilter(identity, "content")
    rows = conn.execute(f"SELECT frame_id, content FROM frames WHERE kind = 'derived' AND {cond}", params)
    return {int(k) for k in _confirmed(identity, rows)}


def archives_mentioning(conn: apsw.Connection, identity: Identity, exclude: set[int]) -> list[int]:
    """Live archive rows not in `exclude` whose content names the subject."""
    cond, params = _prefilter(identity, "content")
    rows = conn.execute(f"SELECT archive_id, content FROM raw_archive WHERE erased_at IS NULL AND {cond}", params)
    return sorted(int(k) for k in _confirmed(identity, rows) if int(k) not in exclude)


def sessions_mentioning(conn: apsw.Connection, identity: Identity, exclude: set[str]) -> list[str]:
    """Sessions not in `exclude` whose state names the subject."""
    cond, params = _prefilter(identity, "state")
    rows = conn.execute(f"SELECT session_id, state FROM working_sessions WHERE {cond}", params)
    return sorted(str(k) for k in _confirmed(identity, rows) if str(k) not in exclude)


def redact_text(identity: Identity, text: str) -> tuple[str, int]:
    """`text` with every spelling of the subject replaced by the placeholder; and the count."""
    return identity.redact(text, PLACEHOLDER)
