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

import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import apsw

from erasure.errors import ErasureError, InputError
from erasure.subject import Subject
from probes import byte_residue, subprocessors
from probes.bytescan import ScannedFile
from probes.context import ProbeContext
from probes.fingerprint_model import Fingerprint
from probes.harvest import canary_windows, harvest, sample_vectors
from probes.identity import spellings, store_ids_in
from probes.keys import SubjectKeys
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
from probes.needles import NeedleKind
from probes.registry import MEASURES
from probes.resolve import exclusive_entities, resolve_keys
from probes.store import open_store
from probes.store_facts import StoreFacts
from probes.window_bytes import byte_results, found_by_owner, paired


@dataclass(frozen=True)
class Member:
    """One subject of a window, as the probes resolved it before the cascade."""

    subject: Subject
    ids: list[str]
    keys: SubjectKeys


def _members(
    conn: apsw.Connection, facts: StoreFacts, subjects: Sequence[Subject], not_bystanders: Collection[str]
) -> list[Member]:
    out = []
    for s in subjects:
        ids = store_ids_in(conn, s, facts.ids_by_fold, facts.emails)
        out.append(Member(s, ids, resolve_keys(conn, s, ids, facts.personal_entities, not_bystanders)))
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


def take_window(
    store_dir: Path,
    subjects: Sequence[Subject],
    *,
    http_timeout: float = DEFAULT_HTTP_TIMEOUT,
    not_bystanders: Collection[str] = (),
    lookups: bool = True,
) -> list[Fingerprint]:
    """Every subject's fingerprint before the cascade, with the window's shared bystander baseline
    (`not_bystanders`: store ids never sampled as a processor's bystanders, `resolve_keys`). Without
    `lookups`, no processor is asked (the store may be locked): the processors' populations have no
    baseline, and the verification's lookups judge them (`StoreProbes`)."""
    if not subjects:
        return []
    store_dir = Path(store_dir)
    window = uuid.uuid4().hex
    with open_store(store_dir) as conn:
        facts = StoreFacts(conn)
        members = _members(conn, facts, subjects, not_bystanders)
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
    all_found, hits, unreadable, _files = found_by_owner(store_dir, fps)
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
        store_dir=store_dir,
        subject=subjects[0],
        fingerprint=union,
        http_timeout=http_timeout,
        others=others,
        lookups=lookups,
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
    return probe_store(store_dir, pairs, tiers=tiers, http_timeout=http_timeout, extra_roots=extra_roots).ask()


@dataclass(frozen=True)
class _Pending:
    """One group's subprocessors tier as the store gave it; its processors not asked yet."""

    members: list[int]
    union: tuple[ProbeContext, subprocessors.StorePart] | Exception
    solo: list[tuple[ProbeContext, subprocessors.StorePart] | Exception]
    baseline: dict[str, int]

    def judged(self, answers: subprocessors.Answers) -> list[list[ProbeResult]]:
        """Each member's subprocessors results on `answers`."""

        def counted(got: tuple[ProbeContext, subprocessors.StorePart] | Exception) -> list[Measurement] | Exception:
            return got if isinstance(got, Exception) else subprocessors.measured(got[1], got[0], answers)

        tier = subprocessors.TIER
        solo = self.solo
        return _paired_tier(tier, counted(self.union), lambda k: counted(solo[k]), len(self.members), self.baseline)


@dataclass(frozen=True)
class StoreProbes:
    """A window's probes of the store, taken under its lock: every probe but the processors' lookups,
    which `finish` adds from answers asked with the store unlocked (`subprocessors.ask` on `wanted`),
    so no erasure of the store waits on a processor (issue 34)."""

    results: list[Verification]
    pending: list[_Pending] = field(default_factory=list)
    http_timeout: float = DEFAULT_HTTP_TIMEOUT

    def ask(self) -> list[Verification]:
        """`finish` on the processors' answers, asked now (`subprocessors.ask`)."""
        return self.finish(subprocessors.ask(self.wanted(), self.http_timeout))

    def wanted(self) -> list[subprocessors.Pair]:
        """Every lookup the verdicts need, each once."""
        out: list[subprocessors.Pair] = []
        for p in self.pending:
            for got in (p.union, *p.solo):
                if not isinstance(got, Exception):
                    out += subprocessors.wanted(got[1], got[0])
        return list(dict.fromkeys(out))

    def finish(self, answers: subprocessors.Answers) -> list[Verification]:
        """Each subject's verification with the subprocessors tier judged on `answers`."""
        results = [list(v.probes) for v in self.results]
        for p in self.pending:
            for i, found in zip(p.members, p.judged(answers), strict=True):
                results[i] += found
        order = {t: k for k, t in enumerate(PROBE_TIERS)}
        return [
            v.model_copy(update={"probes": sorted(r, key=lambda x: order[x.tier])})
            for v, r in zip(self.results, results, strict=True)
        ]


