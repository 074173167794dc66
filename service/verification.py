"""Independent verification, the library under the `verification` flow and the erasure windows.

The fingerprint (needles: identifiers, distinctive content, raw vector bytes) is taken by the probes'
own code before the cascade and sealed to disk under a fresh key (AES-GCM); a run that crashes between
cascade and verification unseals it on the rerun. Verification destroys key and ciphertext when it
ends all clear. Re-verifying later, without a fingerprint, probes with the identifiers from the vault.

No processor is asked while the store is locked (issue 34): a fingerprint taken here asks none (the
processors' populations have no baseline), and a verification reads the store first (`probe_requests`,
under the caller's lock; an erasure window keeps what it read in this process, `keep_probes`), then asks
the processors with the store released, and judges each request on the whole (`verify_requests`).
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

from erasure import request_records
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.exception_kinds import MENTION_IN_OTHERS_CONTENT as OTHERS_CONTENT
from erasure.exception_kinds import UNSCANNED_CONTENT as UNSCANNED
from erasure.ledger import ledger_key
from erasure.server_control import Window
from erasure.subject import Subject
from erasure.targets import Target
from probes import manifest
from probes.fingerprint import Fingerprint, destroy
from probes.harvest import OTHERS_KEYS
from probes.keys import SubjectKeys
from probes.run import Verification, to_json
from probes.targets import run as target_probes
from probes.targets.probe import TargetFingerprint
from probes.window import StoreProbes, probe_store, take_window
from proof.evidence_folder import EvidenceFolder
from service.outcome import Outcome
from service.scope import scope_of
from tasks.backup_holds import hold_in_backups
from tasks.targets.runner import record_outage


def duty_records(engine: Engine, h: Home) -> list[str]:
    """Labels (`outbox/<request id>.eml`) of the requesters' notices waiting in the outbox: like the request
    vault, the controller's own duty records (docs/matching.md 7.3), never residue. A file counts only
    when it is a regular file named after a request of the vault."""
    box = h.outbox_dir
    if box.is_symlink() or not box.is_dir():
        return []
    names = sorted(p.name for p in box.iterdir() if p.suffix == ".eml" and p.is_file() and not p.is_symlink())
    if not names:
        return []
    with engine.lent() as conn:
        known = set()
        for name in names:
            try:
                request_records.load_envelope(conn, name[: -len(".eml")])
            except Exception:  # not a request of this vault: not a duty record
                continue
            known.add(name)
    return [f"{box.name}/{n}" for n in sorted(known)]


def home_scan_roots(engine: Engine, h: Home) -> list[Path]:
    """Every folder of the home besides the store that the byte scan covers: all but the request vault
    (engine/) and the keys, and the outbox when it holds nothing but requesters' notices (`duty_records`);
    an outbox with anything else in it is scanned whole."""
    skip = {h.store_dir.name, h.engine_dir.name, h.keys_dir.name}
    if not h.root.is_dir():
        return []
    box = h.outbox_dir
    if box.is_dir() and not box.is_symlink():
        entries = sorted(p.name for p in box.iterdir())
        if entries and len(duty_records(engine, h)) == len(entries):
            skip.add(box.name)
    return sorted(p for p in h.root.iterdir() if p.is_dir() and p.name not in skip)


def fingerprint_paths(h: Home, request_id: str) -> tuple[Path, Path]:
    d = h.engine_dir / "fingerprints"
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{request_id}.sealed", h.keys_dir / f"fingerprint-{request_id}.key"


def take_and_seal_fingerprint(engine: Engine, h: Home, request_id: str) -> dict[str, Any]:
    """Take the fingerprint before the cascade, unless a sealed one from an earlier run exists."""
    ct, key = fingerprint_paths(h, request_id)
    with engine.lent() as conn:
        subject = request_records.load_envelope(conn, request_id).subject
        if ct.exists() and key.exists():
            old = Fingerprint.unseal(ct, key)
            if _bystanders_lost_last_time(h, request_id):
                why = "retaken-after-bystanders-lost"
            elif _other_erasure_since(conn, request_id, old.taken_at):
                why = "retaken-after-another-erasure"
            else:
                return {"request_id": request_id, "fingerprint": "reused"}
            # The store's bystanders changed after this baseline (another subject's erasure, or this
            # request's own failed run, which reported its loss): keep the subject's needles and keys
            # from before the cascade, measure the bystanders anew.
            fp = old.with_bystanders_of(take_all(engine, h, subject), why)
            destroy(ct, key)
            fp.seal(ct, key)
            request_records.log_event(conn, request_id, "fingerprint.baseline_retaken", {"baseline": why})
            return {"request_id": request_id, "fingerprint": "baseline-retaken"}
    fp = take_all(engine, h, subject)
    fp.seal(ct, key)
    return {"request_id": request_id, "fingerprint": "taken", "needles": len(fp.needles)}


def take_all(engine: Engine, h: Home, subject: Subject) -> Fingerprint:
    """The fingerprint of the reference store (when the home has one) and of every other target."""
    return take_window_all(engine, h, [subject])[0]


def take_window_all(engine: Engine, h: Home, subjects: list[Subject]) -> list[Fingerprint]:
    """Every subject's fingerprint (`take_all`), the reference store's taken as one window."""
    scope = scope_of(h)
    if scope.reference:
        # other erasures call processors with the store unlocked: their subjects are no bystanders
        with engine.lent() as conn:
            erased = request_records.every_store_id(conn)
        fps = take_window(h.store_dir, subjects, not_bystanders=erased, lookups=False)
    else:
        fps = [
            Fingerprint(subject_id=s.id, subject_ids=[s.id], taken_at=datetime.now(UTC), keys=SubjectKeys())
            for s in subjects
        ]
    if not scope.others:
        return fps
    taken = [{t.name: target_probes.take(t, s) for t in scope.others} for s in subjects]
    for t in scope.others:
        fixed = window_baselines(t, [got[t.name] for got in taken])
        for got, fp in zip(taken, fixed, strict=True):
            got[t.name] = fp
    return [fp.model_copy(update={"targets": got}) for fp, got in zip(fps, taken, strict=True)]


def window_baselines(target: Target, fps: list[TargetFingerprint]) -> list[TargetFingerprint]:
    """The bystander baselines of a window's subjects in one target, taken together before any erasure,
    made to leave out the window's other subjects: a subject's verification runs after
    every erasure of the window, and the other subjects' items, erased meanwhile, are not bystanders it
    lost. A subject's items in a population are what the kind counts there for nobody (every item a
    bystander: a fingerprint of a subject no store holds) less what it counts as the subject's
    bystanders; each subject's baseline loses the other subjects' items."""
    if len(fps) < 2:
        return fps
    total = target_probes.take(target, Subject(id=f"window-baseline-{secrets.token_hex(16)}")).bystanders
    own = [{p: max(0, total.get(p, n) - n) for p, n in fp.bystanders.items()} for fp in fps]
    out = []
    for i, fp in enumerate(fps):
        others = {p: sum(o.get(p, 0) for j, o in enumerate(own) if j != i) for p in fp.bystanders}
        out.append(fp.model_copy(update={"bystanders": {p: max(0, n - others[p]) for p, n in fp.bystanders.items()}}))
    return out


def seal_fingerprints(engine: Engine, h: Home, request_ids: list[str]) -> dict[str, str]:
    """Every request's fingerprint, sealed, before its cascade: one taken for all that have none (one
    store-facts read, one byte scan, one bystander baseline); one sealed by an earlier run is kept (or
    its bystander baseline retaken, `take_and_seal_fingerprint`). Returns what happened per request."""
    out: dict[str, str] = {}
    fresh: list[str] = []
    for rid in request_ids:
        ct, key = fingerprint_paths(h, rid)
        if ct.exists() and key.exists():
            out[rid] = str(take_and_seal_fingerprint(engine, h, rid)["fingerprint"])
        else:
            fresh.append(rid)
    if fresh:
        with engine.lent() as conn:
            subjects = [request_records.load_envelope(conn, rid).subject for rid in fresh]
        for rid, fp in zip(fresh, take_window_all(engine, h, subjects), strict=True):
            fp.seal(*fingerprint_paths(h, rid))
            out[rid] = "taken"
    return out


def _bystanders_lost_last_time(h: Home, request_id: str) -> bool:
    """Whether the request's last verification ended with other people's data lost (exit 10)."""
    doc = EvidenceFolder.of(h, request_id).verification
    return doc is not None and bool(doc.get("lost_bystander_tiers"))


def _other_erasure_since(engine: Any, request_id: str, since: datetime) -> bool:
    """Whether another request's erasure scrubbed this home's store, or erased items from one of its
    targets, after `since`."""
    rows = [
        *engine.execute(
            "SELECT at FROM engine_events WHERE event = 'store.scrubbed' AND request_id != ?", (request_id,)
        ),
        *engine.execute(
            "SELECT ended_at FROM target_step_records WHERE request_id != ? AND before_count > 0"
            " AND ended_at IS NOT NULL",
            (request_id,),
        ),
    ]
    for (at,) in rows:
        when = datetime.fromisoformat(str(at).replace("Z", "+00:00"))
        if when > since:
            return True
    return False


def record_verification(
    h: Home, engine: Any, request_id: str, result: Verification, fp: Fingerprint, sealed: bool
) -> dict[str, Any]:
    """Write the request's `verification.json` from the probes' `result`, open (or close) its residue
    exceptions, and destroy the sealed fingerprint when all clear. Returns the document (counts only)."""
    doc = to_json(result, request_id, datetime.now(UTC))
    retaken = {
        "retaken-after-another-erasure": "after another erasure",
        "retaken-after-bystanders-lost": "after a run of this request lost other people's data (exit 10)",
    }
    doc["fingerprint"] = (
        "taken-at-verification"
        if not sealed
        else f"sealed-before-cascade; bystander baseline retaken {retaken[fp.baseline]}"
        if fp.baseline in retaken
        else "sealed-before-cascade"
    )
    doc["needles"] = fp.needle_stats
    if result.scanned:
        doc["scan_manifest"] = scan_manifest(h, request_id, result)
    if result.residue_files:  # by their scan-manifest labels: a path can name someone
        labels = ledger_key(h)
        doc["residue_files"] = [
            {"tier": r.tier, "file": manifest.label(labels, r.folder, r.rel), "hits": r.hits}
            | ({"target": r.target} if r.target else {})
            for r in result.residue_files
        ]
    if not doc["all_clear"]:
        for tier in doc.get("failing_tiers", []):
            request_records.open_exception(
                engine, request_id, tier, "residue", "verification", {"probe": "independent", "tier": tier}
            )
    else:
        for e in request_records.exceptions(engine, request_id, open_only=True):
            if e.kind == "residue":
                request_records.close_exception(engine, e.exception_id)  # an earlier residue is gone now
    keys = fp.needle_stats.get(OTHERS_KEYS, 0)
    if keys:  # other people's source keys that name the subject: theirs, declared (never residue)
        doc.setdefault("others_content", []).append(
            {"tier": "episodic", "kind": "shared-key", "label": "source keys of other people's items", "hits": keys}
        )
    record_unscanned(engine, request_id, doc.get("unscanned_content", []))
    record_others_content(engine, request_id, doc.get("others_content", []))
    hold_in_backups(engine, request_id, h)  # declared backups that still hold the subject (issue 26)
    # Every open exception of the request (ids only) travels into the signed pack.
    doc["exceptions"] = [
        {"tier": e.tier, "kind": e.kind, "item_key": e.item_key, "ground": e.ground}
        for e in request_records.exceptions(engine, request_id, open_only=True)
    ]
    evidence = h.run_dir(request_id)
    evidence.mkdir(parents=True, exist_ok=True)
    (evidence / "verification.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    if doc["all_clear"] and sealed:
        ct, key = fingerprint_paths(h, request_id)
        destroy(ct, key)
    return doc


def scan_manifest(h: Home, request_id: str, result: Verification) -> dict[str, Any]:
    """The `scan_manifest` of `verification.json`: every file the byte scan read (`probes.manifest`),
    paths that could name someone as keyed hashes under the home's ledger key (`keys/`, never scanned,
    never in a pack). The whole manifest is written beside the pack (`scan-manifest.json`), and
    `verification.json` names its digest (and holds its entries, unless there are too many)."""
    doc = manifest.to_json(manifest.entries(ledger_key(h), result.scanned))
    evidence = h.run_dir(request_id)
    evidence.mkdir(parents=True, exist_ok=True)
    (evidence / manifest.FILE).write_bytes(manifest.document_bytes(doc))
    return manifest.summary(doc)


def _sync_exceptions(
    engine: Any, request_id: str, kind: str, opened: list[tuple[str, str, dict[str, Any]]], ground: str
) -> None:
    """One open exception of `kind` per (tier, item key, detail) in `opened`; those of `kind` a later
    verification no longer finds are closed."""
    for tier, key, detail in opened:
        request_records.open_exception(engine, request_id, tier, kind, key, detail, ground)
    keep = {(tier, key) for tier, key, _detail in opened}
    for e in request_records.exceptions(engine, request_id, open_only=True):
        if e.kind == kind and (e.tier, e.item_key) not in keep:
            request_records.close_exception(engine, e.exception_id)


def record_unscanned(engine: Any, request_id: str, unscanned: list[dict[str, Any]]) -> None:
    """One open `unscanned_content` exception per file (or member) no decoded view could read, keyed by
    its digest (and target); those a later verification read, or no longer found, are closed."""
    opened = [
        (
            str(u["tier"]),
            (f"target:{u['target']}:" if u.get("target") else "") + f"sha256:{u['sha256']}",
            {"reason": u["reason"], "size": u["size"]},
        )
        for u in unscanned
    ]
    _sync_exceptions(engine, request_id, UNSCANNED, opened, "verification")


OTHERS_GROUND = (
    "the subject is named inside another person's content that the erasure may not rewrite (their attachment): "
    "attributed to its owner; review it with them"
)


def record_others_content(engine: Any, request_id: str, places: list[dict[str, Any]]) -> None:
    """One open `mention_in_others_content` exception per place (docs/matching.md 7.2), keyed by its label;
    those no longer found are closed."""
    opened = [(str(p["tier"]), f"{p['kind']}:{p['label']}", {"hits": p["hits"]}) for p in places]
    _sync_exceptions(engine, request_id, OTHERS_CONTENT, opened, OTHERS_GROUND)


class Verdict(TypedDict):
    """What a request's verification says (tier names and a flag only)."""

    all_clear: bool
    residue_tiers: list[str]
    lost_bystander_tiers: list[str]


