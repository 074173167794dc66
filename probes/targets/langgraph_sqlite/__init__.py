"""Probing kind `langgraph-sqlite` (LangGraph `SqliteStore` + `SqliteSaver`): read-only, own code.

It reads the two databases with read-only handles (`file:...?mode=ro`) and its own parsing: namespaces
split on `.`, checkpoint metadata parsed as JSON in Python, checkpoint and write blobs decoded by its
own msgpack reader (`serde`); one read of the target is split into the subject's records and everyone
else's (`records`). Nothing here comes from the erasing side or from LangGraph: what both sides take
from the domain package is the target's keys (`erasure.target_kinds.langgraph_sqlite`), never logic.

Whose a record is, by the probe's own reading: an item is the subject's when any label of its
namespace, or its key, is their id (case-folded, whole label), whether a configured prefix (`namespace` /
`namespaces`) holds it or not; a thread is the subject's when any of its checkpoints' metadata has a
top-level value that is their id, under any key (`thread_key` / `thread_keys` or another). What is
the subject's is residue until erased, never a mention of them in someone else's record; the layouts
and keys nobody configured are counted apart (`unconfigured-namespace-layouts`,
`items-under-unconfigured-layouts`, `threads-under-unconfigured-metadata-keys`).

Fingerprint (before): the subject's identifier spellings (caseless), distinctive windows of their
items' and threads' text, their thread ids, and their `store_vectors` embeddings cut into 128-byte
float32 pieces (the bytes the store keeps: sqlite-vec's `serialize_float32`). A needle that also
occurs in a bystander's record proves nothing: content windows and vector pieces found there are
dropped; an identifier found inside another person's record without naming the subject (a longer id
that contains it) becomes a shared identifier. Other people's records that name the subject on token
boundaries are counted as mentions. Bystander populations: items, vectors, threads, checkpoint rows,
episodic items, and the content digests of every other person's record: each row of an item (its
`store` row and vectors) and of a thread (its checkpoints and writes), keyed by the record's identity
(hashed). The eraser never rewrites another person's record (mentions are reported, not redacted), so
a record any of whose rows changed or went is lost (`items-content-digests`,
`threads-content-digests`), whatever the counts say; rows added meanwhile (a turn the agent took with
a bystander) change nobody's data.

Measure (after), per tier:
- working: threads whose metadata names the subject; rows of the fingerprinted threads by id;
- episodic / semantic: the subject's items; fingerprinted items by key;
- vectors: the subject's `store_vectors` rows; rows whose bytes equal a fingerprinted vector; and
  the nearest neighbour (sqlite-vec cosine distance) of each fingerprinted vector, for copies whose
  bytes moved (a re-encoded or re-keyed vector).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

import hyperscan

from erasure.subject import Subject
from erasure.target_kinds.langgraph_sqlite import LangGraphSqliteConfig
from erasure.targets import Target
from erasure.tiers import Tier
from probes.bytescan import scan_tree
from probes.identity import spellings
from probes.model import Measurement
from probes.needles import MIN_IDENTIFIER_BYTES, NeedleKind, NeedleSet, plain_windows, vector_pieces
from probes.others_text import naming as naming_in
from probes.targets.langgraph_sqlite.records import content_digests, digest, open_ro, read_view, table_names, unchanged
from probes.targets.probe import TargetFingerprint
from probes.targets.run import scan_roots

KIND = "langgraph-sqlite"
MAX_CONTENT_GROUPS = 400
MAX_NEAREST = 64
"""Fingerprinted vectors checked by nearest neighbour (brute force: each one is a pass over the table)."""
NEAR = 1e-4
"""Cosine distance under which a vector counts as a copy of the subject's."""
MIN_THREAD_ID = 8
_SIDECARS = ("-wal", "-shm", "-journal")


def _bounded(spellings_: list[str]) -> re.Pattern[str]:
    body = "|".join(re.escape(s) for s in sorted(spellings_, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9])(?:{body})(?![A-Za-z0-9])", re.IGNORECASE)


