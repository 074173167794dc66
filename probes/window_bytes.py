"""The byte probes of a window (`probes.window`): one scan of the store, and of each of the home's other
folders, with every subject's needles, each distinct needle once; raw, folded and through the decoded
views (`probes.views`); per subject, the byte results, the files the scan found them in, and what
someone else's content says of them."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

from erasure.errors import ErasureError
from erasure.subject import Subject
from probes import byte_residue
from probes.bytescan import ScannedFile, scan_tree
from probes.fingerprint_model import Fingerprint
from probes.folded import folded_groups
from probes.located import residue_files
from probes.model import BYTES, Measurement, OthersContent, ProbeResult, ResidueFile, Unscanned, population_key
from probes.needles import SUBJECT_KINDS, Needle, NeedleKind
from probes.store import BLOBS_DIR, CORPORA_DIR, DB_FILE, SESSIONS_DIR, open_store
from probes.view_payloads import base64_runs
from probes.views import ViewCache, ViewReport, scan_views


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
    cache: ViewCache | None = None,
    pasted: Callable[[bytes], str | None] | None = None,
) -> tuple[list[set[int]], list[Unscanned]]:
    """One read of `root` through the decoded views for several owners' identifier and content needles:
    per owner, the indexes (into its own list) found; and what no view could read. Files `set_aside`
    labels are someone else's content: per owner, their finds go to `aside` by label. `cache`: the
    window's contents already read (`probes.views.ViewCache`). `pasted(run)`: a label when a base64 run
    is pasted in someone else's item (`_pasted_in_others_items`): a needle found only inside such runs'
    decodings goes to `aside` by their labels."""
    distinct: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for who, needles in enumerate(owned):
        for i, x in enumerate(needles):
            if x.view()[0]:
                distinct.setdefault(x.view(), []).append((who, i))
    keys = list(distinct)
    report = scan_views(root, keys, report_unscanned=report_unscanned, set_aside=set_aside, cache=cache)
    found: list[set[int]] = [set() for _ in owned]
    for k in report.found:
        labels = _pasted_labels(report, k, pasted) if aside is not None else None
        for who, i in distinct[keys[k]]:
            if labels is None or aside is None or owned[who][i].kind not in (NeedleKind.identifier, NeedleKind.content):
                found[who].add(i)
            else:
                for label in labels:
                    aside[who].setdefault(label, set()).add(i)
    if aside is not None:
        for label, ks in report.set_aside.items():
            for k in ks:
                for who, i in distinct[keys[k]]:
                    if owned[who][i].kind in (NeedleKind.identifier, NeedleKind.content):
                        aside[who].setdefault(label, set()).add(i)
    return found, report.unscanned


def _pasted_labels(report: ViewReport, k: int, pasted: Callable[[bytes], str | None] | None) -> list[str] | None:
    """The labels of the items needle `k` was found pasted in, when it was found only inside base64 runs
    that each sit in someone else's item; else None (residue)."""
    if pasted is None or k in report.plain:
        return None
    labels = [pasted(run) for run, found_there in report.encoded.items() if k in found_there]
    return None if not labels or None in labels else sorted({label for label in labels if label})


PASTED_FRAGMENT = 24
"""Characters from the middle of a base64 run that find the items holding it (a run cut out of a page's
bytes may have the columns before and after it glued on; its middle is the item's own)."""


def _pasted_in_others_items(store_dir: Path, mine: set[str]) -> Callable[[bytes], str | None]:
    """Whether a base64 run is pasted in someone else's item (docs/matching.md 7.2): a live item of the
    archive whose subject is outside the window holds it, and no live item of the window's subjects does.
    Its decodings (a picture, a document, base64 of text) are theirs: the erasing side, which reads the
    item as the text it is, cannot rewrite them in place; reported as `pasted:<sha256 of the run>`. A run
    in no live item (a freed page, the subject's item the erasure missed) stays residue. `mine`: the window's
    subjects' ids as the store spells them."""

    def label(run: bytes) -> str | None:
        core = run.rstrip(b"=")
        half = min(PASTED_FRAGMENT, len(core) // 2) // 2
        fragment = core[len(core) // 2 - half : len(core) // 2 + half]
        owners: set[str | None] = set()
        try:
            with open_store(store_dir) as conn:
                for sid, content in conn.execute(
                    "SELECT subject_id, content FROM raw_archive WHERE erased_at IS NULL AND instr(content, ?) > 0",
                    (fragment.decode("ascii"),),
                ):
                    # the item's own run, which the page's run holds with whatever was glued to it
                    if any(fragment in r and r.rstrip(b"=") in core for r in base64_runs(str(content).encode())):
                        owners.add(None if sid is None else str(sid))
        except Exception:  # no archive to say whose it is: residue
            return None
        if not owners or None in owners or owners & mine:
            return None
        return f"pasted:{hashlib.sha256(run).hexdigest()[:16]}"

    return label


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


def found_by_owner(
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


def byte_results(
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
    cache = ViewCache()  # a content the window's scans read once (a blob's replicas, a copy in the home)
    try:
        found, _hits, unreadable, scanned[store_dir.name] = found_by_owner(
            store_dir, fps, manifest=True, files_out=store_files
        )
        folded = folded_groups(store_dir, [fp.needles for fp in fps])
        viewed, unscanned = _views(
            store_dir,
            [fp.needles for fp in fps],
            report_unscanned=True,
            set_aside=_others_content(store_dir, fps),
            aside=aside,
            cache=cache,
            pasted=_pasted_in_others_items(store_dir, {i for fp in fps for i in (fp.subject_id, *fp.subject_ids)}),
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
        seen, _ = _views(root, home_needles, report_unscanned=False, cache=cache)
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
        out.append(paired(BYTES, measured, fp.bystanders))
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


def paired(tier: str, measured: list[Measurement], baseline: dict[str, int]) -> list[ProbeResult]:
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
