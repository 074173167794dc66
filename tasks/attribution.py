"""Attribution before redaction: whose data is each hit of the subject's identifiers in an item.

Every hit (`erasure.spellings.Hit`) in an item that is not the subject's own is one of:

- `THEIRS`: the item's own subject carries that identifier as theirs (a namesake's name in the
  namesake's item, a household phone in the housemate's): their data, not a mention; left alone and
  not counted;
- `AMBIGUOUS`: a name that another subject of the store also carries (their person entity, linked by
  their own items), or an id that reads as a word (letters only, `jordan`): reported as
  `mention_ambiguous` with counts, never redacted;
- `UNREDACTABLE`: an unambiguous mention the text cannot lose in place (inside a base64 run):
  reported as `mention_unredactable`, counted;
- `REDACT`: an unambiguous mention (an email, a phone, a distinctive id, a name no one else carries):
  redacted (or reported, by policy) as before.

Who carries what is read from the knowledge graph, where ingest files every subject's name (or id),
email and phone as entities linked by their own summary frames.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import apsw

from erasure.identity import Identity, fold
from erasure.spellings import Hit, canonical

THEIRS, AMBIGUOUS, UNREDACTABLE, REDACT = "theirs", "ambiguous", "unredactable", "redact"
PERSONAL_KINDS = ("person", "email", "phone")
_WORD = re.compile(r"[^\W\d_]+(?: [^\W\d_]+)*")


def word_like(value: str) -> bool:
    """Whether an id reads as ordinary words (letters and single spaces only): `jordan`, `mike ross`."""
    return _WORD.fullmatch(canonical(value).strip()) is not None


@dataclass(frozen=True)
class Attribution:
    """Who in the store carries the subject's identifiers, and how a hit in an item is taken."""

    own: frozenset[str]
    """The subject's store ids (folded)."""
    carried: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Other subject id (folded) -> kinds of the subject's identifiers they carry as their own."""
    word_id: bool = False

    @property
    def namesakes(self) -> int:
        """How many other subjects of the store carry the subject's name."""
        return sum(1 for kinds in self.carried.values() if "name" in kinds)

    def verdict(self, hit: Hit, owners: Iterable[str]) -> str:
        """How `hit` in an item of `owners` (its own subjects' ids; none for a derived text) is taken."""
        for o in owners:
            if hit.kind in self.carried.get(fold(o), ()):
                return THEIRS
        if hit.ambiguous or (hit.kind == "name" and self.namesakes) or (hit.kind == "id" and self.word_id):
            return AMBIGUOUS
        return REDACT if hit.inline else UNREDACTABLE


@dataclass(frozen=True)
class ItemMentions:
    """The hits in one item, attributed: those to redact, and counts of those reported."""

    redact: tuple[Hit, ...] = ()
    keep: tuple[Hit, ...] = ()
    ambiguous: int = 0
    unredactable: int = 0


def attribute(who: Identity, att: Attribution, text: str, owners: Iterable[str]) -> ItemMentions:
    """The hits of `who` in `text` (an item of `owners`), each attributed."""
    owners = tuple(owners)
    redact: list[Hit] = []
    keep: list[Hit] = []
    counts = {AMBIGUOUS: 0, UNREDACTABLE: 0}
    for h in who.hits(text):
        v = att.verdict(h, owners)
        (redact if v == REDACT else keep).append(h)
        if v in counts:
            counts[v] += 1
    return ItemMentions(tuple(redact), tuple(keep), counts[AMBIGUOUS], counts[UNREDACTABLE])


def carriers(conn: apsw.Connection, who: Identity, entities: Iterable[int]) -> dict[str, frozenset[str]]:
    """Subject id (folded) -> kinds of `who`'s identifiers that a personal entity among `entities`
    spells and one of that subject's summary frames links."""
    out: dict[str, set[str]] = {}
    for eid in sorted(set(entities)):
        row = conn.execute("SELECT kind, name FROM kg_entities WHERE entity_id = ?", (eid,)).fetchone()
        if row is None or row[0] not in PERSONAL_KINDS:
            continue
        kinds = {h.kind for h in who.hits(str(row[1])) if h.inline}
        if not kinds:
            continue
        for (sid,) in conn.execute(
            "SELECT DISTINCT f.subject_id FROM kg_entity_frames l JOIN frames f ON f.frame_id = l.frame_id"
            " WHERE l.entity_id = ? AND f.subject_id IS NOT NULL",
            (eid,),
        ):
            out.setdefault(fold(str(sid)), set()).update(kinds)
    return {k: frozenset(v) for k, v in out.items()}


def build(who: Identity, own_ids: Iterable[str], carried: Mapping[str, frozenset[str]]) -> Attribution:
    """The subject's attribution: `carried` without the subject's own ids."""
    own = frozenset(fold(i) for i in own_ids) | frozenset(who.ids)
    return Attribution(
        own=own, carried={k: v for k, v in carried.items() if k not in own}, word_id=any(word_like(i) for i in who.ids)
    )


def frame_owners(conn: apsw.Connection, frame_id: int) -> tuple[str, ...]:
    """The subject ids whose item a frame is: a summary's subject, a turn's conversation's subjects."""
    row = conn.execute("SELECT kind, subject_id, turn_key FROM frames WHERE frame_id = ?", (frame_id,)).fetchone()
    if row is None:
        return ()
    if row[1] is not None:
        return (str(row[1]),)
    if row[2] is None:
        return ()
    source, _, ref = str(row[2]).partition("/")
    return source_owners(conn, "raw_archive", source, ref)


def source_owners(conn: apsw.Connection, table: str, source: str, ref: str) -> tuple[str, ...]:
    """The subject ids of `table`'s rows with the source key (source, ref)."""
    return tuple(
        sorted(
            {
                str(r[0])
                for r in conn.execute(
                    f"SELECT DISTINCT subject_id FROM {table} WHERE source = ? AND source_ref = ?"
                    " AND subject_id IS NOT NULL",
                    (source, ref),
                )
            }
        )
    )
