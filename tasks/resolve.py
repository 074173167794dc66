"""Reaching the subject through every key the store has (reference 000: three keys and a fixpoint).

- subject_id: summary frames, archive rows, sessions, blobs, examples, processor records, audit vault;
- (source, source_ref) of the subject's items: rows of sessions, blobs and examples that carry no
  subject (a conversation is not a person: rows of another subject in it are theirs);
- the item keys of the subject's archive rows: the verbatim turn frames through
  turn_key = '<source>/<source_ref>' and their item_key (they carry no archive link);
- archive_id: summary frames linked to the subject's archive rows;
- frame_refs: derived frames that reference an erased frame, to a fixpoint;
- any spelling of any identifier in a derived frame's text (`tasks.mentions`): derived frames that
  quote the subject without a reference.
"""

from __future__ import annotations

from collections.abc import Iterable

import apsw

from erasure.identity import Identity
from memory.items import item_key
from tasks.mentions import derived_mentioning
from tasks.tier_step import in_list


def subject_sources(conn: apsw.Connection, subject_id: str) -> set[tuple[str, str]]:
    """Every (source, source_ref) under which the store filed something of the subject."""
    out: set[tuple[str, str]] = set()
    for table in ("raw_archive", "working_sessions", "blobs", "ft_examples", "subprocessor_records"):
        out |= {
            (r[0], r[1])
            for r in conn.execute(
                f"SELECT source, source_ref FROM {table} WHERE subject_id = ? AND source IS NOT NULL", (subject_id,)
            )
        }
    return out


def archive_ids(conn: apsw.Connection, subject_id: str) -> set[int]:
    """Archive rows of the subject that are not yet redacted (never another subject's row of the same
    conversation)."""
    return {
        int(r[0])
        for r in conn.execute(
            "SELECT archive_id FROM raw_archive WHERE subject_id = ? AND erased_at IS NULL", (subject_id,)
        )
    }


def subject_items(conn: apsw.Connection, secret: bytes, subject_id: str) -> set[tuple[str, str, str]]:
    """(source, source_ref, item key) of the subject's live archive rows; a row archived before items
    had keys gets the key ingest gives the same item now (its subject and content)."""
    return {
        (str(s), str(r), str(k) if k is not None else item_key(secret, str(s), str(r), subject_id, str(c)))
        for s, r, k, c in conn.execute(
            "SELECT source, source_ref, item_key, content FROM raw_archive WHERE subject_id = ? AND erased_at IS NULL",
            (subject_id,),
        )
    }


def primary_frames(conn: apsw.Connection, subject_id: str, archives: Iterable[int]) -> set[int]:
    """Summary frames (by subject and by archive link) and verbatim turn frames (by the turn keys of
    `archives`: the subject's items, not their conversations)."""
    ids = {int(r[0]) for r in conn.execute("SELECT frame_id FROM frames WHERE subject_id = ?", (subject_id,))}
    a = list(archives)
    for i in range(0, len(a), 500):
        b = a[i : i + 500]
        ids |= {
            int(r[0]) for r in conn.execute(f"SELECT frame_id FROM frames WHERE archive_id IN ({in_list(len(b))})", b)
        }
        for source, ref, key in conn.execute(
            f"SELECT source, source_ref, item_key FROM raw_archive WHERE archive_id IN ({in_list(len(b))})", b
        ):
            ids |= {
                int(r[0])
                for r in conn.execute(
                    "SELECT frame_id FROM frames WHERE turn_key = ? AND item_key IS ? AND kind = 'turn'",
                    (f"{source}/{ref}", key),
                )
            }
    return ids


def quoting_frames(conn: apsw.Connection, identity: Identity) -> set[int]:
    """Derived frames whose text names the subject (any identifier, in any spelling or letter case)
    without a reference."""
    return derived_mentioning(conn, identity)


def derived_closure(conn: apsw.Connection, seeds: Iterable[int]) -> set[int]:
    """Derived frames that reference any frame in `seeds`, then frames referencing those, to a fixpoint."""
    seen: set[int] = set()
    frontier = list(set(seeds))
    all_frames = set(frontier)
    while frontier:
        nxt: set[int] = set()
        for i in range(0, len(frontier), 500):
            b = frontier[i : i + 500]
            nxt |= {
                int(r[0])
                for r in conn.execute(f"SELECT frame_id FROM frame_refs WHERE ref_frame_id IN ({in_list(len(b))})", b)
            }
        nxt -= all_frames
        seen |= nxt
        all_frames |= nxt
        frontier = list(nxt)
    return seen
