"""Harvest the byte-scan needles from the store before the cascade (see `probes.needles` for the rules).

Everything is read through the probes' read-only handle and the files under the store directory.
Bounded: at most `MAX_CONTENT_GROUPS` content windows, `MAX_VECTOR_GROUPS` vectors (sampled evenly)
and `MAX_CANARIES` canaries, so a subject with thousands of frames still compiles and scans quickly;
what was left out is counted in the stats (`*_not_sampled`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import apsw
from pydantic import BaseModel, ConfigDict, Field

from erasure.subject import Subject
from probes.identity import spellings
from probes.keys import SubjectKeys
from probes.matcher import Matcher
from probes.needles import (
    MIN_IDENTIFIER_BYTES,
    NeedleKind,
    NeedleSet,
    blob_pieces,
    distinctive_pieces,
    plain_windows,
)
from probes.resolve import IN_IDS, fts_hit_outside
from probes.rule import Person, Rule
from probes.store import column, json_list, local_blob_roots

MAX_CONTENT_GROUPS = 256
MAX_VECTOR_GROUPS = 64
MAX_CANARIES = 16
CANARY_CANDIDATES = 400


class VectorRef(BaseModel):
    """One of the subject's vectors, kept for the nearest-neighbour probe."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")

    table: str
    """`frame_vectors` or `chunk_vectors`."""
    id: int
    embedding: bytes = Field(repr=False)


@dataclass
class Harvest:
    """The needles and the vectors chosen for one subject."""

    needles: NeedleSet = field(default_factory=NeedleSet)
    vectors: list[VectorRef] = field(default_factory=list)


class Facts(Protocol):
    """What the needle choice asks of the whole store (`probes.store_facts.StoreFacts`, read once a window)."""

    @property
    def vector_holders(self) -> dict[bytes, set[tuple[str, int]]]: ...

    def belongs_to_someone_else(self, spelling: str, mine: set[str]) -> bool: ...


def harvest(
    conn: apsw.Connection,
    store_dir: Path,
    subject: Subject,
    keys: SubjectKeys,
    ids: list[str],
    *,
    facts: Facts,
    window_ids: set[str],
    canaries: list[str],
) -> Harvest:
    """Choose needles: identifiers, content windows, vector pieces, blob pieces, bystander canaries.

    `window_ids` are the store ids of every subject erased with this one (its own included): a spelling
    that is part of theirs is the window's, not a bystander's. `canaries` are the window's
    (`canary_windows`)."""
    h = Harvest()
    mine = set(keys.all_frame_ids())
    _identifiers(
        subject,
        ids,
        facts,
        window_ids | set(ids),
        h.needles,
        ordinary=lambda word: fts_hit_outside(conn, word, json_list(mine)),
    )
    _others_keys(conn, subject, ids, h.needles)
    _content(conn, keys, json_list(mine), h.needles)
    _vectors(conn, keys, mine, facts, h)
    _blobs(conn, store_dir, subject, keys, h.needles)
    for window in canaries:
        h.needles.add_group(NeedleKind.canary, [window.encode()])
    return h


def _identifiers(
    subject: Subject,
    ids: list[str],
    facts: Facts,
    window_ids: set[str],
    out: NeedleSet,
    *,
    ordinary: Callable[[str], bool] = lambda _word: False,
) -> None:
    """Every spelling of every identifier, matched in any letter case. None is withheld silently: a
    spelling too short to mean anything is counted (`identifier_withheld_short`), and one that is also
    the own identifier of someone outside the window (another subject id, or the name of an entity that
    their frames link: a namesake's person, a household phone) is searched as `shared_identifier`
    (hits reported, not residue); so is an id that is a word (letters only) which other people's
    frames hold as ordinary text (`ordinary`: "hiking in Jordan" for the id `jordan`): such a hit is
    ambiguous, reported and never called residue (`identifier_ambiguous:id`)."""
    for kind, spelling in spellings(subject, ids):
        data = spelling.encode()
        if len(data) < MIN_IDENTIFIER_BYTES:
            out.bump(f"identifier_withheld_short:{kind}")
        elif facts.belongs_to_someone_else(spelling, window_ids):
            if out.add_group(NeedleKind.shared_identifier, [data], caseless=True, ident=kind):
                out.bump(f"identifier_shared:{kind}")
        elif kind == "id" and spelling.isalpha() and ordinary(spelling):
            if out.add_group(NeedleKind.shared_identifier, [data], caseless=True, ident=kind):
                out.bump("identifier_ambiguous:id")
        else:
            out.add_group(NeedleKind.identifier, [data], caseless=True, ident=kind)


OTHERS_KEYS = "identifier_in_others_key"
"""Stat: source keys of other people's items that name the subject (docs/matching.md 7.2)."""


def _others_keys(conn: apsw.Connection, subject: Subject, ids: list[str], out: NeedleSet) -> None:
    """Source keys of other people's items (a conversation they share with the subject, named after them):
    the erasure may not rewrite another person's key, so each is searched as a shared identifier (a hit
    inside it is theirs, counted, never residue) and counted in `OTHERS_KEYS`, which the pack declares."""
    person = Person(
        ids=tuple(ids),
        emails=(subject.email,) if subject.email else (),
        names=(subject.name,) if subject.name else (),
        phones=(subject.phone,) if subject.phone else (),
    )
    rule = Rule(person)
    try:
        refs = column(
            conn,
            f"SELECT DISTINCT source_ref FROM raw_archive WHERE subject_id IS NULL OR subject_id NOT {IN_IDS}",
            (json_list(ids),),
        )
    except apsw.Error:
        return
    named = [r for r in refs if isinstance(r, str) and any(not f.ambiguous for f in rule.find(r))]
    for ref in named:
        if out.add_group(NeedleKind.shared_identifier, [ref.encode()], caseless=True, ident="key"):
            out.bump(OTHERS_KEYS)


