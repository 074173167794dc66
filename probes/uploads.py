"""Tier 6 (uploads): blob rows, and blob files in EVERY directory under `blobs/`.

The walk covers the whole `blobs/` tree (a replica nobody listed in `store_meta.blob_locations` is
still found) and every configured local location outside it. A file is the subject's when its name is
one of the fingerprint's blob keys (keys are opaque and random, never derived from content). A
configured location that is not local (e.g. `s3://...`) cannot be walked here: when the subject had
uploads, each such location counts as residue-unknown (1) under `location-unverifiable`.
"""

from __future__ import annotations

from pathlib import Path

from probes.context import ProbeContext, to_results
from probes.model import Measurement, ProbeResult
from probes.store import BLOBS_DIR, count, ids_in, json_list, local_blob_roots, open_store, regular_files

TIER = "uploads"


def measure(ctx: ProbeContext) -> list[Measurement]:
    """The subject's blob rows and files left; bystanders' blob rows and files."""
    keys = ctx.fingerprint.keys
    sid, blob_keys = ctx.ids_json, json_list(keys.blob_keys)
    with open_store(ctx.store_dir) as conn:
        others = count(
            conn,
            f"SELECT count(*) FROM blobs WHERE (subject_id IS NULL OR subject_id NOT {ids_in('?1')})"
            f" AND blob_key NOT {ids_in('?2')}",
            (sid, blob_keys),
        )
        by_subject = count(conn, f"SELECT count(*) FROM blobs WHERE subject_id {ids_in()}", (sid,))
        by_key = count(conn, f"SELECT count(*) FROM blobs WHERE blob_key {ids_in()}", (blob_keys,))
        loc_rows = count(conn, f"SELECT count(*) FROM blob_locations WHERE blob_key {ids_in()}", (blob_keys,))
        loc_others = count(conn, f"SELECT count(*) FROM blob_locations WHERE blob_key NOT {ids_in()}", (blob_keys,))
        roots, remote = local_blob_roots(conn, ctx.store_dir)
    files_mine, files_others = _blob_files(ctx.store_dir, roots, set(keys.blob_keys))
    out = [
        Measurement("blobs-by-subject-id", by_subject, "blobs", others),
        Measurement("blobs-by-fingerprint-key", by_key, "blobs", others),
        Measurement("blob-locations-by-fingerprint-key", loc_rows, "blob-locations", loc_others),
        Measurement("blob-files", files_mine, "blob-files", files_others),
    ]
    if remote:
        out.append(Measurement("location-unverifiable", len(remote) if keys.blob_keys else 0, "remote", 0))
    return out


def _blob_files(store_dir: Path, roots: list[Path], mine: set[str]) -> tuple[int, int]:
    """Walk `blobs/` entirely, and each configured local root outside it, once each."""
    walk = [store_dir / BLOBS_DIR]
    base = walk[0].resolve()
    for root in roots:
        r = root.resolve()
        if not r.is_relative_to(base) and all(not r.is_relative_to(w.resolve()) for w in walk):
            walk.append(root)
    seen: set[Path] = set()
    found = others = 0
    for root in walk:
        for path in regular_files(root):
            real = path.resolve()
            if real in seen:
                continue
            seen.add(real)
            if path.name in mine:
                found += 1
            else:
                others += 1
    return found, others


def probe(ctx: ProbeContext) -> list[ProbeResult]:
    """Probe the uploads tier."""
    return to_results(TIER, measure(ctx), ctx.fingerprint)
