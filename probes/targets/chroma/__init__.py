"""Probing kind `chroma`: a Chroma `PersistentClient` directory, read with the probes' own code.

Nothing here goes through chromadb nor shares logic with the erasing side: chroma.sqlite3 is opened
read-only (`file:...?mode=ro`) and read with the probe's own queries (`store`), the HNSW files and the
FTS5 full-text index are parsed here (`indexes`). What both sides take from the domain package is
settings and format only: the target's keys (`erasure.target_kinds.chroma`), hnswlib's header layout
(`erasure.target_kinds.chroma.hnsw`) and the data-only unpickler for the id map (`erasure.untrusted`).

Methods, after the erasure (each one's residue counts the subject's things):

- episodic `sqlite:records`: records whose `subject_key` metadata names the subject (NFKC + case
  folding), or whose record id the fingerprint saw as theirs; bystanders: every other record.
- episodic `sqlite:log`: rows of the log (`embeddings_queue`) of those ids, or whose metadata names the
  subject.
- vectors `hnsw:ids`: live HNSW elements whose label the id map gives to one of the subject's ids, and
  ids of the subject anywhere in an id map; bystanders: other live elements.
- vectors `hnsw:vectors`: elements of any data_level0.bin under the directory (live, tombstoned, in
  orphaned or half-swapped folders) whose vector has the direction of one of the subject's vectors
  (cosine similarity above 1 - 1e-5: a cosine space stores vectors normalised, so bytes alone would
  miss them); bystander twins (the same vector for someone else) are left out of the fingerprint.
- vectors `log:vectors`: log rows whose float32 vector has such a direction.
- vectors `hnsw:orphan-folders`: folders holding index files that no vector segment row names (a
  dropped collection's folder, the leftovers of an interrupted rewrite): their ids are gone or stale,
  and nobody can show their vectors are not the subject's.
- derivatives `fts:rows`: full-text rows of the subject's records; bystanders: the other rows.
- derivatives `fts:postings`: the subject's record rowids in any doclist of any leaf page of the
  FTS5 index (decoded here: the trigrams of a deleted document stay in older segments until a full
  merge), unless the rowid now belongs to someone else's live record.

The byte scan (probes.targets.run) gets: every spelling of every identifier (caseless), windows of
the subject's documents that no bystander's document contains, and 128-byte pieces of the subject's
vectors as the store holds them (the HNSW element's bytes: normalised for cosine; the log's raw
float32), without pieces any bystander vector has.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, ClassVar

import apsw
import numpy as np

from erasure.subject import Subject
from erasure.target_kinds.chroma import ChromaConfig
from erasure.target_kinds.chroma.hnsw import DELETED
from erasure.targets import Target
from erasure.tiers import Tier
from probes.identity import spellings
from probes.model import Measurement
from probes.needles import (
    MIN_IDENTIFIER_BYTES,
    VECTOR_PIECE_BYTES,
    NeedleKind,
    NeedleSet,
    plain_windows,
    vector_pieces,
)
from probes.targets.chroma.indexes import fts_rowids, index_folders, read_index
from probes.targets.chroma.store import Seen, fold_id, has_table, mentioned_texts, open_store, see
from probes.targets.probe import TargetFingerprint

KIND = "chroma"
MAX_CONTENT_GROUPS = 256
MAX_VECTOR_GROUPS = 64
MAX_STATE_VECTORS = 2048
"""Vectors of the subject kept (per dimension) for the direction probes, sampled evenly."""
SAME_DIRECTION = 1.0 - 1e-5
_FTS_CONTENT = "embedding_fulltext_search_content"
NO_POPULATION = "none"


# --- vectors by direction -----------------------------------------------------------------------------


def _unit(m: np.ndarray) -> np.ndarray:
    m = np.nan_to_num(m.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    n = np.linalg.norm(m, axis=1, keepdims=True)
    n[n == 0] = 1.0
    return np.asarray(m / n)


def _same_direction(candidates: np.ndarray, subject: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """For each candidate row, whether a subject row has its direction."""
    out = np.zeros(len(candidates), dtype=bool)
    if len(candidates) == 0 or len(subject) == 0:
        return out
    s = _unit(subject)
    for start in range(0, len(candidates), chunk):
        c = _unit(candidates[start : start + chunk])
        out[start : start + chunk] = (c @ s.T).max(axis=1) >= SAME_DIRECTION
    return out


def _enc(vectors: list[bytes]) -> list[str]:
    return [base64.b64encode(v).decode() for v in vectors]


def _dec(items: list[str], dim: int) -> np.ndarray:
    rows = [np.frombuffer(base64.b64decode(s), dtype="<f4") for s in items]
    rows = [r for r in rows if r.size == dim]
    return np.vstack(rows) if rows else np.zeros((0, dim), dtype=np.float32)


def _even(items: list[Any], n: int) -> list[Any]:
    if len(items) <= n:
        return items
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


class ChromaProbe:
    """The probing side of kind `chroma` (see the package docstring)."""

    kind: ClassVar[str] = KIND
    window_baselines: ClassVar[bool] = True
    """Every bystander population here is "the kind's items less the subject's": a window's requests can
    be verified after all their erasures (`service.verification.window_baselines`)."""

    def files(self, target: Target) -> list[Path]:
        return [ChromaConfig.of(target).path]

    def fingerprint(self, target: Target, subject: Subject) -> TargetFingerprint:
        cfg = ChromaConfig.of(target)
        root, key = cfg.path, cfg.subject_key
        conn = open_store(root)
        try:
            seen = see(conn, key, subject)
            return self._fingerprint(target, subject, root, conn, seen)
        finally:
            conn.close()

    def _fingerprint(
        self, target: Target, subject: Subject, root: Path, conn: apsw.Connection, seen: Seen
    ) -> TargetFingerprint:
        want = fold_id(subject.id)
        needles = NeedleSet()
        store_ids = sorted({subject.id, *(r.owner for r in seen.mine if r.owner is not None)})
        others = {(r.owner or "").lower() for r in seen.records if r.owner is not None and fold_id(r.owner) != want}
        words: list[str] = []
        for kind, spelling in spellings(subject, store_ids):
            data = spelling.encode()
            if len(data) < MIN_IDENTIFIER_BYTES:
                needles.bump(f"identifier_withheld_short:{kind}")
                continue
            words.append(spelling.lower())
            if any(spelling.lower() in o for o in others):
                needles.add_group(NeedleKind.shared_identifier, [data], caseless=True)
            else:
                needles.add_group(NeedleKind.identifier, [data], caseless=True)
        mine_rows = {r.rowid for r in seen.mine}
        bystander_docs = [r.document for r in seen.records if r.rowid not in mine_rows and r.document]
        self._content(conn, [r.document for r in seen.mine if r.document], bystander_docs, needles)
        vectors, live_byst, byst_pieces, byst_vectors = self._vectors(root, seen)
        mine_seqs = {row.seq for row in seen.log_mine}
        log_byst = [row.vector for row in seen.log if row.vector and row.seq not in mine_seqs]
        for v in log_byst:
            byst_pieces |= _pieces_at(v)
        raw = [row.vector for row in seen.log_mine if row.vector]
        stored: list[bytes] = vectors
        state_vectors: dict[int, list[bytes]] = {}
        twins = 0
        for v in [*stored, *raw]:
            dim = len(v) // 4
            arr = np.frombuffer(v, dtype="<f4").reshape(1, dim)
            pool = byst_vectors.get(dim)
            if pool is not None and bool(_same_direction(pool, arr).any()):
                twins += 1
                continue
            state_vectors.setdefault(dim, []).append(v)
        needles.bump("vector_withheld_twin", twins)
        kept = 0
        for v in _even(sorted({*stored, *raw}), MAX_VECTOR_GROUPS * 2):
            if kept >= MAX_VECTOR_GROUPS * 2:
                break
            pieces = [p for p in vector_pieces(v) if p not in byst_pieces]
            if pieces and needles.add_group(NeedleKind.vector, pieces):
                kept += 1
        fts_rows = 0
        if has_table(conn, _FTS_CONTENT):
            row = conn.execute(f"SELECT count(*) FROM {_FTS_CONTENT}").fetchone()
            fts_rows = int(row[0]) if row else 0
        subject_fts = self._subject_fts_rows(conn, mine_rows)
        ids = {c: sorted(v) for c, v in seen.ids.items()}
        state = {
            "rows": sorted(mine_rows),
            "ids": ids,
            "vectors": {str(d): _enc(_even(vs, MAX_STATE_VECTORS)) for d, vs in state_vectors.items()},
            "words": words,
        }
        before = self._measure(root, conn, subject, ChromaConfig.of(target).subject_key, state)
        mentions = mentioned_texts(seen, words)
        mentioned = [
            n.group
            for n in needles.needles
            if n.kind is NeedleKind.identifier
            and any(n.data.decode().lower() in text or n.data.decode().lower() in read for text, read in mentions)
        ]
        return TargetFingerprint(
            target=target.name,
            needles=needles.needles,
            bystanders={
                "records": len(seen.records) - len(seen.mine),
                "hnsw-live": live_byst,
                "fts-rows": fts_rows - subject_fts,
                "collections": len(seen.layout.space),
            },
            subject_before={m.method: m.residue for _t, m in before},
            mentions=len(mentions),
            mentioned_groups=mentioned,
            state=state,
        )

    @staticmethod
    def _content(conn: apsw.Connection, docs: list[str], bystander_docs: list[str], out: NeedleSet) -> None:
        haystack = "\0".join(d.lower() for d in bystander_docs)
        kept = 0
        for doc in docs:
            for window in plain_windows(doc):
                if kept >= MAX_CONTENT_GROUPS:
                    out.bump("content_not_sampled")
                elif window.lower() in haystack:
                    out.bump("content_withheld_shared")
                elif out.add_group(NeedleKind.content, [window.encode()]):
                    kept += 1

    @staticmethod
    def _vectors(root: Path, seen: Seen) -> tuple[list[bytes], int, set[bytes], dict[int, np.ndarray]]:
        """The subject's vectors as the HNSW files hold them; live bystander elements; the pieces and
        vectors of every bystander element."""
        mine: list[bytes] = []
        live_byst = 0
        pieces: set[bytes] = set()
        byst: dict[int, list[np.ndarray]] = {}
        for folder in index_folders(root):
            idx = read_index(folder)
            if idx is None:
                continue
            cid = seen.layout.vector_segment.get(folder.name)
            subject_ids = seen.ids.get(cid, set()) if cid else set()
            for i in range(len(idx.labels)):
                rid = idx.label_to_id.get(int(idx.labels[i]))
                live = not (int(idx.flags[i]) & DELETED)
                vec = idx.vectors[i].tobytes()
                if rid is not None and rid in subject_ids:
                    mine.append(vec)
                elif live and rid is not None and cid is not None:
                    live_byst += 1
                    pieces |= _pieces_at(vec)
                    byst.setdefault(idx.dim, []).append(idx.vectors[i])
        return mine, live_byst, pieces, {d: np.vstack(v) for d, v in byst.items()}

    @staticmethod
    def _subject_fts_rows(conn: apsw.Connection, rows: set[int]) -> int:
        if not rows or not has_table(conn, _FTS_CONTENT):
            return 0
        row = conn.execute(
            f"SELECT count(*) FROM {_FTS_CONTENT} WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(rows)),),
        ).fetchone()
        return int(row[0]) if row else 0

    def measure(self, target: Target, subject: Subject, fp: TargetFingerprint) -> list[tuple[str, Measurement]]:
        cfg = ChromaConfig.of(target)
        conn = open_store(cfg.path)
        try:
            return self._measure(cfg.path, conn, subject, cfg.subject_key, fp.state)
        finally:
            conn.close()

    def _measure(
        self, root: Path, conn: apsw.Connection, subject: Subject, key: str, state: dict[str, Any]
    ) -> list[tuple[str, Measurement]]:
        known: dict[str, list[str]] = state.get("ids") or {}
        seen = see(conn, key, subject, known)
        mine_rows = {r.rowid for r in seen.mine}
        live_rows = {r.rowid for r in seen.records}
        others_rows = live_rows - mine_rows
        out: list[tuple[str, Measurement]] = []
        out.append(
            (
                Tier.episodic,
                Measurement("sqlite:records", len(seen.mine), "records", len(seen.records) - len(seen.mine)),
            )
        )
        out.append((Tier.episodic, Measurement("sqlite:log", len(seen.log_mine), NO_POPULATION, 0)))
        # vectors
        subject_vectors = {int(d): _dec(v, int(d)) for d, v in (state.get("vectors") or {}).items()}
        id_hits = live_byst = direction_hits = orphans = 0
        all_ids: set[str] = set().union(*seen.ids.values()) if seen.ids else set()
        for folder in index_folders(root):
            idx = read_index(folder)
            if idx is None:
                continue
            cid = seen.layout.vector_segment.get(folder.name)
            if cid is None:
                orphans += 1
            id_hits += len(idx.id_names & all_ids)
            for i in range(len(idx.labels)):
                rid = idx.label_to_id.get(int(idx.labels[i]))
                if (
                    rid is not None
                    and not (int(idx.flags[i]) & DELETED)
                    and cid is not None
                    and rid not in seen.ids.get(cid, ())
                ):
                    live_byst += 1
            sv = subject_vectors.get(idx.dim)
            if sv is not None and len(idx.vectors):
                direction_hits += int(_same_direction(idx.vectors, sv).sum())
        out.append((Tier.vectors, Measurement("hnsw:ids", id_hits, "hnsw-live", live_byst)))
        out.append((Tier.vectors, Measurement("hnsw:vectors", direction_hits, NO_POPULATION, 0)))
        log_hits = 0
        for dim, sv in subject_vectors.items():
            rows = [np.frombuffer(r.vector, dtype="<f4") for r in seen.log if r.vector and len(r.vector) == 4 * dim]
            if rows:
                log_hits += int(_same_direction(np.vstack(rows), sv).sum())
        out.append((Tier.vectors, Measurement("log:vectors", log_hits, NO_POPULATION, 0)))
        out.append((Tier.vectors, Measurement("hnsw:orphan-folders", orphans, NO_POPULATION, 0)))
        # derivatives
        subject_rows: set[int] = {int(x) for x in state.get("rows") or []} | mine_rows
        fts_total = 0
        fts_mine = 0
        if has_table(conn, _FTS_CONTENT):
            row = conn.execute(f"SELECT count(*) FROM {_FTS_CONTENT}").fetchone()
            fts_total = int(row[0]) if row else 0
            fts_mine = self._subject_fts_rows(conn, subject_rows - others_rows)
        out.append((Tier.derivatives, Measurement("fts:rows", fts_mine, "fts-rows", fts_total - fts_mine)))
        postings = len((fts_rowids(conn) & subject_rows) - others_rows)
        out.append((Tier.derivatives, Measurement("fts:postings", postings, NO_POPULATION, 0)))
        return out


def _pieces_at(vec: bytes) -> set[bytes]:
    return {vec[s : s + VECTOR_PIECE_BYTES] for s in range(0, len(vec) - VECTOR_PIECE_BYTES + 1, VECTOR_PIECE_BYTES)}


PROBE = ChromaProbe()