class LangGraphSqliteProbe:
    """The probing side of kind `langgraph-sqlite` (see the package docstring)."""

    kind: ClassVar[str] = KIND

    def files(self, target: Target) -> list[Path]:
        conf = LangGraphSqliteConfig.of(target)
        out: list[Path] = []
        for db in (conf.store, conf.checkpoints):
            if db is not None:
                out += [db, *(db.with_name(db.name + s) for s in _SIDECARS)]
        return list(dict.fromkeys(out))

    def fingerprint(self, target: Target, subject: Subject) -> TargetFingerprint:
        conf = LangGraphSqliteConfig.of(target)
        view = read_view(conf, subject)
        names = [s for _kind, s in spellings(subject, [subject.id]) if len(s.encode()) >= MIN_IDENTIFIER_BYTES]
        naming = _bounded(names) if names else None
        other_text = {k: "\n".join(r.text) for k, r in view.others.items()}
        other_low = {k: t.lower() for k, t in other_text.items()}
        # read by the rule, as the views read the files (`probes.others_text`): the eraser reports what the
        # rule finds in another person's record, and the views would find it there after every erasure
        named = naming_in(list(other_text.values()), [("identifier", s) for s in names])
        mentions = sum(
            1 for t, found in zip(other_text.values(), named, strict=True) if found or (naming and naming.search(t))
        )

        needles = NeedleSet()
        shared: list[str] = []
        for s in names:
            low = s.lower()
            inside = [k for k, t in other_low.items() if low in t]
            if inside and not all(_bounded([s]).search(other_text[k]) for k in inside):
                shared.append(s)
                needles.bump("identifier_shared")
                continue
            needles.add_group(NeedleKind.identifier, [s.encode()], caseless=True)
        for s in shared:
            needles.add_group(NeedleKind.shared_identifier, [s.encode()], caseless=True)
        read = {names[i] for found in named for i in found}
        mentioned = [
            n.group
            for n in needles.needles
            if n.kind is NeedleKind.identifier
            and (n.data.decode() in read or any(n.data.decode().lower() in t for t in other_low.values()))
        ]

        windows: list[str] = []
        for text in [*view.subject_item_text, *view.subject_thread_text]:
            for w in plain_windows(text, limit=2):
                if w not in windows:
                    windows.append(w)
        windows = windows[:MAX_CONTENT_GROUPS]
        windows += [tid for tid in sorted(view.subject_threads) if len(tid) >= MIN_THREAD_ID]
        every_other = "\n".join(other_text.values()).encode("utf-8", "replace")
        in_others = _present(every_other, [w.encode() for w in windows])
        for i, w in enumerate(windows):
            if i in in_others:
                needles.bump("content_withheld_in_bystanders")
            else:
                needles.add_group(NeedleKind.content, [w.encode()])

        other_digests = {digest(v) for v in view.other_vectors}
        other_pieces = {v[i : i + 128] for v in view.other_vectors for i in range(0, len(v), 128)}
        kept: list[bytes] = []
        for vec in view.subject_vectors:
            if digest(vec) in other_digests:
                needles.bump("vector_withheld_twin")
                continue
            pieces = [p for p in vector_pieces(vec) if p not in other_pieces]
            if needles.add_group(NeedleKind.vector, pieces):
                kept.append(vec)

        digests = content_digests(conf, set(view.others))
        bystanders = {
            "items": view.other_items,
            "episodic-items": view.other_episodic,
            "vectors": len(view.other_vectors),
            "threads": len(view.other_threads),
            "checkpoint-rows": view.other_checkpoint_rows,
            "items-unchanged": unchanged(digests, digests, "item")[0],
            "threads-unchanged": unchanged(digests, digests, "thread")[0],
        }
        shared_needles = [n for n in needles.needles if n.kind is NeedleKind.shared_identifier]
        if shared_needles:
            hit: set[int] = set()
            for root in scan_roots(self.files(target)):
                report = scan_tree(root, [n.data for n in shared_needles], caseless=set(range(len(shared_needles))))
                hit |= {shared_needles[i].group for i in report.found_indexes()}
            bystanders["shared-identifiers"] = len(hit)
        episodic = sum(1 for t in view.subject_items.values() if t is Tier.episodic)
        subject_before = {
            "threads-by-metadata": len(view.subject_threads),
            "items-under-namespace": len(view.subject_items),
            "episodic-items-under-namespace": episodic,
            "vectors-under-namespace": view.subject_vector_rows,
            "items-under-unconfigured-layouts": view.unconfigured_items,
            "unconfigured-namespace-layouts": len(view.unconfigured_layouts),
            "threads-under-unconfigured-metadata-keys": len(view.unconfigured_threads),
        }
        state = {
            "threads": sorted(view.subject_threads),
            "items": [[p, k, t.value] for (p, k), t in sorted(view.subject_items.items())],
            "vector_digests": sorted({digest(v) for v in kept}),
            "nearest": [v.hex() for v in kept[:MAX_NEAREST]],
            "needle_stats": needles.stats,
            "bystander_digests": digests,
        }
        return TargetFingerprint(
            target=target.name,
            needles=needles.needles,
            bystanders=bystanders,
            subject_before=subject_before,
            mentions=mentions,
            mentioned_groups=mentioned,
            state=state,
        )

    def measure(self, target: Target, subject: Subject, fp: TargetFingerprint) -> list[tuple[str, Measurement]]:
        conf = LangGraphSqliteConfig.of(target)
        view = read_view(conf, subject)
        out: list[tuple[str, Measurement]] = []
        baseline = {str(k): [str(d) for d in v] for k, v in fp.state.get("bystander_digests", {}).items()}
        now = content_digests(conf, set(view.others)) if baseline else {}
        if conf.checkpoints is not None:
            gone = set(fp.state.get("threads", []))
            left_rows = _rows_of_threads(conf.checkpoints, sorted(gone))
            out.append(
                (
                    Tier.working,
                    Measurement("threads-by-metadata", len(view.subject_threads), "threads", len(view.other_threads)),
                )
            )
            out.append(
                (
                    Tier.working,
                    Measurement("thread-rows-by-id", left_rows, "checkpoint-rows", view.other_checkpoint_rows),
                )
            )
            out.append(
                (
                    Tier.working,
                    Measurement(
                        "threads-under-unconfigured-metadata-keys",
                        len(view.unconfigured_threads),
                        "threads",
                        len(view.other_threads),
                    ),
                )
            )
            if baseline:
                out.append(
                    (
                        Tier.working,
                        Measurement(
                            "threads-content-digests", 0, "threads-unchanged", unchanged(baseline, now, "thread")[1]
                        ),
                    )
                )
        if conf.store is not None:
            episodic = sum(1 for t in view.subject_items.values() if t is Tier.episodic)
            out.append(
                (Tier.episodic, Measurement("items-under-namespace", episodic, "episodic-items", view.other_episodic))
            )
            out.append(
                (
                    Tier.semantic,
                    Measurement("items-under-namespace", len(view.subject_items) - episodic, "items", view.other_items),
                )
            )
            known = {(str(p), str(k)) for p, k, _t in fp.state.get("items", [])}
            left_items = _items_present(conf.store, known)
            out.append((Tier.semantic, Measurement("items-by-key", left_items, "items", view.other_items)))
            out.append(
                (
                    Tier.semantic,
                    Measurement("items-under-unconfigured-layouts", view.unconfigured_items, "items", view.other_items),
                )
            )
            out.append(
                (
                    Tier.semantic,
                    Measurement(
                        "unconfigured-namespace-layouts", len(view.unconfigured_layouts), "items", view.other_items
                    ),
                )
            )
            if baseline:
                out.append(
                    (
                        Tier.semantic,
                        Measurement("items-content-digests", 0, "items-unchanged", unchanged(baseline, now, "item")[1]),
                    )
                )
            digests = set(fp.state.get("vector_digests", []))
            every = [*view.subject_vectors, *view.other_vectors]
            by_bytes = sum(1 for v in every if digest(v) in digests)
            out.append(
                (
                    Tier.vectors,
                    Measurement(
                        "vectors-under-namespace", view.subject_vector_rows, "vectors", len(view.other_vectors)
                    ),
                )
            )
            out.append((Tier.vectors, Measurement("vectors-by-bytes", by_bytes, "vectors", len(view.other_vectors))))
            near = _nearest(conf.store, [bytes.fromhex(h) for h in fp.state.get("nearest", [])])
            out.append(
                (Tier.vectors, Measurement("vectors-nearest-neighbour", near, "vectors", len(view.other_vectors)))
            )
        return out


