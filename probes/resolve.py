"""Resolve the subject's keys in every tier with the probes' own queries (read-only handle).

The subject is reached through: `subject_id` columns; the (source, source_ref) pairs of every row that
carries the subject's id; summary frames by archive link; verbatim turn frames by
`turn_key = '<source>/<source_ref>'`; derived frames that reference those frames through frame_refs (to
a fixpoint) or quote an identifier (FTS phrase); chunks of all those frames; person/email/phone
entities named by an identifier; entities linked only to the subject's frames; relations asserted by
the subject's frames or touching the subject's entities.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

import apsw

from erasure.subject import Subject
from probes.identity import spellings
from probes.keys import SubjectKeys
from probes.needles import fts_phrase
from probes.store import PERSONAL_ENTITY_KINDS, column, ids_in, json_list, json_pairs, pairs_in

IN_IDS = ids_in()
BYSTANDER_SAMPLE = 3


def subject_pairs(conn: apsw.Connection, ids_json: str) -> set[tuple[str, str]]:
    """(source, source_ref) of every row filed under one of the subject's ids (a `json_list`)."""
    pairs: set[tuple[str, str]] = set()
    for table in SUBJECT_TABLES:
        for src, ref in conn.execute(f"SELECT source, source_ref FROM {table} WHERE subject_id {IN_IDS}", (ids_json,)):
            if src is not None and ref is not None:
                pairs.add((str(src), str(ref)))
    return pairs


SUBJECT_TABLES = ("raw_archive", "working_sessions", "blobs", "ft_examples", "subprocessor_records")


