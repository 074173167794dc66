"""Probe of kind `mem0`: a mem0 `Memory` with local Qdrant (path mode) and its SQLite history, read
from the files with the probe's own code (never mem0, never qdrant-client, nothing of `tasks/`).

What it reads, read-only (`file:...?mode=ro`):
- every `storage.sqlite` under `<qdrant_path>/collection/` (every collection on disk, listed or not
  in meta.json): one row per point, a pickled qdrant-client `PointStruct`. The pickle is read as data
  (`erasure.untrusted.load_pickle`: qdrant-client's point classes become inert records, every other
  class is refused); a row it cannot read is residue (nothing can be said about whose it is);
- `history` and `messages` of the history database.

Who the subject is: the request's id and the `user_id`s equal to it after NFKC and case folding, in
point payloads and in messages' session scopes (`...&user_id=<id>`, mem0-escaped).

Needles for the byte scan (`probes.targets.run`): the identifiers (`probes.identity.spellings`, and the
id as a session scope escapes it), caseless; content windows of the subject's texts (memories, entity
texts, history, raw turns) found in no bystander text; and the subject's vectors as local Qdrant stores
them: each float a pickle BINFLOAT (`G` + 8 bytes big-endian float64), cut into pieces of
`FLOATS_PER_PIECE` floats (a point of a large vector spans SQLite overflow pages), pieces that occur in
a bystander's stored point withheld, vectors with a bystander twin withheld whole. Identifier groups
found inside other people's records are `mentioned_groups` (their hits are explained by the reported
mentions); a spelling inside another person's record but not as a whole token there, or equal to
another person's id, is a shared identifier.

Logical probes, after: per collection, the subject's points (by user_id, and by the point ids seen
before); stored vectors equal to one of the subject's (by digest of their encoding); history rows of
the subject's memories (ids seen before and now) and orphaned history rows (memory gone) that name the
subject; messages rows of the subject's session scopes. Bystander populations: every other point per
collection, every other vector, history row and messages row. Mentions: other people's points,
messages and live memories' history rows that name the subject.
"""

from __future__ import annotations

import hashlib
import pickle
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import apsw

from erasure.sqlite import connect
from erasure.subject import Subject
from erasure.target_kinds.mem0 import QDRANT_POINT_CLASSES, Mem0Config
from erasure.targets import Target
from erasure.tiers import Tier
from erasure.untrusted import PickledRecord, load_pickle
from probes.bytescan import scan_tree
from probes.identity import spellings
from probes.model import Measurement
from probes.needles import MIN_NONZERO_FLOATS, NeedleKind, NeedleSet, add_content_windows
from probes.others_text import Spelled, fold_id, identifier_needles
from probes.targets.probe import TargetFingerprint
from probes.targets.run import scan_roots

KIND = "mem0"
FLOATS_PER_PIECE = 16
"""A vector needle piece: 16 pickled floats (144 bytes)."""
_BINFLOAT = b"G"
_fold = fold_id


def _scope_escape(value: str) -> str:
    return value.replace("%", "%25").replace("&", "%26").replace("=", "%3D")


def _scope_user(scope: object) -> str | None:
    if not isinstance(scope, str):
        return None
    for part in scope.split("&"):
        if part.startswith("user_id="):
            return part[len("user_id=") :].replace("%3D", "=").replace("%26", "&").replace("%25", "%")
    return None


# --- the probe's own reading of local Qdrant's pickles ------------------------------------------


def pickled_floats(vector: list[float]) -> bytes:
    """A list of floats as pickle writes it: BINFLOAT opcode + big-endian float64 each."""
    return b"".join(_BINFLOAT + struct.pack(">d", x) for x in vector)


@dataclass(frozen=True)
class StoredPoint:
    collection: str
    point_id: str
    payload: dict[str, Any]
    vector: tuple[float, ...]
    """The dense vector (unnamed, or the `""` named vector mem0 writes); empty if none."""
    blob: bytes

    @property
    def user_id(self) -> object:
        return self.payload.get("user_id")

    def encoding(self) -> bytes:
        return pickled_floats(list(self.vector))