def verdict_of(doc: dict[str, Any]) -> Verdict:
    """The verdict of a `verification.json` document."""
    return {
        "all_clear": bool(doc.get("all_clear")),
        "residue_tiers": list(doc.get("residue_tiers") or []),
        "lost_bystander_tiers": list(doc.get("lost_bystander_tiers") or []),
    }


def judge(verdict: Verdict) -> tuple[Outcome, str]:
    """The outcome a verdict means, and why: all clear; residue (named by tier); other people's data
    lost with no residue; or residue when no probe ran (zero probes is never all clear)."""
    if verdict["all_clear"]:
        return Outcome.all_clear, "all clear"
    if verdict["residue_tiers"]:
        return Outcome.residue, f"residue found in: {', '.join(verdict['residue_tiers'])}"
    lost = ", ".join(verdict["lost_bystander_tiers"])
    if lost:
        return Outcome.bystanders_lost, f"other people's data lost in: {lost} (no residue of the subject)"
    return Outcome.residue, "no probe ran"


def verify_request(engine: Engine, h: Home, request_id: str, tiers: list[str] | None = None) -> dict[str, Any]:
    """Run the probes for one request (every tier, or `tiers` and the byte scan) with its sealed
    fingerprint (or one taken now, from the vault); write verification.json; return it (ids and counts
    only)."""
    return verify_requests(engine, h, [request_id], tiers)[request_id]