def shared_pairs(conn: apsw.Connection, ids_json: str, pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The (source, source_ref) of `pairs` under which someone outside `ids_json` has rows too."""
    pj = json_pairs(pairs)
    out: set[tuple[str, str]] = set()
    for table in SUBJECT_TABLES:
        for src, ref in conn.execute(
            f"SELECT DISTINCT source, source_ref FROM {table} WHERE {pairs_in('?1')}"
            f" AND subject_id IS NOT NULL AND subject_id NOT {ids_in('?2')}",
            (pj, ids_json),
        ):
            out.add((str(src), str(ref)))
    return out


def item_turns(conn: apsw.Connection, ids_json: str) -> set[int]:
    """Verbatim turn frames of the subject's own items: their conversation's turn key and their item's
    key (a turn frame carries no subject and no archive link)."""
    return _ids(
        conn,
        "SELECT f.frame_id FROM raw_archive a JOIN frames f"
        " ON f.turn_key = a.source || '/' || a.source_ref AND f.item_key IS a.item_key"
        f" WHERE a.subject_id {IN_IDS} AND a.item_key IS NOT NULL AND f.kind = 'turn'",
        ids_json,
    )


def _ids(conn: apsw.Connection, sql: str, *params: object) -> set[int]:
    return {int(v) for v in column(conn, sql, tuple(params))}


def _strs(conn: apsw.Connection, sql: str, *params: object) -> set[str]:
    return {str(v) for v in column(conn, sql, tuple(params))}


def episodic_frames(conn: apsw.Connection, ids_json: str, archive_ids: set[int], turn_keys: set[str]) -> set[int]:
    """Summary frames by subject or archive link, turn frames by turn key."""
    frames = _ids(conn, f"SELECT frame_id FROM frames WHERE subject_id {IN_IDS} AND kind != 'derived'", ids_json)
    frames |= _ids(
        conn, f"SELECT frame_id FROM frames WHERE archive_id {IN_IDS} AND kind != 'derived'", json_list(archive_ids)
    )
    frames |= _ids(
        conn, f"SELECT frame_id FROM frames WHERE turn_key {IN_IDS} AND kind != 'derived'", json_list(turn_keys)
    )
    return frames


def fts_hit_outside(conn: apsw.Connection, text: str, frames_json: str) -> bool:
    """Whether an FTS row (frame) outside `frames` (a `json_list`) matches `text` as a phrase; stops at the
    first (a phrase common to thousands of frames costs one row, not all of them)."""
    phrase = fts_phrase(text)
    if phrase is None:
        return False
    row = conn.execute(
        f"SELECT 1 FROM frames_fts WHERE frames_fts MATCH ? AND rowid NOT {IN_IDS} LIMIT 1", (phrase, frames_json)
    ).fetchone()
    return row is not None


def fts_hits(conn: apsw.Connection, text: str) -> set[int]:
    """Rowids (frame ids) of FTS rows matching `text` as a phrase."""
    phrase = fts_phrase(text)
    if phrase is None:
        return set()
    return _ids(conn, "SELECT rowid FROM frames_fts WHERE frames_fts MATCH ?", phrase)


def derived_closure(conn: apsw.Connection, seeds: set[int], quoting: set[int]) -> set[int]:
    """Derived frames referencing `seeds` or each other (fixpoint), plus the `quoting` ones."""
    found = set(quoting)
    frontier = set(seeds) | set(quoting)
    while frontier:
        refs = _ids(conn, f"SELECT r.frame_id FROM frame_refs r WHERE r.ref_frame_id {IN_IDS}", json_list(frontier))
        frontier = refs - found - seeds
        found |= frontier
    return found


def quoting_derived(conn: apsw.Connection, subject: Subject, ids: list[str]) -> set[int]:
    """Derived frames whose text contains one of the identifiers in any spelling (FTS phrase; the
    tokenizer folds case)."""
    hits: set[int] = set()
    for _kind, spelling in spellings(subject, ids):
        hits |= fts_hits(conn, spelling)
    return _ids(conn, f"SELECT frame_id FROM frames WHERE kind = 'derived' AND frame_id {IN_IDS}", json_list(hits))


@dataclass
class PersonalEntities:
    """Every person/email/phone entity by the forms an identifier can name it in: its name lower-cased,
    the same with its whitespace collapsed, and a phone's digits. One read of the table serves every
    subject of a window."""

    by_name: dict[str, set[int]] = field(default_factory=dict)
    by_phone_digits: dict[str, set[int]] = field(default_factory=dict)

    @classmethod
    def read(cls, conn: apsw.Connection) -> PersonalEntities:
        """Index the store's personal entities."""
        out = cls()
        kinds = ",".join(f"'{k}'" for k in PERSONAL_ENTITY_KINDS)
        for eid, kind, name in conn.execute(f"SELECT entity_id, kind, name FROM kg_entities WHERE kind IN ({kinds})"):
            text = str(name)
            for form in (text.lower(), " ".join(text.split()).lower()):
                out.by_name.setdefault(form, set()).add(int(eid))
            if kind == "phone":
                out.by_phone_digits.setdefault(re.sub(r"\D", "", text), set()).add(int(eid))
        return out

    def named(self, names: set[str], phone_digits: str) -> set[int]:
        """Entities whose name (as is or whitespace-collapsed, lower-cased) is one of `names`, and phone
        entities whose digits are `phone_digits` (none when it is empty)."""
        out = {e for n in names for e in self.by_name.get(n, ())}
        return out | (self.by_phone_digits.get(phone_digits, set()) if phone_digits else set())


def named_entities(
    conn: apsw.Connection, subject: Subject, ids: list[str], entities: PersonalEntities | None = None
) -> set[int]:
    """Personal entities named by any spelling of an identifier (case-insensitive; phones by digits)."""
    names = {s.lower() for _k, s in spellings(subject, ids)}
    phone = re.sub(r"\D", "", subject.phone or "")
    return (entities if entities is not None else PersonalEntities.read(conn)).named(names, phone)


def subject_entities(
    conn: apsw.Connection, subject: Subject, frames: set[int], ids: list[str], entities: PersonalEntities | None = None
) -> set[int]:
    """Personal entities named by an identifier that no one else's frame links (a namesake's person
    entity is shared, not the subject's), and entities whose every link is to `frames`."""
    named = named_entities(conn, subject, ids, entities)
    named -= _ids(
        conn,
        f"SELECT DISTINCT entity_id FROM kg_entity_frames WHERE entity_id {IN_IDS} AND frame_id NOT {IN_IDS}",
        json_list(named),
        json_list(frames),
    )
    return named | exclusive_entities(conn, frames)


def exclusive_entities(conn: apsw.Connection, frames: set[int]) -> set[int]:
    """Entities linked to `frames` and to no other frame. Each linked entity's links are read only up
    to the first one outside `frames`: a topic that a million frames link costs one row, not all of them."""
    fj = json_list(frames)
    return _ids(
        conn,
        f"SELECT DISTINCT l.entity_id FROM kg_entity_frames l WHERE l.frame_id {IN_IDS}"
        " AND NOT EXISTS (SELECT 1 FROM kg_entity_frames o WHERE o.entity_id = l.entity_id"
        f" AND o.frame_id NOT {IN_IDS})",
        fj,
        fj,
    )


def resolve_keys(
    conn: apsw.Connection,
    subject: Subject,
    ids: list[str] | None = None,
    entities: PersonalEntities | None = None,
    not_bystanders: Collection[str] = (),
) -> SubjectKeys:
    """Every key that reaches the subject (under any of its store `ids`), from the store as it is now
    (`entities`: the store's personal entities, when a window has read them already). The processors'
    bystander samples leave out `not_bystanders`: the store ids of other erasures, whose deletion calls
    run with no lock of the store held and may land between this fingerprint and its verification."""
    ids = ids or [subject.id]
    sid = json_list(ids)
    pairs = subject_pairs(conn, sid)
    # A conversation is not a person: where someone else has items in it too, only the subject's own
    # items are theirs (by subject id, and turn frames by their item's key); a conversation only they
    # are in is theirs whole (rows filed under it without a subject too).
    pairs -= shared_pairs(conn, sid, pairs)
    pj = json_pairs(pairs)
    archive_ids = _ids(conn, f"SELECT archive_id FROM raw_archive WHERE subject_id {IN_IDS}", sid)
    archive_ids |= _ids(conn, f"SELECT archive_id FROM raw_archive WHERE {pairs_in()}", pj)
    turn_keys = {f"{s}/{r}" for s, r in pairs}
    frames = episodic_frames(conn, sid, archive_ids, turn_keys) | item_turns(conn, sid)
    derived = derived_closure(conn, frames, quoting_derived(conn, subject, ids))
    all_frames = frames | derived
    fj = json_list(all_frames)
    subject_ents = subject_entities(conn, subject, all_frames, ids, entities)
    ej = json_list(subject_ents)
    processors = _strs(conn, f"SELECT DISTINCT processor FROM subprocessor_records WHERE subject_id {IN_IDS}", sid)
    return SubjectKeys(
        source_refs=sorted(pairs),
        archive_ids=sorted(archive_ids),
        frame_ids=sorted(frames),
        turn_keys=sorted(turn_keys),
        derived_frame_ids=sorted(derived),
        chunk_ids=sorted(_ids(conn, f"SELECT chunk_id FROM frame_chunks WHERE frame_id {IN_IDS}", fj)),
        entity_ids=sorted(subject_ents),
        relation_ids=sorted(
            _ids(
                conn,
                f"SELECT relation_id FROM kg_relations WHERE frame_id {IN_IDS} OR src_entity_id {IN_IDS}"
                f" OR dst_entity_id {IN_IDS}",
                fj,
                ej,
                ej,
            )
        ),
        blob_keys=sorted(
            _strs(conn, f"SELECT blob_key FROM blobs WHERE subject_id {IN_IDS}", sid)
            | _strs(conn, f"SELECT blob_key FROM blobs WHERE {pairs_in()}", pj)
        ),
        example_ids=sorted(
            _ids(conn, f"SELECT example_id FROM ft_examples WHERE subject_id {IN_IDS}", sid)
            | _ids(conn, f"SELECT example_id FROM ft_examples WHERE {pairs_in()}", pj)
        ),
        session_ids=sorted(
            _strs(conn, f"SELECT session_id FROM working_sessions WHERE subject_id {IN_IDS}", sid)
            | _strs(conn, f"SELECT session_id FROM working_sessions WHERE {pairs_in()}", pj)
        ),
        audit_commitments=sorted(_strs(conn, f"SELECT commitment FROM audit_vault WHERE subject_id {IN_IDS}", sid)),
        recall_cache_ids=sorted(_ids(conn, f"SELECT cache_id FROM recall_cache WHERE frame_id {IN_IDS}", fj)),
        subprocessors=sorted(processors),
        subprocessor_bystanders={
            p: sorted(
                _strs(
                    conn,
                    "SELECT DISTINCT subject_id FROM subprocessor_records WHERE processor = ?"
                    f" AND subject_id NOT {IN_IDS}"
                    " AND remote_ref IS NOT NULL ORDER BY subject_id LIMIT ?",
                    p,
                    json_list([*ids, *not_bystanders]),
                    BYSTANDER_SAMPLE,
                )
            )
            for p in _strs(conn, "SELECT name FROM subprocessors")
        },
    )
