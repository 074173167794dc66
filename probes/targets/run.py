"""Probing a target of any kind: its fingerprint before the erasure, then its logical probes and one
byte scan of every file it has, after. The same for every kind; the kind's module says what to read."""

from __future__ import annotations

import contextlib
import logging
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from erasure.server_control import ServerNotStopped, Window, quiesced
from erasure.subject import Subject
from erasure.target_kinds import server_of
from erasure.targets import Target
from probes.bytescan import scan_tree
from probes.located import residue_files
from probes.model import BYTES, Measurement, OthersContent, ProbeResult, ResidueFile, Unscanned, Verification
from probes.needles import SUBJECT_KINDS, NeedleKind
from probes.targets.probe import TargetFingerprint, probe_for
from probes.views import scan_views

log = logging.getLogger(__name__)


def scan_roots(paths: list[Path]) -> list[Path]:
    """The folders to scan: each folder given, and the folder of each file given (so a database's
    `-wal`, `-shm` and journal files are read too), without one inside another."""
    dirs = sorted({(p if p.is_dir() else p.parent).resolve() for p in paths if p.exists() or p.parent.exists()})
    return [d for d in dirs if not any(d != o and d.is_relative_to(o) for o in dirs)]


def byte_results(target: Target, fp: TargetFingerprint) -> list[ProbeResult]:
    """Scan every file of the target for the fingerprint's needles, raw and through the decoded views:
    residue per needle kind (groups)."""
    return _bytes(target, fp)[0]


def _folders(kind_probe: object, target: Target) -> dict[Path, str]:
    """Each folder to scan -> how residue names it: the kind's role for it (`folders(target)`, e.g.
    `data_dir`, `log_dir`), else its own name."""
    folders = getattr(kind_probe, "folders", None)
    if folders is not None:
        named: dict[str, Path] = folders(target)
        by_path = {p.resolve(): role for role, p in named.items()}
        return {root: by_path.get(root, root.name) for root in scan_roots(list(named.values()))}
    return {root: root.name for root in scan_roots(kind_probe.files(target))}  # type: ignore[attr-defined]


@dataclass
class _Scanned:
    """What one reading of the target's folders found of one subject's needles (indexes into them)."""

    found: set[int] = field(default_factory=set)
    viewed: set[int] = field(default_factory=set)
    where: dict[str, dict[int, list[str]]] = field(default_factory=dict)
    unreadable: int = 0
    unscanned: list[Unscanned] = field(default_factory=list)


def _scan(target: Target, fps: list[TargetFingerprint]) -> list[_Scanned]:
    """One byte scan and one pass of the decoded views over the target's folders for every subject's
    needles at once (a window reads each file once, not once per subject); per subject what it found."""
    kind_probe = probe_for(target)
    # What the kind decodes itself into a folder of its own for the scan (compressed WAL pages), and
    # what of it could not be decoded.
    extracted = getattr(kind_probe, "extracted", None)
    with extracted(target) if extracted is not None else contextlib.nullcontext(({}, [])) as (more, unread):
        roots = _folders(kind_probe, target) | {p.resolve(): role for role, p in more.items()}
        return _scan_roots(target, kind_probe, fps, roots, unread)


def _scan_roots(
    target: Target, kind_probe: object, fps: list[TargetFingerprint], roots: dict[Path, str], unread: list[Unscanned]
) -> list[_Scanned]:
    needles = [n for fp in fps for n in fp.needles]
    starts = [0]
    for fp in fps:
        starts.append(starts[-1] + len(fp.needles))
    # What the kind knows it cannot read (a managed cluster's files, a WAL archive, values it stored
    # compressed): never certified.
    out = [
        _Scanned(unscanned=[*getattr(kind_probe, "unscanned", lambda _t, _fp: [])(target, fp), *unread]) for fp in fps
    ]
    texts = [n.view() for n in needles]

    def mine(i: int, indexes: set[int]) -> set[int]:
        return {x - starts[i] for x in indexes if starts[i] <= x < starts[i + 1]}

    for root in roots:
        report = scan_tree(root, [n.data for n in needles], caseless={i for i, n in enumerate(needles) if n.caseless})
        views = scan_views(root, texts)
        found, viewed = report.found_indexes(), views.found_indexes()
        unscanned = [u.model_copy(update={"target": target.name}) for u in views.unscanned]
        for i, got in enumerate(out):
            got.found |= mine(i, found)
            got.where[roots[root]] = {
                h.index - starts[i]: list(h.files) for h in report.found if starts[i] <= h.index < starts[i + 1]
            }
            got.unreadable += len(report.unreadable)
            got.viewed |= mine(i, viewed)
            got.unscanned += unscanned
    return out


