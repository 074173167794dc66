"""Probing a window of subjects at once: what every subject's probe needs from the whole store is read
once, and what each subject adds is looked up by its keys.

An erasure window erases several subjects under one store lock. Their probes share:
- the store facts the needle choice needs (every store id, the entity names other people's frames link,
  which rows hold each of the subjects' vectors): `StoreFacts`, read once;
- one byte scan of the store with every subject's needles before the cascade and one after, each
  distinct needle once (the canaries are the window's; hyperscan reports a needle's index, the index
  says whose it is);
- the bystander baseline: the window is one erasure of a set of people, so a bystander is anyone
  outside it. The tier probes measure once with the union of the subjects' keys: that gives the
  window's bystander populations (what must survive) and, after the cascade, the union's residue. When
  the union's residue on a tier is 0, every subject's is (each probe counts items matching keys); only
  a tier with residue is probed again subject by subject, to say whose it is.
A needle that names a co-subject of the window is the window's (it will be erased too), and canaries
are cut from people outside the window, so no co-subject's erasure reads as a bystander lost.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

import apsw
import numpy as np
import numpy.typing as npt

from erasure.errors import ErasureError, InputError
from erasure.subject import Subject
from probes import byte_residue
from probes.bytescan import ScannedFile, scan_tree
from probes.context import ProbeContext
from probes.fingerprint_model import Fingerprint
from probes.folded import folded_groups
from probes.harvest import canary_windows, harvest, sample_vectors
from probes.identity import ID_TABLES, email_entities, ids_by_fold, spellings, store_ids_in
from probes.keys import SubjectKeys
from probes.located import residue_files
from probes.model import (
    BYTES,
    DEFAULT_HTTP_TIMEOUT,
    PROBE_TIERS,
    Measurement,
    OthersContent,
    ProbeResult,
    ResidueFile,
    Unscanned,
    Verification,
    population_key,
)
from probes.needles import SUBJECT_KINDS, VECTOR_PIECE_BYTES, Needle, NeedleKind, distinctive_pieces
from probes.registry import MEASURES
from probes.resolve import PersonalEntities, exclusive_entities, resolve_keys
from probes.store import BLOBS_DIR, CORPORA_DIR, DB_FILE, SESSIONS_DIR, open_store
from probes.views import scan_views

VECTOR_BATCH = 50_000
_BASE = 0x9E3779B97F4A7C15  # odd: invertible modulo 2**64
_BASE_INV = pow(_BASE, -1, 2**64)
_BITMAP_BITS = 24
_MAX_WORDS = 4096


def _powers(base: int, n: int) -> npt.NDArray[np.uint64]:
    out = np.empty(n, dtype=np.uint64)
    x = 1
    for i in range(n):
        out[i] = x
        x = x * base % 2**64
    return out


def _poly_hash(words: bytes) -> int:
    """sum(w[j] * BASE**(len-1-j)) mod 2**64 over the 32-bit words: what `_VectorMatcher` computes for
    any window of a row from its prefix sums."""
    h = 0
    for w in np.frombuffer(words, dtype="<u4").tolist():
        h = (h * _BASE + w) % 2**64
    return h


_POW = _powers(_BASE, _MAX_WORDS + 1)
_POW_INV = _powers(_BASE_INV, _MAX_WORDS)


class _VectorMatcher:
    """Which rows of a batch hold a wanted vector whole, or a wanted piece at its offset (any float
    offset). A polynomial hash of every window comes from one prefix sum per row, computed at C speed
    (numpy); the rows and offsets whose hash a bitmap of the wanted hashes admits are compared byte for
    byte."""

    def __init__(self, whole: Iterable[bytes], wanted_at: dict[int, set[bytes]]) -> None:
        self._whole = {w for w in whole if len(w) % 4 == 0}
        self._at = {at: ws for at, ws in wanted_at.items() if at % 4 == 0}
        self._bitmap = np.zeros(1 << _BITMAP_BITS, dtype=bool)
        for w in [*self._whole, *(p for ws in self._at.values() for p in ws)]:
            self._bitmap[_poly_hash(w) & ((1 << _BITMAP_BITS) - 1)] = True

    def holders(self, rows: list[tuple[int, bytes]]) -> Iterator[tuple[int, bytes, int | None]]:
        """(row id, the wanted bytes it holds, their offset or None for the whole vector)."""
        by_size: dict[int, list[tuple[int, bytes]]] = {}
        for rid, data in rows:
            by_size.setdefault(len(data), []).append((rid, data))
        mask = np.uint64((1 << _BITMAP_BITS) - 1)
        for size, same in by_size.items():
            if size % 4 or size // 4 > _MAX_WORDS:
                yield from self._byte_by_byte(same)
                continue
            d = size // 4
            words = np.frombuffer(b"".join(r for _i, r in same), dtype="<u4").reshape(len(same), d)
            # prefix[k, row] = sum of the row's first k words, each times BASE**-index: one row per k, so
            # the windows of every offset come out of one gather.
            prefix = np.zeros((d + 1, len(same)), dtype=np.uint64)
            np.cumsum(words.T.astype(np.uint64) * _POW_INV[:d, None], axis=0, out=prefix[1:])
            starts = [at // 4 for at in self._at if at // 4 + VECTOR_PIECE_BYTES // 4 <= d]
            if any(len(w) == size for w in self._whole):
                for i in np.flatnonzero(self._bitmap[(prefix[d] * _POW[d - 1]) & mask]):
                    rid, data = same[int(i)]
                    if data in self._whole:
                        yield rid, data, None
            if not starts:
                continue
            width = VECTOR_PIECE_BYTES // 4
            at = np.array(starts)
            hashes = (prefix[at + width] - prefix[at]) * _POW[at + width - 1][:, None]
            for k, i in zip(*np.nonzero(self._bitmap[hashes & mask]), strict=True):
                rid, data = same[int(i)]
                offset = 4 * starts[int(k)]
                got = data[offset : offset + VECTOR_PIECE_BYTES]
                if got in self._at[offset]:
                    yield rid, got, offset

    def _byte_by_byte(self, rows: list[tuple[int, bytes]]) -> Iterator[tuple[int, bytes, int | None]]:
        for rid, data in rows:
            if data in self._whole:
                yield rid, data, None
            for at, wanted in self._at.items():
                got = data[at : at + VECTOR_PIECE_BYTES]
                if got in wanted:
                    yield rid, got, at


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
        matcher = _VectorMatcher(whole, wanted_at)
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


@dataclass(frozen=True)
class Member:
    """One subject of a window, as the probes resolved it before the cascade."""

    subject: Subject
    ids: list[str]
    keys: SubjectKeys


def _members(conn: apsw.Connection, facts: StoreFacts, subjects: Sequence[Subject]) -> list[Member]:
    out = []
    for s in subjects:
        ids = store_ids_in(conn, s, facts.ids_by_fold, facts.emails)
        out.append(Member(s, ids, resolve_keys(conn, s, ids, facts.personal_entities)))
    return out


def merged_keys(keys: Iterable[SubjectKeys], window_ids: set[str]) -> SubjectKeys:
    """The union of several subjects' keys; processors' bystander samples lose the window's own ids."""
    ks = list(keys)
    data: dict[str, object] = {}
    for name in SubjectKeys.model_fields:
        if name == "subprocessor_bystanders":
            merged: dict[str, set[str]] = {}
            for k in ks:
                for proc, refs in k.subprocessor_bystanders.items():
                    merged.setdefault(proc, set()).update(r for r in refs if r not in window_ids)
            data[name] = {p: sorted(r) for p, r in merged.items()}
        elif name == "source_refs":
            data[name] = sorted({tuple(p) for k in ks for p in k.source_refs})
        else:
            data[name] = sorted({v for k in ks for v in getattr(k, name)})
    return SubjectKeys.model_validate(data)