def _dense(vector: object) -> tuple[float, ...]:
    if isinstance(vector, dict):
        vector = vector.get("")
    if isinstance(vector, list) and vector and all(isinstance(x, float) for x in vector):
        return tuple(vector)
    return ()


def _parse(collection: str, blob: bytes) -> StoredPoint | None:
    try:
        obj = load_pickle(blob, records=QDRANT_POINT_CLASSES)
    except pickle.UnpicklingError:
        return None
    if not isinstance(obj, PickledRecord):
        return None
    payload = obj.state.get("payload")
    return StoredPoint(
        collection,
        str(obj.state.get("id")),
        payload if isinstance(payload, dict) else {},
        _dense(obj.state.get("vector")),
        blob,
    )


# --- one read of the whole target ---------------------------------------------------------------


def _sql_rows(conn: apsw.Connection, table: str, columns: str) -> list[tuple[Any, ...]]:
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    return [tuple(r) for r in conn.execute(f"SELECT {columns} FROM {table}")] if exists else []


@dataclass
class _View:
    """Everything the probe reads of a target, once."""

    points: list[StoredPoint] = field(default_factory=list)
    unreadable: int = 0
    collections: list[str] = field(default_factory=list)
    history: list[tuple[Any, ...]] = field(default_factory=list)
    """(id, memory_id, old_memory, new_memory, actor_id)"""
    messages: list[tuple[Any, ...]] = field(default_factory=list)
    """(id, session_scope, content, name)"""

    @classmethod
    def load(cls, target: Target) -> _View:
        p = Mem0Config.of(target)  # the probe reads every collection of the folder, whatever `collection` says
        view = cls()
        base = p.qdrant_path / "collection"
        for storage in sorted(base.rglob("storage.sqlite")) if base.is_dir() else []:
            name = storage.parent.relative_to(base).as_posix()
            view.collections.append(name)
            conn = connect(storage, readonly=True)
            try:
                for (blob,) in _sql_rows(conn, "points", "point"):
                    point = _parse(name, bytes(blob))
                    if point is None:
                        view.unreadable += 1
                    else:
                        view.points.append(point)
            finally:
                conn.close()
        if p.history_db.is_file():
            conn = connect(p.history_db, readonly=True)
            try:
                view.history = _sql_rows(conn, "history", "id, memory_id, old_memory, new_memory, actor_id")
                view.messages = _sql_rows(conn, "messages", "id, session_scope, content, name")
            finally:
                conn.close()
        return view

    def user_ids(self) -> set[str]:
        out = {u for u in (p.user_id for p in self.points) if isinstance(u, str)}
        return out | {u for u in (_scope_user(m[1]) for m in self.messages) if u is not None}


class _Who:
    """The subject as the probe recognises them: ids (folded), and their spellings (`probes.others_text`)."""

    def __init__(self, subject: Subject, view: _View, known_ids: list[str]) -> None:
        want = _fold(subject.id)
        self.ids = sorted({subject.id, *known_ids, *(u for u in view.user_ids() if _fold(u) == want)})
        self.folded = {_fold(i) for i in self.ids}
        self.spellings = spellings(subject, self.ids)
        self.spelled = Spelled([s for _, s in self.spellings])

    def owns(self, user_id: object) -> bool:
        return isinstance(user_id, str) and _fold(user_id) in self.folded

    def names(self, *texts: object) -> bool:
        return self.spelled.names(texts)


@dataclass
class _Split:
    """The view split into the subject's, the bystanders', and the mentions."""

    points: list[StoredPoint] = field(default_factory=list)
    other_points: list[StoredPoint] = field(default_factory=list)
    memory_ids: set[str] = field(default_factory=set)
    history: list[tuple[Any, ...]] = field(default_factory=list)
    orphans: list[tuple[Any, ...]] = field(default_factory=list)
    other_history: list[tuple[Any, ...]] = field(default_factory=list)
    messages: list[tuple[Any, ...]] = field(default_factory=list)
    other_messages: list[tuple[Any, ...]] = field(default_factory=list)
    mentions: int = 0