def verify_requests(
    engine: Engine, h: Home, request_ids: list[str], tiers: list[str] | None = None
) -> dict[str, dict[str, Any]]:
    """`verify_request` for several requests at once: the reference store's probes run once for all of
    them (`probes.window.verify_window`: one byte scan, the tier probes with the union of their keys),
    every other target's probes per request. The store's part is the one an erasure window read under
    the store's lock (`keep_probes`), or read now; the processors are asked here. Returns each
    request's verification.json."""
    with _kept_lock:
        kept = _kept.pop((h.root, tuple(request_ids)), None)
        if kept is not None and kept.tiers != tiers:
            kept = None
    probing = kept or probe_requests(engine, h, request_ids, tiers)
    results = probing.probed.finish()  # the processors' lookups: the caller holds no lock of the store
    with engine.lent() as conn:
        docs: dict[str, dict[str, Any]] = {}
        for rid, (_subject, fp), result, was_sealed in zip(
            request_ids, probing.pairs, results, probing.sealed, strict=True
        ):
            docs[rid] = record_verification(h, conn, rid, result, fp, was_sealed)
        return docs


@dataclass(frozen=True)
class Probing:
    """A verification's reading of the store (`probe_requests`): each request's subject and
    fingerprint, whether it was sealed, and the probes so far (in this process only: identifiers)."""

    request_ids: tuple[str, ...]
    tiers: list[str] | None
    pairs: list[tuple[Subject, Fingerprint]]
    sealed: list[bool]
    probed: Probed