def _bytes(
    target: Target, fp: TargetFingerprint, scanned: _Scanned | None = None
) -> tuple[list[ProbeResult], list[Unscanned], list[ResidueFile]]:
    got = scanned if scanned is not None else _scan(target, [fp])[0]
    needles = fp.needles
    found, viewed, where, unreadable, unscanned = got.found, got.viewed, got.where, got.unreadable, got.unscanned
    out: list[ProbeResult] = []
    residue: set[int] = set()
    for kind in SUBJECT_KINDS:
        groups = {n.group for n in needles if n.kind is kind}
        if groups:
            hit = {needles[i].group for i in found | viewed if needles[i].kind is kind}
            if kind is NeedleKind.identifier and fp.mentions:
                # Other people's items that name the subject are reported (an exception in the pack), not
                # erased: hits of the identifiers those items contain are explained, and counted; hits of
                # any other identifier stay residue.
                explained = hit & set(fp.mentioned_groups)
                out.append(
                    ProbeResult(
                        tier=BYTES,
                        method="scan:identifier-in-reported-mentions",
                        residue=0,
                        bystanders_before=len(explained),
                        bystanders_after=len(explained),
                        target=target.name,
                    )
                )
                hit -= explained
            residue |= {i for i in found if needles[i].kind is kind and needles[i].group in hit}
            out.append(
                ProbeResult(
                    tier=BYTES,
                    method=f"scan:{kind.value}",
                    residue=len(hit),
                    bystanders_before=0,
                    bystanders_after=0,
                    target=target.name,
                )
            )
    shared = {n.group for n in needles if n.kind is NeedleKind.shared_identifier}
    if shared:
        hit = {needles[i].group for i in found if needles[i].kind is NeedleKind.shared_identifier}
        before = fp.bystanders.get("shared-identifiers", len(hit))
        out.append(
            ProbeResult(
                tier=BYTES,
                method="shared-identifiers",
                residue=0,
                bystanders_before=before,
                bystanders_after=len(hit),
                target=target.name,
            )
        )
    out.append(
        ProbeResult(
            tier=BYTES,
            method="unreadable-files",
            residue=unreadable,
            bystanders_before=0,
            bystanders_after=0,
            target=target.name,
        )
    )
    located = [
        f.model_copy(update={"target": target.name})
        for folder, files_of in where.items()
        for f in residue_files(folder, files_of, residue, lambda _rel: BYTES)
    ]
    return out, unscanned, located


def take(target: Target, subject: Subject) -> TargetFingerprint:
    """The target's fingerprint, before the erasure."""
    return probe_for(target).fingerprint(target, subject)


def probe(target: Target, subject: Subject, fp: TargetFingerprint) -> list[ProbeResult]:
    """Logical probes and the byte scan of one target, after the erasure."""
    return verify(target, subject, fp).probes


def verify(target: Target, subject: Subject, fp: TargetFingerprint) -> Verification:
    """`probe`, with the target's files that no decoded view could read (a window of one: `verify_window`);
    a server that does not come back fails it (`ServerNotStarted`), never a silent all clear."""
    found, window = verify_window(target, [(subject, fp)])
    window.raise_if_down()
    return found[0]


def verify_window(
    target: Target, pairs: list[tuple[Subject, TargetFingerprint]], requests: tuple[str, ...] = ()
) -> tuple[list[Verification], Window]:
    """`verify` for every (subject, fingerprint) of a window, and the stretch the target's server was
    down for them. A target served by a running server (issue 25: a `chroma` target with `url`) is read
    only while the server is down: stopped once for every subject's reading (issue 37) and started
    again (or, managed by others, found stopped). The caller records the window's outage, then calls
    `raise_if_down`: a server that did not come back fails the verification."""
    server = server_of(target) if pairs else None  # nothing to read: no stop
    found: list[tuple[list[ProbeResult], list[Unscanned], list[ResidueFile], list[tuple[str, Measurement]]]] = []
    with quiesced(server, "the verification", requests) as window:
        if window.control is not None:
            _still_listening(window.control.url, target.name)
        scanned = _scan(target, [fp for _s, fp in pairs])
        for (subject, fp), got in zip(pairs, scanned, strict=True):
            out, unscanned, located = _bytes(target, fp, got)
            found.append((out, unscanned, located, list(probe_for(target).measure(target, subject, fp))))
    if window.control is not None:
        log.info("target %s: server unavailable %.2f s for the verification", target.name, window.seconds)
    return [_verification(target, fp, *got) for (_s, fp), got in zip(pairs, found, strict=True)], window


def _verification(
    target: Target,
    fp: TargetFingerprint,
    out: list[ProbeResult],
    unscanned: list[Unscanned],
    located: list[ResidueFile],
    measured: list[tuple[str, Measurement]],
) -> Verification:
    for tier, m in measured:
        before = fp.bystanders.get(m.population, m.bystanders)
        out.append(
            ProbeResult(
                tier=str(tier),
                method=m.method,
                residue=m.residue,
                bystanders_before=before,
                bystanders_after=m.bystanders,
                target=target.name,
            )
        )
    if fp.mentions:
        out.append(
            ProbeResult(
                tier=BYTES,
                method="mentions-reported",
                residue=0,
                bystanders_before=fp.mentions,
                bystanders_after=fp.mentions,
                target=target.name,
            )
        )
    # The probe's own declaration of the mentions whose finds it explained: the pack declares them even
    # where the eraser's reading of another person's record found less than the probe's (a note pasted
    # compressed, then base64), never an all clear with the subject in someone's record unsaid.
    others = (
        [OthersContent(tier=BYTES, kind="mentions", label=f"target:{target.name}", hits=fp.mentions)]
        if fp.mentions
        else []
    )
    return Verification(probes=out, unscanned=unscanned, residue_files=located, others_content=others)


def _still_listening(url: str, target: str) -> None:
    """The probes' own look, before reading a served folder: nothing may accept a connection at the
    server's host and port (the stop was confirmed by `erasure.server_control`; this does not rely on it)."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "localhost", parts.port or 80), timeout=2.0):
            pass
    except ConnectionRefusedError:
        return
    except OSError:
        pass
    raise ServerNotStopped(f"target {target}: the server at {url} still accepts connections: its folder was not read")