def _split(view: _View, who: _Who, point_ids: dict[str, set[str]], memory_ids: set[str]) -> _Split:
    s = _Split()
    for p in view.points:
        if who.owns(p.user_id) or p.point_id in point_ids.get(p.collection, set()):
            s.points.append(p)
        else:
            s.other_points.append(p)
            s.mentions += who.names(p.payload.get("data"), p.payload.get("actor_id"))
    # Their memories: the ids seen before, their points (in any collection: one history database may
    # serve several), and the memories their entity records link.
    s.memory_ids = memory_ids | {p.point_id for p in s.points}
    for p in s.points:
        linked = p.payload.get("linked_memory_ids")
        s.memory_ids |= {str(m) for m in linked if isinstance(m, str | int)} if isinstance(linked, list) else set()
    live = {p.point_id for p in view.points}
    bystander_memories = {p.point_id for p in s.other_points}
    for row in view.history:
        mid = row[1]
        if mid in s.memory_ids:
            s.history.append(row)
        elif mid not in live and who.names(*row[2:5]):
            s.orphans.append(row)
        else:
            s.other_history.append(row)
            s.mentions += mid in bystander_memories and who.names(*row[2:5])
    for row in view.messages:
        if who.owns(_scope_user(row[1])):
            s.messages.append(row)
        else:
            s.other_messages.append(row)
            s.mentions += who.names(row[2], row[3])
    return s


