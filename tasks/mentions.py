"""Mentions: the subject named inside another person's item, found by every spelling of every
identifier, attributed, and redacted in place (the item stays: it is the other person's).

A mention has no key: it is free text. Every text that may name a subject is found by a prefilter
that never misses a text in which the rule (docs/matching.md, through `erasure.spellings`: escapes and
base64 decoded too) finds a hit, and every candidate is confirmed by the rule (`Identity.names_in`).
The prefilter (`Prefilter`) rests on one split:

- A text that is all ASCII, with no escape (`%40`, `\\u0040`, `&#64;`, `=40`, ...) and no base64 run,
  can hold a hit only through what `erasure.matching.ascii_triggers` lists (a word of the rule with its
  joiners, an email's mailbox, a digest, a phone's national significant number with other characters
  between its digits), in any letter case. All are hyperscan patterns, and one pass over the texts
  (joined by NUL, which no pattern crosses) carries every subject's: the match's end says whose text it
  is in. An escape or a base64 run (`EVERY`) makes the text a candidate for all.
- A text with any non-ASCII character (or a NUL) is a candidate for every subject: there case folding,
  combining marks, NFKC forms and transliterations part ways with any literal test.

Before anything is redacted, each hit is attributed (`tasks.attribution`): the item's own subject's
identifier is theirs (a namesake's name in the namesake's item), an ambiguous mention (a name another
subject carries, an id that reads as a word) is reported as `mention_ambiguous`, one inside a base64
run as `mention_unredactable`; only the rest is redacted (`redact_item`, whole escaped spans; a JSON
item only inside its string literals).

`MentionIndex` runs that pass once over each text source of the store (frames, archive rows, session
states, personal entities, each corpus file) for every subject of an erasure window, so the window's
requests pay for one read of the store, not one each. Inside `shared` (an erasure window, or one
request's run) a store's index is kept and reused: what it confirmed when it read a table, plus the
rows appended since (by rowid), is re-read and confirmed again at each search, so a text redacted
since drops out. What it does not see is a row rewritten in place by someone else after it was read
(an agent editing a session in the middle of the window): the independent probes read the store
again after the cascade and report such a row as residue, never as all clear. Outside `shared`, every
search builds its own index.

Policy (`ERASURE_MENTIONS`): `redact` (default) rewrites every unambiguous mention to `[redacted]` in
every tier that holds it; `report` leaves the text, and the steps open a `mention_reported` exception
per tier so the pack says `erasedWithExceptions` with the count.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import apsw
import hyperscan

from erasure.errors import ConfigError
from erasure.identity import Identity, phone_digits
from erasure.matching import ascii_triggers
from erasure.spellings import BASE64_RUN, ESCAPE_PATTERN, Hit
from memory.schema import db_path
from tasks.attribution import Attribution, ItemMentions, attribute, build, carriers
from tasks.tier_step import ExceptionSpec

PLACEHOLDER = "[redacted]"
POLICIES = ("redact", "report")
REPORT_GROUND = "mention kept by policy (ERASURE_MENTIONS=report): another person's item names the subject"
AMBIGUOUS_GROUND = (
    "ambiguous mention kept: a name another subject of the store carries, or an id that reads "
    "as a word; review before redacting another person's item"
)
UNREDACTABLE_GROUND = "mention the item cannot lose in place (inside a base64 run): review the item"

BATCH_ROWS = 50_000
"""Rows read and scanned at a time when an index reads a table (bounds its memory)."""


def policy() -> str:
    """`redact` or `report` (ERASURE_MENTIONS)."""
    value = os.environ.get("ERASURE_MENTIONS", "redact").strip().lower()
    if value not in POLICIES:
        raise ConfigError(f"ERASURE_MENTIONS must be one of {', '.join(POLICIES)}")
    return value


@lru_cache(maxsize=256)
def triggers(identity: Identity) -> tuple[str, ...]:
    """Regexes one of which every ASCII text naming the identity matches, in any letter case
    (`erasure.matching.ascii_triggers`: the rule's own words, never a second list of spellings)."""
    return tuple(ascii_triggers(identity.spellings.finder))


EVERY = -1
"""The owner of the escape and base64 patterns: a text with an escape or a base64 run is a candidate for
every identity (`erasure.spellings` decodes them)."""


class Prefilter:
    """Which texts may name which of several identities, in one hyperscan pass (module docstring)."""

    def __init__(self, identities: Sequence[Identity]) -> None:
        self.size = len(identities)
        self._owner: list[int] = [EVERY, EVERY]
        self._every: list[int] = []
        expressions: list[bytes] = [ESCAPE_PATTERN.encode("ascii"), BASE64_RUN.encode("ascii")]
        flags: list[int] = [0, 0]
        for k, who in enumerate(identities):
            for rx in triggers(who):
                expressions.append(rx.encode("utf-8"))
                flags.append(hyperscan.HS_FLAG_CASELESS)
                self._owner.append(k)
        self._db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self._db.compile(expressions=expressions, ids=list(range(len(expressions))), flags=flags)

    def candidates(self, texts: Sequence[str | None]) -> list[set[int]]:
        """Per identity, the indexes of the texts that may name it (a superset of those that do)."""
        out: list[set[int]] = [set() for _ in range(self.size)]
        present = [i for i, t in enumerate(texts) if t is not None]
        joined = "\x00".join(texts[i] or "" for i in present)
        if joined.isascii() and joined.count("\x00") == len(present) - 1:
            plain = present  # the usual case, decided at C speed: every text ASCII and free of NUL
        else:
            plain = []
            for i in present:
                t = texts[i] or ""
                if t.isascii() and "\x00" not in t:
                    plain.append(i)
                else:
                    for found in out:
                        found.add(i)
            joined = "\x00".join(texts[i] or "" for i in plain)
        for k in self._every:
            out[k].update(plain)
        if not plain:
            return out
        starts: list[int] = []
        at = 0
        for i in plain:
            starts.append(at)
            at += len(texts[i] or "") + 1
        owner = self._owner

        def on_match(pattern_id: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            i = plain[bisect_right(starts, end - 1) - 1]
            if owner[pattern_id] == EVERY:
                for found in out:
                    found.add(i)
            else:
                out[owner[pattern_id]].add(i)

        # The binding keeps no reference to the callback: `on_match` lives in this frame for the scan.
        self._db.scan(joined.encode("ascii"), match_event_handler=on_match, scratch=hyperscan.Scratch(self._db))
        return out


_TEXT_COLUMN = {"frames": "content", "raw_archive": "content", "working_sessions": "state", "kg_entities": "name"}
_MIN_ROWID = -(2**63)


class MentionIndex:
    """The mentions of several subjects (an erasure window's) in one store, each text source read once."""

    def __init__(self, identities: Sequence[Identity]) -> None:
        self.identities = tuple(dict.fromkeys(identities))
        self._at = {who: k for k, who in enumerate(self.identities)}
        self._prefilter = Prefilter(self.identities)
        self._tables: dict[str, tuple[int, list[set[int]]]] = {}
        self._files: dict[tuple[str, int, int, int], list[frozenset[int]]] = {}
        self._phones: tuple[int, dict[str, set[int]]] = (_MIN_ROWID, {})
        self._lock = threading.Lock()

    def __contains__(self, who: object) -> bool:
        return who in self._at

    def _confirmed(self, texts: Sequence[str | None]) -> list[list[int]]:
        """Per identity, the indexes of the texts its pattern finds a spelling in."""
        out: list[list[int]] = []
        for who, cands in zip(self.identities, self._prefilter.candidates(texts), strict=True):
            out.append([i for i in sorted(cands) if who.names_in(texts[i] or "")])
        return out

    def _read(self, conn: apsw.Connection, table: str, after: int) -> tuple[int, list[set[int]]]:
        """Rowids of the rows after `after` that name each identity, and the last rowid read."""
        named: list[set[int]] = [set() for _ in self.identities]
        last = after
        cursor = conn.execute(
            f"SELECT rowid, {_TEXT_COLUMN[table]} FROM {table} WHERE rowid > ? ORDER BY rowid", (after,)
        )
        while rows := list(itertools.islice(cursor, BATCH_ROWS)):
            last = int(rows[-1][0])
            for k, hits in enumerate(self._confirmed([None if t is None else str(t) for _, t in rows])):
                named[k].update(int(rows[i][0]) for i in hits)
        return last, named

    def rowids(self, conn: apsw.Connection, table: str, who: Identity) -> set[int]:
        """Rowids of `table`'s rows that named `who` when the index read the table, and of the rows
        appended since that name it (the caller reads them again and confirms)."""
        k = self._at[who]
        with self._lock:
            if table not in self._tables:
                self._tables[table] = self._read(conn, table, _MIN_ROWID)
            last, named = self._tables[table]
        return named[k] | self._read(conn, table, last)[1][k]

    def phone_entities(self, conn: apsw.Connection, digits: set[str]) -> set[int]:
        """Phone entities whose name's digits (`phone_digits`) are one of `digits`. The phone entities
        are read once, and those added since (by rowid) at each call; each one found is read again and
        kept only if its name still has those digits (a window's deletes and renames drop out)."""
        with self._lock:
            last, by_digits = self._phones
            for eid, name in conn.execute(
                "SELECT entity_id, name FROM kg_entities WHERE kind = 'phone' AND entity_id > ? ORDER BY entity_id",
                (last,),
            ):
                by_digits.setdefault(phone_digits(str(name)), set()).add(int(eid))
                last = int(eid)
            self._phones = (last, by_digits)
            found = {e for d in digits for e in by_digits.get(d, ())}
        return {
            int(str(eid))
            for eid, name in _rows_at(conn, "kg_entities", "entity_id, name", found, " AND kind = 'phone'")
            if phone_digits(str(name)) in digits
        }

    def lines(self, path: Path, who: Identity) -> frozenset[int]:
        """Numbers (0-based, in `str.splitlines` order) of the lines of a text file that name `who`;
        a file is read once while it is the same file (inode, size, mtime). A corpus line is one JSON
        object, so no spelling spans two lines."""
        k = self._at[who]
        st = path.stat()
        key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            if key not in self._files:
                self._files[key] = [
                    frozenset(h) for h in self._confirmed(path.read_text(encoding="utf-8").splitlines())
                ]
            return self._files[key][k]


_SHARED: dict[str, MentionIndex] = {}
_SHARED_LOCK = threading.Lock()


def _store_key(path: str | Path) -> str:
    return str(Path(path).resolve())


@contextmanager
def shared(store_dir: Path, identities: Sequence[Identity]) -> Iterator[MentionIndex]:
    """Within this block the mention searches of `identities` in the store at `store_dir` share one
    index (process-wide, so Prefect tasks in worker threads see it), built at the first search."""
    key = _store_key(db_path(store_dir))
    index = MentionIndex(identities)
    with _SHARED_LOCK:
        before = _SHARED.get(key)
        _SHARED[key] = index
    try:
        yield index
    finally:
        with _SHARED_LOCK:
            if before is None:
                _SHARED.pop(key, None)
            else:
                _SHARED[key] = before


def shared_index(conn: apsw.Connection) -> MentionIndex | None:
    """The shared index of `conn`'s store (`shared`), or None outside one."""
    return _SHARED.get(_store_key(conn.filename))


def index_for(conn: apsw.Connection, who: Identity) -> MentionIndex:
    """The shared index of `conn`'s store when one covers `who` (`shared`), else a new one of `who` alone."""
    index = shared_index(conn)
    return index if index is not None and who in index else MentionIndex((who,))


def _rows_at(
    conn: apsw.Connection, table: str, columns: str, rowids: set[int], where: str = ""
) -> Iterator[tuple[object, ...]]:
    """`columns` of `table`'s rows at `rowids` (read again now, 500 at a time) that meet `where`."""
    ids = sorted(rowids)
    for i in range(0, len(ids), 500):
        b = ids[i : i + 500]
        marks = ",".join("?" * len(b))
        yield from conn.execute(f"SELECT {columns} FROM {table} WHERE rowid IN ({marks}){where}", b)


def _named_rows(
    conn: apsw.Connection, who: Identity, table: str, columns: str, where: str = ""
) -> list[tuple[object, ...]]:
    """`columns` (the text last) of `table`'s rows whose text names `who` now."""
    return [
        row
        for row in _rows_at(conn, table, columns, index_for(conn, who).rowids(conn, table, who), where)
        if row[-1] is not None and who.names_in(str(row[-1]))
    ]


def frame_mentions(conn: apsw.Connection, identity: Identity) -> dict[int, str]:
    """frame_id -> kind of every frame whose text names the subject (its own frames included)."""
    return {int(str(f)): str(kind) for f, kind, _ in _named_rows(conn, identity, "frames", "frame_id, kind, content")}


def frames_mentioning(conn: apsw.Connection, identity: Identity, exclude: set[int]) -> list[int]:
    """Summary and turn frames not in `exclude` whose text names the subject."""
    return sorted(f for f, kind in frame_mentions(conn, identity).items() if kind != "derived" and f not in exclude)


def derived_mentioning(conn: apsw.Connection, identity: Identity) -> set[int]:
    """Derived frames whose text names the subject (they are derivatives: the derivatives step deletes them)."""
    return {f for f, kind in frame_mentions(conn, identity).items() if kind == "derived"}


def archives_mentioning(conn: apsw.Connection, identity: Identity, exclude: set[int]) -> list[int]:
    """Live archive rows not in `exclude` whose content names the subject."""
    rows = _named_rows(conn, identity, "raw_archive", "archive_id, content", " AND erased_at IS NULL")
    return sorted(int(str(r[0])) for r in rows if int(str(r[0])) not in exclude)


def sessions_mentioning(conn: apsw.Connection, identity: Identity, exclude: set[str]) -> list[str]:
    """Sessions not in `exclude` whose state names the subject."""
    rows = _named_rows(conn, identity, "working_sessions", "session_id, state")
    return sorted(str(r[0]) for r in rows if str(r[0]) not in exclude)


def lines_naming(conn: apsw.Connection, path: Path, identity: Identity) -> frozenset[int]:
    """Numbers of the lines of the store's file `path` (a corpus version) that name the subject
    (`MentionIndex.lines`). Raises FileNotFoundError when the file is gone."""
    return index_for(conn, identity).lines(path, identity)


def redact_text(identity: Identity, text: str) -> tuple[str, int]:
    """`text` with every spelling of the subject replaced by the placeholder; and the count."""
    return identity.redact(text, PLACEHOLDER)


def attribution(conn: apsw.Connection, who: Identity, own_ids: Iterable[str] = ()) -> Attribution:
    """Who in the store carries `who`'s identifiers (`tasks.attribution`); `own_ids` are the subject's
    store ids (the request's are always among them). The personal entities are found through the
    mention index (read once per window)."""
    entities = index_for(conn, who).rowids(conn, "kg_entities", who)
    return build(who, own_ids, carriers(conn, who, entities))


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)


def _json_interiors(text: str) -> list[tuple[int, int]] | None:
    """The spans of the insides of a JSON document's string literals; None if `text` is not JSON."""
    try:
        json.loads(text)
    except ValueError:
        return None
    return [(m.start() + 1, m.end() - 1) for m in _JSON_STRING.finditer(text)]


def _cut(hit: Hit, interiors: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of `hit`'s redaction spans inside string literals (a name split over two strings is cut
    in two; a key between them is not part of it)."""
    return [(max(s, lo), min(e, hi)) for s, e in hit.spans() for lo, hi in interiors if max(s, lo) < min(e, hi)]


def item_mentions(
    who: Identity, att: Attribution, text: str, owners: Iterable[str], *, as_json: bool = False
) -> ItemMentions:
    """The attributed hits of `who` in one item's text, read whole (a session row and its file, a
    corpus line: one matcher for all). With `as_json`, a mention outside every string literal of a
    JSON document (a number) cannot be redacted in place: it counts as unredactable."""
    found = attribute(who, att, text, owners)
    interiors = _json_interiors(text) if as_json else None
    if interiors is None:
        return found
    outside = [h for h in found.redact if not _cut(h, interiors)]
    return ItemMentions(
        redact=tuple(h for h in found.redact if h not in outside),
        keep=found.keep + tuple(outside),
        ambiguous=found.ambiguous,
        unredactable=found.unredactable + len(outside),
    )


def redact_item(
    who: Identity, att: Attribution, text: str, owners: Iterable[str], *, as_json: bool = False
) -> tuple[str, int]:
    """The item's text with only its mentions of `who` to redact replaced by the placeholder (an
    escaped spelling with its whole escaped span); and how many. With `as_json` only the insides of
    string literals change, so the document stays JSON with its other bytes as they were."""
    found = item_mentions(who, att, text, owners, as_json=as_json)
    if not found.redact:
        return text, 0
    interiors = _json_interiors(text) if as_json else None
    if interiors is None:
        return who.redact(text, PLACEHOLDER, keep=found.keep)
    parts = sorted(p for h in found.redact for p in _cut(h, interiors))
    out: list[str] = []
    at = 0
    for lo, hi in parts:
        out += [text[at:lo], PLACEHOLDER]
        at = hi
    return "".join(out) + text[at:], len(found.redact)


def reported(kind: str, item_key: str, items: Mapping[str, int], mentions_: int) -> list[ExceptionSpec]:
    """One exception of `kind` (`mention_ambiguous`, `mention_unredactable`) with counts only."""
    if not mentions_:
        return []
    ground = AMBIGUOUS_GROUND if kind == "mention_ambiguous" else UNREDACTABLE_GROUND
    return [ExceptionSpec(kind=kind, item_key=item_key, detail={**items, "mentions": mentions_}, ground=ground)]