def probe_store(
    store_dir: Path,
    pairs: Sequence[tuple[Subject, Fingerprint]],
    *,
    tiers: Iterable[str] | None = None,
    http_timeout: float = DEFAULT_HTTP_TIMEOUT,
    extra_roots: Iterable[Path] = (),
) -> StoreProbes:
    """`verify_window`'s reading of the store (under the caller's lock), no processor asked."""
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
        per_subject, unscanned, scanned, others, located = byte_results(Path(store_dir), pairs, list(extra_roots))
        for i, found in enumerate(per_subject):
            results[i] += found
    groups: dict[str, list[int]] = {}
    for i, (_s, fp) in enumerate(pairs):
        groups.setdefault(fp.window or f"solo-{i}", []).append(i)
    pending: list[_Pending] = []
    for members in groups.values():
        group = [pairs[i] for i in members]
        tier_found = _tier_results(Path(store_dir), group, [t for t in wanted if t != BYTES], http_timeout)
        for i, found in zip(members, tier_found, strict=True):
            results[i] += found
        if subprocessors.TIER in wanted:
            pending.append(_store_part(Path(store_dir), members, group, http_timeout))
    return StoreProbes(
        [
            Verification(probes=r, unscanned=unscanned, scanned=scanned, others_content=o, residue_files=where)
            for r, o, where in zip(results, others, located, strict=True)
        ],
        pending,
        http_timeout,
    )


def _store_part(
    store_dir: Path, members: list[int], pairs: Sequence[tuple[Subject, Fingerprint]], http_timeout: float
) -> _Pending:
    """The subprocessors tier's store part for a group: the union's, and each subject's own (the
    lookups may find residue in the union, and whose it is is told subject by subject)."""

    def read(ctx: ProbeContext) -> tuple[ProbeContext, subprocessors.StorePart] | Exception:
        try:
            return ctx, subprocessors.read_store(ctx)
        except (ErasureError, apsw.Error, OSError) as exc:
            return exc

    union, others = _union([fp for _s, fp in pairs], [s for s, _fp in pairs])
    ctx = ProbeContext(
        store_dir=store_dir, subject=pairs[0][0], fingerprint=union, http_timeout=http_timeout, others=others
    )
    solo = (
        [
            read(ProbeContext(store_dir=store_dir, subject=s, fingerprint=fp, http_timeout=http_timeout))
            for s, fp in pairs
        ]
        if len(pairs) > 1
        else []
    )
    return _Pending(members, read(ctx), solo, pairs[0][1].bystanders)


def _error(tier: str, exc: Exception) -> list[ProbeResult]:
    return [
        ProbeResult(
            tier=tier, method=f"probe-error:{type(exc).__name__}", residue=1, bystanders_before=0, bystanders_after=0
        )
    ]


def _tier_results(
    store_dir: Path, pairs: Sequence[tuple[Subject, Fingerprint]], tiers: list[str], http_timeout: float
) -> list[list[ProbeResult]]:
    """Every tier's results but the subprocessors' (`_store_part`: asked with the store unlocked)."""
    subjects = [s for s, _fp in pairs]
    fps = [fp for _s, fp in pairs]
    union, others = _union(fps, subjects)
    baseline = fps[0].bystanders
    ctx = ProbeContext(
        store_dir=store_dir, subject=subjects[0], fingerprint=union, http_timeout=http_timeout, others=others
    )
    out: list[list[ProbeResult]] = [[] for _ in pairs]
    for tier, measured in _measure_tiers(ctx, [t for t in tiers if t != subprocessors.TIER]).items():

        def solo(k: int, tier: str = tier) -> list[Measurement] | Exception:
            subject, fp = pairs[k]
            own = ProbeContext(store_dir=store_dir, subject=subject, fingerprint=fp, http_timeout=http_timeout)
            return _measure_tiers(own, [tier])[tier]

        for r, found in zip(out, _paired_tier(tier, measured, solo, len(pairs), baseline), strict=True):
            r += found
    return out


def _paired_tier(
    tier: str,
    measured: list[Measurement] | Exception,
    solo: Callable[[int], list[Measurement] | Exception],
    n: int,
    baseline: dict[str, int],
) -> list[list[ProbeResult]]:
    """One tier's results for each of `n` subjects from the union's measurement; where the union
    found residue, each subject's own (`solo(k)`) says whose it is, and the bystanders stay the
    window's (a co-subject's items are not this subject's bystanders)."""
    if isinstance(measured, Exception):
        return [_error(tier, measured) for _ in range(n)]
    if n == 1 or not any(m.residue for m in measured):
        return [paired(tier, measured, baseline) for _ in range(n)]
    window_population = {m.method: m.bystanders for m in measured}
    out: list[list[ProbeResult]] = []
    for k in range(n):
        own = solo(k)
        if isinstance(own, Exception):
            out.append(_error(tier, own))
            continue
        out.append(
            paired(
                tier,
                [
                    Measurement(m.method, m.residue, m.population, window_population.get(m.method, m.bystanders))
                    for m in own
                ],
                baseline,
            )
        )
    return out