def _union(fps: Sequence[Fingerprint], subjects: Sequence[Subject]) -> tuple[Fingerprint, tuple[Subject, ...]]:
    """One fingerprint standing for the whole window (keys, ids, needles and vectors of all)."""
    ids = sorted({i for fp in fps for i in fp.subject_ids} | {s.id for s in subjects})
    keys = merged_keys((fp.keys for fp in fps), set(ids))
    shared = {e for fp in fps for e in fp.window_entity_ids}
    keys = keys.model_copy(update={"entity_ids": sorted({*keys.entity_ids, *shared})})
    union = fps[0].model_copy(
        update={
            "subject_ids": ids,
            "keys": keys,
            "needles": [n for fp in fps for n in fp.needles],
            "vectors": [v for fp in fps for v in fp.vectors],
        }
    )
    return union, tuple(subjects[1:])


def _measure_tiers(ctx: ProbeContext, tiers: Iterable[str]) -> dict[str, list[Measurement] | Exception]:
    out: dict[str, list[Measurement] | Exception] = {}
    for tier in tiers:
        try:
            out[tier] = MEASURES[tier](ctx)
        except (ErasureError, apsw.Error, OSError) as exc:
            out[tier] = exc
    return out


def _scan(
    root: Path,
    owned: Sequence[Sequence[Needle]],
    *,
    manifest: bool = False,
    files_out: list[dict[int, list[str]]] | None = None,
) -> tuple[list[dict[int, int]], int, list[ScannedFile]]:
    """One scan of `root` for several owners' needles, each distinct needle once (a window's subjects
    share its canaries): per owner, the indexes (into its own list) found with their hit counts; the
    files that could not be read; and (`manifest`) every file read, with its size and SHA-256.
    `files_out` (one dict per owner): the files each found index was found in, by relative path."""
    distinct: dict[tuple[bytes, bool], list[tuple[int, int]]] = {}
    for who, needles in enumerate(owned):
        for i, x in enumerate(needles):
            distinct.setdefault((x.data, x.caseless), []).append((who, i))
    keys = list(distinct)
    report = scan_tree(
        root, [data for data, _c in keys], caseless={k for k, (_d, c) in enumerate(keys) if c}, manifest=manifest
    )
    hits: list[dict[int, int]] = [{} for _ in owned]
    for h in report.found:
        for who, i in distinct[keys[h.index]]:
            hits[who][i] = h.hits
            if files_out is not None:
                files_out[who][i] = h.files
    return hits, len(report.unreadable), list(report.files)