_kept: dict[tuple[Path, tuple[str, ...]], Probing] = {}
"""Per home and window (its request ids), the store's part of the verification the window read under the
store's lock. Per window, not per home: another window of the home may run between a window's reading
and its processors' lookups (two runs in one process), and must not replace the reading."""
_kept_lock = threading.Lock()


def keep_probes(engine: Engine, h: Home, request_ids: list[str]) -> None:
    """Read the store's part of the requests' verification now (the caller holds the store's lock) and
    keep it in this process for their `verify_requests`, which asks the processors after the lock is
    released. A rerun of the same window replaces what an earlier one left."""
    probing = probe_requests(engine, h, request_ids)
    with _kept_lock:
        _kept[(h.root, tuple(request_ids))] = probing


def probe_requests(engine: Engine, h: Home, request_ids: list[str], tiers: list[str] | None = None) -> Probing:
    """Every probe of the requests' verification but the processors' lookups: fingerprints unsealed
    (or taken now, from the vault), the store and every other target probed, outages recorded."""
    with engine.lent() as conn:
        pairs: list[tuple[Subject, Fingerprint]] = []
        sealed: list[bool] = []
        for rid in request_ids:
            subject = request_records.load_envelope(conn, rid).subject
            ct, key = fingerprint_paths(h, rid)
            sealed.append(ct.exists() and key.exists())
            pairs.append((subject, Fingerprint.unseal(ct, key) if sealed[-1] else take_all(engine, h, subject)))
    outages: list[tuple[Target, Window]] = []
    probed = probe_store_subjects(engine, h, pairs, tiers, outages, tuple(request_ids))
    for target, window in outages:  # every stretch a served target was down, in each request's steps
        record_outage(h, request_ids, target, window)
    for _target, window in outages:
        window.raise_if_down()
    return Probing(tuple(request_ids), tiers, pairs, sealed, probed)