def _content(conn: apsw.Connection, keys: SubjectKeys, mine: str, out: NeedleSet) -> None:
    texts = column(
        conn,
        f"SELECT content FROM raw_archive WHERE archive_id {IN_IDS} AND content IS NOT NULL ORDER BY archive_id",
        (json_list(keys.archive_ids),),
    )
    texts += column(
        conn,
        f"SELECT content FROM frames WHERE frame_id {IN_IDS} AND kind = 'summary' ORDER BY frame_id",
        (json_list(keys.frame_ids),),
    )
    kept = 0
    for text in texts:
        for window in plain_windows(str(text)):
            if kept >= MAX_CONTENT_GROUPS:
                out.bump("content_not_sampled")
            elif fts_hit_outside(conn, window, mine):
                out.bump("content_withheld_shared")
            elif out.add_group(NeedleKind.content, [window.encode()]):
                kept += 1


def _even_sample(items: Sequence[tuple[str, int]], n: int) -> list[tuple[str, int]]:
    if len(items) <= n:
        return list(items)
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


def _vector_refs(keys: SubjectKeys) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    refs = [("frame_vectors", i) for i in keys.all_frame_ids()] + [("chunk_vectors", i) for i in keys.chunk_ids]
    return refs, _even_sample(refs, MAX_VECTOR_GROUPS)


def sample_vectors(conn: apsw.Connection, keys: SubjectKeys) -> list[tuple[str, int, bytes | None]]:
    """The subject's vectors the needles are cut from (evenly sampled): (table, id, embedding or None)."""
    out: list[tuple[str, int, bytes | None]] = []
    for table, rid in _vector_refs(keys)[1]:
        key = "frame_id" if table == "frame_vectors" else "chunk_id"
        row = conn.execute(f"SELECT embedding FROM {table} WHERE {key} = ?", (rid,)).fetchone()
        out.append((table, rid, None if row is None else bytes(row[0])))
    return out


def _vectors(conn: apsw.Connection, keys: SubjectKeys, mine: set[int], facts: Facts, h: Harvest) -> None:
    refs, picked = _vector_refs(keys)
    h.needles.bump("vector_not_sampled", len(refs) - len(picked))
    own = {("frame_vectors", i) for i in mine} | {("chunk_vectors", i) for i in keys.chunk_ids}
    for table, rid, emb in sample_vectors(conn, keys):
        if emb is None:
            h.needles.bump("vector_missing")
            continue
        # An identical vector that is not the subject's (the same text embedded for someone else).
        if facts.vector_holders.get(emb, set()) - own:
            h.needles.bump("vector_withheld_twin")
            continue
        h.vectors.append(VectorRef(table=table, id=rid, embedding=emb))
        pieces = [p for _at, p in distinctive_pieces(emb)]
        if not pieces:
            h.needles.bump("vector_withheld_sparse")
        elif not h.needles.add_group(NeedleKind.vector, pieces):
            h.needles.bump("vector_duplicate")


def _blobs(conn: apsw.Connection, store_dir: Path, subject: Subject, keys: SubjectKeys, out: NeedleSet) -> None:
    roots, _remote = local_blob_roots(conn, store_dir)
    for key in keys.blob_keys:
        shared = conn.execute(
            "SELECT 1 FROM blobs b JOIN blobs o ON o.sha256 = b.sha256 AND o.blob_key != b.blob_key"
            " WHERE b.blob_key = ? AND o.subject_id IS NOT ? LIMIT 1",
            (key, subject.id),
        ).fetchone()
        if shared:
            out.bump("blob_withheld_shared")
            continue
        pieces = _read_blob_pieces(roots, key)
        if pieces is None:
            out.bump("blob_unreadable")
        elif not pieces or not out.add_group(NeedleKind.blob, pieces):
            out.bump("blob_withheld_plain")


def _read_blob_pieces(roots: Sequence[Path], key: str) -> list[bytes] | None:
    for root in roots:
        path = root / key[:2] / key
        try:
            with open(path, "rb") as f:
                head = f.read(4096)
                size = f.seek(0, 2)
                f.seek(size // 2)
                middle = f.read(4096)
        except OSError:
            continue
        return blob_pieces(head, middle)
    return None


def canary_windows(conn: apsw.Connection, window_ids: set[str], idents: list[str], frames: set[int]) -> list[str]:
    """Windows of bystanders' short frames (short: stored in one page, never split) outside the window
    (`window_ids`, `frames`) that name no subject of the window in any spelling (`idents`: a frame that
    mentions one is rewritten by the erasure). The same for every subject of a window: read once."""
    rows = [
        (int(fid), str(text))
        for fid, text in conn.execute(
            "SELECT frame_id, content FROM frames WHERE kind != 'derived' AND length(content) BETWEEN 40 AND 2000"
            " AND (subject_id IS NULL OR subject_id NOT IN (SELECT value FROM json_each(?)))"
            " ORDER BY frame_id LIMIT ?",
            (json_list(window_ids), CANARY_CANDIDATES),
        )
    ]
    candidates = []
    spelled = Matcher([("identifier", i) for i in idents])  # any spelling or encoding of one of them
    for fid, text in rows:
        squeezed = "".join(ch for ch in text.lower() if ch.isalnum() or ch in "@.")
        if fid in frames or any(i in text.lower() or i.lstrip("+") in squeezed for i in idents):
            continue
        hits: dict[int, int] = {}
        spelled.match_text(text, hits)
        if hits:
            continue
        candidates += [w for w in plain_windows(text, limit=1) if not any(i in w for i in idents)]
    step = max(1, len(candidates) // MAX_CANARIES)
    return candidates[::step][:MAX_CANARIES]