def _strings(value: object) -> list[str]:
    """Every string in a payload (keys and values, nested)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in (*_strings(k), *_strings(v))]
    if isinstance(value, list | tuple):
        return [x for v in value for x in _strings(v)]
    return []


def _their_text(view: _View, s: _Split) -> list[str]:
    """Every string of other people's records: their points' payloads, history rows and messages."""
    out = [x for p in s.other_points for x in _strings(p.payload)]
    out += [str(t) for row in s.other_history for t in row if isinstance(t, str)]
    out += [str(t) for row in s.other_messages for t in row if isinstance(t, str)]
    return out


def _digest(encoding: bytes) -> str:
    return hashlib.sha256(encoding).hexdigest()


class Mem0Probe:
    kind: ClassVar[str] = KIND

    def files(self, target: Target) -> list[Path]:
        cfg = Mem0Config.of(target)
        return [cfg.history_db, cfg.qdrant_path]

    def fingerprint(self, target: Target, subject: Subject) -> TargetFingerprint:
        view = _View.load(target)
        who = _Who(subject, view, [])
        s = _split(view, who, {}, set())
        needles = NeedleSet()
        theirs = _their_text(view, s)
        mentioned = self._identifiers(needles, who, view, theirs)
        self._content(needles, s, "\n".join(theirs))
        digests = self._vectors(needles, s)
        bystanders = self._populations(view, s, set(digests))
        shared = [n for n in needles.needles if n.kind is NeedleKind.shared_identifier]
        if shared:
            hit: set[int] = set()
            for root in scan_roots(self.files(target)):
                report = scan_tree(root, [n.data for n in shared], caseless=set(range(len(shared))))
                hit |= {shared[i].group for i in report.found_indexes()}
            bystanders["shared-identifiers"] = len(hit)
        return TargetFingerprint(
            target=target.name,
            needles=needles.needles,
            bystanders=bystanders,
            subject_before={
                "qdrant:points-of-subject": len(s.points),
                "qdrant:unreadable-points": view.unreadable,
                "qdrant:subject-vectors": len(digests),
                "history:rows-of-subject-memories": len(s.history),
                "history:orphans-naming-subject": len(s.orphans),
                "messages:subject-scopes": len(s.messages),
            },
            mentions=s.mentions,
            mentioned_groups=mentioned,
            state={
                "ids": who.ids,
                "memory_ids": sorted(s.memory_ids),
                "point_ids": {c: sorted(p.point_id for p in s.points if p.collection == c) for c in view.collections},
                "vector_digests": digests,
                "needle_stats": needles.stats,
            },
        )

    @staticmethod
    def _identifiers(needles: NeedleSet, who: _Who, view: _View, theirs: list[str]) -> list[int]:
        """Identifier needles: the subject's spellings and their session scopes' escaped ids
        (`probes.others_text.identifier_needles`, with the other users' ids as others')."""
        others = {_fold(u) for u in view.user_ids() if not who.owns(u)}
        candidates = [s for _, s in who.spellings] + [_scope_escape(i) for i in who.ids]
        return identifier_needles(needles, who.spelled, candidates, theirs, others)

    @staticmethod
    def _content(needles: NeedleSet, s: _Split, corpus: str) -> None:
        mine: list[str] = [str(p.payload.get("data")) for p in s.points if isinstance(p.payload.get("data"), str)]
        for row in (*s.history, *s.orphans):
            mine += [t for t in row[2:4] if isinstance(t, str)]
        mine += [row[2] for row in s.messages if isinstance(row[2], str)]
        add_content_windows(needles, mine, corpus)

    @staticmethod
    def _vectors(needles: NeedleSet, s: _Split) -> list[str]:
        """Vector needles; returns the digests of the subject's vectors that have no bystander twin."""
        theirs = b"\x00".join(p.blob for p in s.other_points)
        twins = {p.encoding() for p in s.other_points if p.vector}
        digests: list[str] = []
        for p in s.points:
            if not p.vector:
                continue
            enc = p.encoding()
            if enc in twins:
                needles.bump("vector_twin")
                continue
            if enc not in p.blob:
                needles.bump("vector_encoding_not_in_row")
                continue
            digests.append(_digest(enc))
            width = FLOATS_PER_PIECE * 9
            pieces = []
            for start in range(0, len(enc) - width + 1, width):
                floats = p.vector[start // 9 : start // 9 + FLOATS_PER_PIECE]
                piece = enc[start : start + width]
                if sum(1 for x in floats if x != 0.0) < MIN_NONZERO_FLOATS:
                    continue
                if piece in theirs:
                    needles.bump("vector_piece_in_bystander_row")
                    continue
                pieces.append(piece)
            needles.add_group(NeedleKind.vector, pieces)
        return sorted(set(digests))

    @staticmethod
    def _populations(view: _View, s: _Split, digests: set[str]) -> dict[str, int]:
        out = {f"points:{c}": sum(1 for p in s.other_points if p.collection == c) for c in view.collections}
        out["points-other-vectors"] = sum(
            1 for p in s.other_points if not p.vector or _digest(p.encoding()) not in digests
        )
        out["history"] = len(s.other_history)
        out["messages"] = len(s.other_messages)
        return out

    def measure(self, target: Target, subject: Subject, fp: TargetFingerprint) -> list[tuple[str, Measurement]]:
        view = _View.load(target)
        state = fp.state
        who = _Who(subject, view, [str(i) for i in state.get("ids", [])])
        point_ids = {str(c): {str(i) for i in ids} for c, ids in dict(state.get("point_ids", {})).items()}
        s = _split(view, who, point_ids, {str(i) for i in state.get("memory_ids", [])})
        digests = {str(d) for d in state.get("vector_digests", [])}
        pops = self._populations(view, s, digests)
        out: list[tuple[str, Measurement]] = []
        for c in sorted({*view.collections, *point_ids}):
            out.append(
                (
                    Tier.semantic.value,
                    Measurement(
                        f"qdrant:{c}:points-of-subject",
                        sum(1 for q in s.points if q.collection == c),
                        f"points:{c}",
                        pops.get(f"points:{c}", 0),
                    ),
                )
            )
        out.append(
            (Tier.semantic.value, Measurement("qdrant:unreadable-points", view.unreadable, "unreadable-points", 0))
        )
        hits = sum(1 for q in view.points if q.vector and _digest(q.encoding()) in digests)
        out.append(
            (
                Tier.vectors.value,
                Measurement("qdrant:subject-vectors", hits, "points-other-vectors", pops["points-other-vectors"]),
            )
        )
        out.append(
            (
                Tier.audit_log.value,
                Measurement("history:rows-of-subject-memories", len(s.history), "history", pops["history"]),
            )
        )
        out.append(
            (
                Tier.audit_log.value,
                Measurement("history:orphans-naming-subject", len(s.orphans), "history", pops["history"]),
            )
        )
        out.append(
            (Tier.working.value, Measurement("messages:subject-scopes", len(s.messages), "messages", pops["messages"]))
        )
        return out


PROBE = Mem0Probe()