def _views(
    root: Path,
    owned: Sequence[Sequence[Needle]],
    *,
    report_unscanned: bool,
    set_aside: Callable[[str], str | None] | None = None,
    aside: list[dict[str, set[int]]] | None = None,
) -> tuple[list[set[int]], list[Unscanned]]:
    """One read of `root` through the decoded views for several owners' identifier and content needles:
    per owner, the indexes (into its own list) found; and what no view could read. Files `set_aside`
    labels are someone else's content: per owner, their finds go to `aside` by label."""
    distinct: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for who, needles in enumerate(owned):
        for i, x in enumerate(needles):
            if x.view()[0]:
                distinct.setdefault(x.view(), []).append((who, i))
    keys = list(distinct)
    report = scan_views(root, keys, report_unscanned=report_unscanned, set_aside=set_aside)
    found: list[set[int]] = [set() for _ in owned]
    for k in report.found:
        for who, i in distinct[keys[k]]:
            found[who].add(i)
    if aside is not None:
        for label, ks in report.set_aside.items():
            for k in ks:
                for who, i in distinct[keys[k]]:
                    if owned[who][i].kind in (NeedleKind.identifier, NeedleKind.content):
                        aside[who].setdefault(label, set()).add(i)
    return found, report.unscanned


def _others_content(store_dir: Path, fps: Sequence[Fingerprint]) -> Callable[[str], str | None]:
    """Which files of the store are someone else's content the erasure may not rewrite (docs/matching.md
    7.2): a blob file (`blobs/<location>/<xx>/<key>`) whose row names a subject outside the window
    (`attachment:<key>`, the key being random), and a SQLite database nobody configured as a store
    (`database:<sha256 of its first page>`). A find there is declared under that label, never residue."""
    mine = {i for fp in fps for i in (fp.subject_id, *fp.subject_ids)}
    owners: dict[str, str | None] = {}
    try:
        with open_store(store_dir) as conn:
            for key, sid in conn.execute("SELECT blob_key, subject_id FROM blobs"):
                owners[str(key)] = None if sid is None else str(sid)
    except Exception:  # no store yet, or no blobs table: no attachment is set aside
        owners = {}
    own_db = {DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm", f"{DB_FILE}-journal"}

    def label(rel: str) -> str | None:
        parts = rel.split("/")
        if len(parts) >= 3 and parts[0] == BLOBS_DIR:
            owner = owners.get(parts[-1], "")
            return f"attachment:{parts[-1]}" if owner and owner not in mine else None
        if rel in own_db:
            return None
        try:
            with open(store_dir / rel, "rb") as f:
                head = f.read(4096)
        except OSError:
            return None
        if head.startswith(b"SQLite format 3\x00"):
            return f"unconfigured-database:{hashlib.sha256(head).hexdigest()[:16]}"
        return None

    return label


def _found_by_owner(
    store_dir: Path,
    fps: Sequence[Fingerprint],
    *,
    manifest: bool = False,
    files_out: list[dict[int, list[str]]] | None = None,
) -> tuple[list[set[int]], list[dict[int, int]], int, list[ScannedFile]]:
    """One scan of the store with every subject's needles: per subject, the indexes (into its own
    needles) found and their hit counts; the files that could not be read; and (`manifest`) every file
    read (`files_out`: as `_scan`)."""
    hits, unreadable, files = _scan(store_dir, [fp.needles for fp in fps], manifest=manifest, files_out=files_out)
    return [set(h) for h in hits], hits, unreadable, files


def take_window(
    store_dir: Path, subjects: Sequence[Subject], *, http_timeout: float = DEFAULT_HTTP_TIMEOUT
) -> list[Fingerprint]:
    """Every subject's fingerprint before the cascade, with the window's shared bystander baseline."""
    if not subjects:
        return []
    store_dir = Path(store_dir)
    window = uuid.uuid4().hex
    with open_store(store_dir) as conn:
        facts = StoreFacts(conn)
        members = _members(conn, facts, subjects)
        window_ids = {i for m in members for i in m.ids}
        window_spellings = [s.lower() for m in members for _k, s in spellings(m.subject, m.ids)]
        for m in members:
            facts.wanted_vectors |= {emb for _t, _i, emb in sample_vectors(conn, m.keys) if emb is not None}
        window_frames = {f for m in members for f in m.keys.all_frame_ids()}
        canaries = canary_windows(conn, window_ids, window_spellings, window_frames)
        harvests = [
            harvest(conn, store_dir, m.subject, m.keys, m.ids, facts=facts, window_ids=window_ids, canaries=canaries)
            for m in members
        ]
        # Entities every link of which goes to the window's frames: no one subject's alone, but the
        # window's (the orphan sweep removes them once all its subjects are erased).
        shared_entities = exclusive_entities(conn, window_frames) - {e for m in members for e in m.keys.entity_ids}
    now = datetime.now(UTC)
    fps = [
        Fingerprint(
            subject_id=m.subject.id,
            subject_ids=m.ids,
            taken_at=now,
            keys=m.keys,
            needles=h.needles.needles,
            vectors=h.vectors,
            needle_stats=dict(h.needles.stats),
            window=window,
            window_entity_ids=sorted(shared_entities),
        )
        for m, h in zip(members, harvests, strict=True)
    ]
    # Vector pieces the store holds more often than the subject's own vectors do prove nothing (a sparse
    # embedding shares pieces with others): one scan counts them for every subject, then they go.
    # One scan: the byte baseline (what the scan could see before; canaries found) and each needle's
    # hit count, which the shared-piece rule needs; the needles it drops leave the baseline with them.
    all_found, hits, unreadable, _files = _found_by_owner(store_dir, fps)
    found: list[set[int]] = []
    kept_fps: list[Fingerprint] = []
    for fp, f, h, m in zip(fps, all_found, hits, members, strict=True):
        kept = _kept_needles(fp, h, m.keys, facts)
        renumber = {old: new for new, old in enumerate(kept)}
        found.append({renumber[i] for i in f if i in renumber})
        kept_fps.append(_keep(fp, kept))
    fps = kept_fps
    union, others = _union(fps, subjects)
    ctx = ProbeContext(
        store_dir=store_dir, subject=subjects[0], fingerprint=union, http_timeout=http_timeout, others=others
    )
    shared: dict[str, int] = {}
    union_before: dict[str, int] = {}
    for tier, measured in _measure_tiers(ctx, [t for t in PROBE_TIERS if t != BYTES]).items():
        if isinstance(measured, Exception):
            continue  # no baseline for it: the probe after reports it unchanged or as a probe error
        for x in measured:
            shared[population_key(tier, x.population)] = x.bystanders
            union_before[f"{tier}/{x.method}"] = x.residue
    out = []
    for fp, f in zip(fps, found, strict=True):
        # What each tier probe saw of the subject before: known per subject only in a window of one (in
        # a larger window the tier probes ran once for the union).
        before: dict[str, int] = dict(union_before) if len(fps) == 1 else {}
        bystanders = dict(shared)
        for x in byte_residue.measurements(fp.needles, f, unreadable, {}):
            bystanders[population_key(BYTES, x.population)] = x.bystanders
            before[f"{BYTES}/{x.method}"] = x.residue
        out.append(fp.model_copy(update={"bystanders": bystanders, "subject_before": before}))
    return out


def _kept_needles(fp: Fingerprint, hits: dict[int, int], keys: SubjectKeys, facts: StoreFacts) -> list[int]:
    """Drop vector pieces that someone else's vector holds too (a sparse embedding shares pieces with
    others): by the rows that hold the piece, and by the file's byte count (a copy in an
    un-checkpointed WAL, or a piece the page layout split when the baseline scan ran but a rebuild may
    join): either withholds it."""
    own_rows = {("frame_vectors", i) for i in keys.all_frame_ids()} | {("chunk_vectors", i) for i in keys.chunk_ids}
    own = [v.embedding for v in fp.vectors]
    shared = {
        i
        for i, n in enumerate(fp.needles)
        if n.kind is NeedleKind.vector
        and (facts.piece_holders.get(n.data, set()) - own_rows or hits.get(i, 0) > sum(e.count(n.data) for e in own))
    }
    return [i for i in range(len(fp.needles)) if i not in shared]


def _keep(fp: Fingerprint, kept: list[int]) -> Fingerprint:
    dropped = len(fp.needles) - len(kept)
    if not dropped:
        return fp
    stats = dict(fp.needle_stats)
    stats["vector_piece_withheld_shared"] = stats.get("vector_piece_withheld_shared", 0) + dropped
    return fp.model_copy(update={"needles": [fp.needles[i] for i in kept], "needle_stats": stats})


def verify_window(
    store_dir: Path,
    pairs: Sequence[tuple[Subject, Fingerprint]],
    *,
    tiers: Iterable[str] | None = None,
    http_timeout: float = DEFAULT_HTTP_TIMEOUT,
    extra_roots: Iterable[Path] = (),
) -> list[Verification]:
    """Probe every subject of the window after the cascade: one byte scan of the store (and of each
    extra root) with every subject's needles, the tier probes once with the union of their keys, and
    subject by subject only where the union found residue. Fingerprints taken in different windows (a
    rerun) are probed group by group: each group has its own bystander baseline."""
    for subject, fp in pairs:
        if fp.subject_id != subject.id:
            raise InputError("a fingerprint was taken for another subject")
    wanted = list(PROBE_TIERS) if tiers is None else [t for t in PROBE_TIERS if t in set(tiers)]
    unknown = sorted(set(tiers or ()) - set(PROBE_TIERS))
    if unknown:
        raise InputError(f"unknown probe tier(s): {', '.join(unknown)}")
    results: list[list[ProbeResult]] = [[] for _ in pairs]
    unscanned: list[Unscanned] = []
    scanned: dict[str, list[ScannedFile]] = {}
    others: list[list[OthersContent]] = [[] for _ in pairs]
    located: list[list[ResidueFile]] = [[] for _ in pairs]
    if BYTES in wanted:
        per_subject, unscanned, scanned, others, located = _byte_results(Path(store_dir), pairs, list(extra_roots))
        for i, found in enumerate(per_subject):
            results[i] += found
    groups: dict[str, list[int]] = {}
    for i, (_s, fp) in enumerate(pairs):
        groups.setdefault(fp.window or f"solo-{i}", []).append(i)
    for members in groups.values():
        for i, found in zip(
            members,
            _tier_results(
                Path(store_dir), [pairs[i] for i in members], [t for t in wanted if t != BYTES], http_timeout
            ),
            strict=True,
        ):
            results[i] += found
    order = {t: k for k, t in enumerate(PROBE_TIERS)}
    return [
        Verification(
            probes=sorted(r, key=lambda p: order[p.tier]),
            unscanned=unscanned,
            scanned=scanned,
            others_content=o,
            residue_files=where,
        )
        for r, o, where in zip(results, others, located, strict=True)
    ]


def _byte_results(
    store_dir: Path, pairs: Sequence[tuple[Subject, Fingerprint]], extra_roots: list[Path]
) -> tuple[
    list[list[ProbeResult]],
    list[Unscanned],
    dict[str, list[ScannedFile]],
    list[list[OthersContent]],
    list[list[ResidueFile]],
]:
    """Per subject, the byte probes' results (raw, folded and decoded views of the store; raw and
    decoded views of the home's other folders); the store's files no view could read; every file the raw
    scans read, by folder name (the scan manifest); per subject, where others' content names them; and
    per subject, the files the raw scans found them in."""
    fps = [fp for _s, fp in pairs]
    scanned: dict[str, list[ScannedFile]] = {}
    aside: list[dict[str, set[int]]] = [{} for _ in fps]
    store_files: list[dict[int, list[str]]] = [{} for _ in fps]
    try:
        found, _hits, unreadable, scanned[store_dir.name] = _found_by_owner(
            store_dir, fps, manifest=True, files_out=store_files
        )
        folded = folded_groups(store_dir, [fp.needles for fp in fps])
        viewed, unscanned = _views(
            store_dir,
            [fp.needles for fp in fps],
            report_unscanned=True,
            set_aside=_others_content(store_dir, fps),
            aside=aside,
        )
    except (ErasureError, OSError) as exc:
        return (
            [
                [
                    ProbeResult(
                        tier=BYTES,
                        method=f"probe-error:{type(exc).__name__}",
                        residue=1,
                        bystanders_before=0,
                        bystanders_after=0,
                    )
                ]
                for _ in pairs
            ],
            [],
            {},
            [[] for _ in pairs],
            [[] for _ in pairs],
        )
    # The home's other folders: identifiers and content only (what a copy or a log line would hold), raw
    # and through the decoded views (what no view reads there is the engine's own: not listed).
    homes: list[dict[str, int]] = [{} for _ in pairs]
    located: list[list[ResidueFile]] = [[] for _ in pairs]
    home_needles = [
        [n for n in fp.needles if n.kind in (NeedleKind.identifier, NeedleKind.content, NeedleKind.shared_identifier)]
        for fp in fps
    ]
    for root in extra_roots:
        if not root.is_dir() or not any(home_needles):
            continue
        here: list[dict[int, list[str]]] = [{} for _ in pairs]
        hits, unreadable_here, scanned[root.name] = _scan(root, home_needles, manifest=True, files_out=here)
        seen, _ = _views(root, home_needles, report_unscanned=False)
        for i, (needles, h) in enumerate(zip(home_needles, hits, strict=True)):
            kept = {
                j for j in _confirmed(needles, set(h), seen[i]) if needles[j].kind is not NeedleKind.shared_identifier
            }
            homes[i][root.name] = len({needles[j].group for j in kept})
            located[i] += residue_files(root.name, here[i], kept, lambda _rel: BYTES)
        unreadable += unreadable_here
    out = []
    for fp, f, fo, v, home, mine_aside in zip(
        fps, found, folded, viewed, homes, [list(a.values()) for a in aside], strict=True
    ):
        person_seen = any(fp.needles[i].kind is NeedleKind.identifier for i in v)
        f = _confirmed(fp.needles, f, v)
        set_aside = {i for found_there in mine_aside for i in found_there}
        if not any(fp.needles[i].kind is NeedleKind.content for i in v):
            # content found raw only where the views found it in someone else's content: theirs
            f = {i for i in f if not (fp.needles[i].kind is NeedleKind.content and i in set_aside)}
        measured = byte_residue.measurements(
            fp.needles, f, unreadable, home, folded=len(fo) if person_seen else 0, viewed=v
        )
        out.append(_paired(BYTES, measured, fp.bystanders))
        k = len(out) - 1
        residue_needles = {i for i in f if fp.needles[i].kind in SUBJECT_KINDS}
        located[k] = residue_files(store_dir.name, store_files[k], residue_needles, _store_tier) + located[k]
    others = [
        [
            OthersContent(
                tier="uploads" if label.startswith("attachment:") else BYTES,
                kind=label.partition(":")[0],
                label=label.partition(":")[2],
                hits=len(found_here),
            )
            for label, found_here in sorted(mine.items())
        ]
        for mine in aside
    ]
    tiers = [u.model_copy(update={"tier": _STORE_FOLDER_TIERS.get(u.folder, BYTES)}) for u in unscanned]
    return out, tiers, scanned, others, located


def _store_tier(rel: str) -> str:
    return _STORE_FOLDER_TIERS.get(rel.split("/", 1)[0] if "/" in rel else "", BYTES)


def _confirmed(needles: Sequence[Needle], raw: set[int], viewed: set[int]) -> set[int]:
    """The raw scan's finds, its identifiers only where the decoded views, which match identifiers by
    docs/matching.md, found the person too: a literal spelling inside a longer address, an invoice number
    or another word is not the person (the views' triggers hold every literal spelling, so they have read
    around each one). Counts are per spelling; the verdict needs one confirmed find."""
    if any(needles[i].kind is NeedleKind.identifier for i in viewed):
        return raw
    return {i for i in raw if needles[i].kind is not NeedleKind.identifier}


_STORE_FOLDER_TIERS = {BLOBS_DIR: "uploads", SESSIONS_DIR: "working", CORPORA_DIR: "fine_tune"}
"""Which tier wrote the files of each folder of the reference store (the rest: the byte scope)."""


def _paired(tier: str, measured: list[Measurement], baseline: dict[str, int]) -> list[ProbeResult]:
    return [
        ProbeResult(
            tier=tier,
            method=m.method,
            residue=m.residue,
            bystanders_before=baseline.get(population_key(tier, m.population), m.bystanders),
            bystanders_after=m.bystanders,
        )
        for m in measured
    ]


def _error(tier: str, exc: Exception) -> list[ProbeResult]:
    return [
        ProbeResult(
            tier=tier, method=f"probe-error:{type(exc).__name__}", residue=1, bystanders_before=0, bystanders_after=0
        )
    ]


def _tier_results(
    store_dir: Path, pairs: Sequence[tuple[Subject, Fingerprint]], tiers: list[str], http_timeout: float
) -> list[list[ProbeResult]]:
    subjects = [s for s, _fp in pairs]
    fps = [fp for _s, fp in pairs]
    union, others = _union(fps, subjects)
    baseline = fps[0].bystanders
    ctx = ProbeContext(
        store_dir=store_dir, subject=subjects[0], fingerprint=union, http_timeout=http_timeout, others=others
    )
    out: list[list[ProbeResult]] = [[] for _ in pairs]
    for tier, measured in _measure_tiers(ctx, tiers).items():
        if isinstance(measured, Exception):
            for r in out:
                r += _error(tier, measured)
            continue
        if len(pairs) == 1 or not any(m.residue for m in measured):
            for r in out:
                r += _paired(tier, measured, baseline)
            continue
        # Residue in the union: whose? Each subject's own probe of this tier gives its residue; the
        # bystanders stay the window's (a co-subject's items are not this subject's bystanders).
        window_population = {m.method: m.bystanders for m in measured}
        for (subject, fp), r in zip(pairs, out, strict=True):
            solo = ProbeContext(store_dir=store_dir, subject=subject, fingerprint=fp, http_timeout=http_timeout)
            own = _measure_tiers(solo, [tier])[tier]
            if isinstance(own, Exception):
                r += _error(tier, own)
                continue
            r += _paired(
                tier,
                [
                    Measurement(m.method, m.residue, m.population, window_population.get(m.method, m.bystanders))
                    for m in own
                ],
                baseline,
            )
    return out