def _present(haystack: bytes, needles: list[bytes]) -> set[int]:
    """Indexes of the needles found in `haystack` (one hyperscan block scan; literals, NUL-safe)."""
    needles = [n for n in needles if n]
    if not needles or not haystack:
        return set()
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(
        expressions=["".join(f"\\x{b:02x}" for b in n).encode("ascii") for n in needles],
        ids=list(range(len(needles))),
        flags=[0] * len(needles),
    )
    found: set[int] = set()

    def on_match(needle: int, _start: int, _end: int, _flags: int, _ctx: object) -> None:
        found.add(needle)

    db.scan(haystack, match_event_handler=on_match)
    return found


def _rows_of_threads(path: Path, threads: list[str]) -> int:
    if not threads:
        return 0
    conn = open_ro(path, "checkpoints")
    try:
        tables = table_names(conn)
        n = 0
        for table in ("checkpoints", "writes"):
            if table in tables:
                for tid in threads:
                    row = conn.execute(f"SELECT count(*) FROM {table} WHERE thread_id = ?", (tid,)).fetchone()
                    n += int(row[0]) if row else 0
        return n
    finally:
        conn.close()


def _items_present(path: Path, items: set[tuple[str, str]]) -> int:
    """How many of the fingerprinted items still have a row in `store` or `store_vectors`."""
    if not items:
        return 0
    conn = open_ro(path, "store")
    try:
        tables = [t for t in ("store", "store_vectors") if t in table_names(conn)]
        left = set()
        for table in tables:
            for prefix, key in sorted(items):
                if (
                    conn.execute(
                        f"SELECT 1 FROM {table} WHERE prefix = ? AND key = ? LIMIT 1", (prefix, key)
                    ).fetchone()
                    is not None
                ):
                    left.add((prefix, key))
        return len(left)
    finally:
        conn.close()


def _nearest(path: Path, vectors: list[bytes]) -> int:
    """How many of the subject's vectors still have a copy in `store_vectors` (cosine distance < NEAR)."""
    if not vectors:
        return 0
    conn = open_ro(path, "store")
    try:
        if "store_vectors" not in table_names(conn):
            return 0
        n = 0
        for vec in vectors:
            row = conn.execute(
                "SELECT min(vec_distance_cosine(embedding, ?)) FROM store_vectors WHERE length(embedding) = ?",
                (vec, len(vec)),
            ).fetchone()
            if row is not None and row[0] is not None and float(row[0]) < NEAR:
                n += 1
        return n
    finally:
        conn.close()


PROBE = LangGraphSqliteProbe()