@dataclass(frozen=True)
class Probed:
    """The probes of some subjects as the store and the other targets gave them; the processors'
    lookups still to make (`finish`, with no lock of the store held)."""

    n: int
    store: StoreProbes | None
    """The reference store's (None: the home has none)."""
    per_target: list[list[Verification]]

    def finish(self) -> list[Verification]:
        """Ask the processors, then each subject's verification: the reference store's and every
        other target's probes together."""
        found = self.store.ask() if self.store is not None else [Verification(probes=[], unscanned=[])] * self.n
        out: list[Verification] = []
        for i, ref in enumerate(found):
            probes, unscanned, located = list(ref.probes), list(ref.unscanned), list(ref.residue_files)
            others = list(ref.others_content)
            for got in self.per_target:
                probes += got[i].probes
                unscanned += got[i].unscanned
                located += got[i].residue_files
                others += got[i].others_content
            update = {"probes": probes, "unscanned": unscanned, "residue_files": located, "others_content": others}
            out.append(ref.model_copy(update=update))
        return out


def probe_store_subjects(
    engine: Engine,
    h: Home,
    pairs: list[tuple[Subject, Fingerprint]],
    tiers: list[str] | None = None,
    outages: list[tuple[Target, Window]] | None = None,
    request_ids: tuple[str, ...] = (),
) -> Probed:
    """Each (subject, fingerprint) probed, but for the processors' lookups: the reference store's
    probes once for all (one byte scan of the store and the home's other folders), every other
    target's for each subject, a served target's with its server stopped once for all of them. Writes
    nothing. With `outages`, each served target's stretch down is added to it (the caller records it,
    then `raise_if_down`); without, a server that did not come back raises here."""
    scope = scope_of(h)
    store = (
        probe_store(h.store_dir, pairs, tiers=tiers, extra_roots=home_scan_roots(engine, h))
        if scope.reference
        else None
    )
    per_target: list[list[Verification]] = []
    for target in scope.others:
        tpairs = [(s, fp.targets.get(target.name) or target_probes.take(target, s)) for s, fp in pairs]
        got, window = target_probes.verify_window(target, tpairs, request_ids)
        if outages is None:
            window.raise_if_down()
        else:
            outages.append((target, window))
        per_target.append(got)
    return Probed(len(pairs), store, per_target)
