"""The facts about the whole store that every subject's needle choice consults (`probes.harvest.Facts`):
every store id, the entity names other people's frames link, which rows hold each of the window's
vectors. `StoreFacts` reads each once per window (`probes.window`)."""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from functools import cached_property

import apsw

from probes.identity import ID_TABLES, email_entities, ids_by_fold
from probes.needles import distinctive_pieces
from probes.resolve import PersonalEntities
from probes.vector_matcher import VectorMatcher

VECTOR_BATCH = 50_000

VECTOR_TABLES = {"frame_vectors": "frame_id", "chunk_vectors": "chunk_id"}


class _Lines:
    """Lower-cased strings joined by newlines, searched for a substring at C speed, each hit mapped back
    to the owners of the line it falls in."""

    def __init__(self, owned: dict[str, set[str]]) -> None:
        self._keys = sorted(owned)
        self._owners = [owned[k] for k in self._keys]
        self._starts: list[int] = []
        at = 0
        for k in self._keys:
            self._starts.append(at)
            at += len(k) + 1
        self._text = "\n".join(self._keys)

    def owned_by_other(self, needle: str, mine: set[str]) -> bool:
        """Whether a line containing `needle` (lower-cased) has an owner outside `mine`."""
        if not needle or "\n" in needle:
            return False
        pos = self._text.find(needle)
        while pos != -1:
            line = bisect.bisect_right(self._starts, pos) - 1
            if self._owners[line] - mine:
                return True
            end = self._starts[line] + len(self._keys[line])
            pos = self._text.find(needle, max(pos + 1, end - len(needle) + 1))
        return False


@dataclass
class StoreFacts:
    """Facts about the whole store that every subject's needle choice consults, read once per window."""

    conn: apsw.Connection
    wanted_vectors: set[bytes] = field(default_factory=set)
    """Embeddings whose holders `vector_holders` must find (the subjects' sampled vectors)."""

    @cached_property
    def store_ids(self) -> list[str]:
        """Every subject id the store holds, in any table."""
        ids: set[str] = set()
        for table in ID_TABLES:
            ids |= {
                str(r[0])
                for r in self.conn.execute(f"SELECT DISTINCT subject_id FROM {table} WHERE subject_id IS NOT NULL")
            }
        return sorted(ids)

    @cached_property
    def ids_by_fold(self) -> dict[str, set[str]]:
        """Every store id, by its NFKC case-folded form."""
        return ids_by_fold(self.store_ids)

    @cached_property
    def emails(self) -> dict[str, list[int]]:
        """Every email entity by address (stripped, lower-cased)."""
        return email_entities(self.conn)

    @cached_property
    def personal_entities(self) -> PersonalEntities:
        """Every person/email/phone entity by the forms an identifier can name it in."""
        return PersonalEntities.read(self.conn)

    @cached_property
    def id_lines(self) -> _Lines:
        """Every store id, lower-cased, with the ids spelled that way."""
        owned: dict[str, set[str]] = {}
        for sid in self.store_ids:
            owned.setdefault(sid.lower(), set()).add(sid)
        return _Lines(owned)

    @cached_property
    def entity_lines(self) -> _Lines:
        """Every entity name (lower-cased) that a subject's frame links, with those subjects' ids."""
        owned: dict[str, set[str]] = {}
        for name, sid in self.conn.execute(  # lower-cased here: SQLite's lower() leaves "Ö" as it is
            "SELECT DISTINCT e.name, f.subject_id FROM kg_entities e"
            " JOIN kg_entity_frames l ON l.entity_id = e.entity_id JOIN frames f ON f.frame_id = l.frame_id"
            " WHERE f.subject_id IS NOT NULL"
        ):
            owned.setdefault(str(name).lower(), set()).add(str(sid))
        return _Lines(owned)

    @cached_property
    def vector_holders(self) -> dict[bytes, set[tuple[str, int]]]:
        """For each wanted embedding, every (table, row id) that holds exactly its bytes: one pass over
        each vector table (sqlite-vec's own k-nearest-neighbour search is a full scan per query too)."""
        return self._vector_pass[0]

    @cached_property
    def piece_holders(self) -> dict[bytes, set[tuple[str, int]]]:
        """For each needle piece of a wanted embedding, every (table, row id) whose vector holds it at
        the same place (from the same pass)."""
        return self._vector_pass[1]

    @cached_property
    def _vector_pass(self) -> tuple[dict[bytes, set[tuple[str, int]]], dict[bytes, set[tuple[str, int]]]]:
        whole: dict[bytes, set[tuple[str, int]]] = {e: set() for e in self.wanted_vectors}
        pieces: dict[bytes, set[tuple[str, int]]] = {}
        wanted_at: dict[int, set[bytes]] = {}  # byte offset in the vector -> pieces wanted there
        for e in self.wanted_vectors:
            for at, p in distinctive_pieces(e):
                pieces[p] = set()
                wanted_at.setdefault(at, set()).add(p)
        if not whole:
            return whole, pieces
        matcher = VectorMatcher(whole, wanted_at)
        for table, key in VECTOR_TABLES.items():
            cursor = self.conn.execute(f"SELECT {key}, embedding FROM {table}")
            while rows := [(int(rid), bytes(emb)) for rid, emb in itertools.islice(cursor, VECTOR_BATCH)]:
                for rid, data, offset in matcher.holders(rows):
                    (whole[data] if offset is None else pieces[data]).add((table, rid))
        return whole, pieces

    def belongs_to_someone_else(self, spelling: str, mine: set[str]) -> bool:
        """Whether `spelling` is part of the own identifiers of someone outside `mine` (ids): another
        store id, or the name of an entity that such a person's frames link."""
        low = spelling.lower()
        return self.id_lines.owned_by_other(low, mine) or self.entity_lines.owned_by_other(low, mine)
