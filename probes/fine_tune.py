"""Tier 5 (fine-tune): example rows, and every corpus file on disk parsed line by line.

Every file under `corpora/` is read (not only the versions `ft_corpora` lists), plus any corpus path
`ft_corpora` names elsewhere in the store. A line is the subject's when its JSON names one of the
subject's (source, source_ref) pairs or the subject's id; a line that is not JSON counts when it
contains the subject's id or one of its source refs. Bystanders: the distinct (source, source_ref)
pairs of other people's examples, in the table and in the files (a new corpus version without the
subject keeps them; old versions' bytes may go).
"""

from __future__ import annotations

import json
from pathlib import Path

import apsw

from erasure.errors import StoreError
from erasure.files import inside_folder
from probes.context import ProbeContext, to_results
from probes.model import Measurement, ProbeResult
from probes.store import (
    CORPORA_DIR,
    column,
    count,
    ids_in,
    json_list,
    json_objects,
    json_pairs,
    not_mine,
    open_store,
    pair_rows,
    pairs_in,
    regular_files,
)

TIER = "fine_tune"


def measure(ctx: ProbeContext) -> list[Measurement]:
    """The subject's examples left in the table and in corpus files; bystanders' examples."""
    keys = ctx.fingerprint.keys
    sid, ids, pairs = ctx.ids_json, json_list(keys.example_ids), json_pairs(keys.source_refs)
    with open_store(ctx.store_dir) as conn:
        others = count(
            conn,
            "SELECT count(*) FROM (SELECT DISTINCT source, source_ref FROM ft_examples WHERE "
            + not_mine(
                f"SELECT rowid FROM ft_examples WHERE subject_id {ids_in('?1')}",
                "SELECT value FROM json_each(?2)",
                pair_rows("ft_examples", "?3"),
            )
            + ")",
            (sid, ids, pairs),
        )
        by_subject = count(conn, f"SELECT count(*) FROM ft_examples WHERE subject_id {ids_in()}", (sid,))
        by_id = count(conn, f"SELECT count(*) FROM ft_examples WHERE example_id {ids_in()}", (ids,))
        by_ref = count(conn, f"SELECT count(*) FROM ft_examples WHERE {pairs_in()}", (pairs,))
        files = _corpus_files(conn, ctx.store_dir)
    lines_mine, line_others = _scan_corpora(files, ctx)
    return [
        Measurement("examples-by-subject-id", by_subject, "examples", others),
        Measurement("examples-by-fingerprint-id", by_id, "examples", others),
        Measurement("examples-by-source-ref", by_ref, "examples", others),
        Measurement("corpus-files", lines_mine, "corpus-examples", line_others),
    ]


def _corpus_files(conn: apsw.Connection, store_dir: Path) -> list[Path]:
    """Every regular file under `corpora/`, and every `ft_corpora.path` that lies inside the store's
    folder (`erasure.files.inside_folder`, the erasers' rule); one that leads out is never read."""
    files = list(regular_files(store_dir / CORPORA_DIR))
    for rel in column(conn, "SELECT path FROM ft_corpora"):
        try:
            path = inside_folder(store_dir, str(rel), "corpus path").resolve()
        except StoreError:
            continue
        if path.is_file() and path not in {f.resolve() for f in files}:
            files.append(path)
    return files


def _scan_corpora(files: list[Path], ctx: ProbeContext) -> tuple[int, int]:
    """(lines naming the subject, distinct bystander pairs) over every corpus file."""
    pairs = {(s, r) for s, r in ctx.fingerprint.keys.source_refs}
    ids = set(ctx.ids)
    raw_marks = [*(sid.encode() for sid in ids), *(r.encode() for _, r in pairs)]
    mine = 0
    others: set[tuple[str, str]] = set()
    for path in files:
        with open(path, "rb") as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                except (UnicodeDecodeError, json.JSONDecodeError):
                    mine += any(m in line for m in raw_marks)
                    continue
                found = _line_pairs(doc)
                if found & pairs or any(o.get("subject_id") in ids for o in json_objects(doc)):
                    mine += 1
                else:
                    others |= found
    return mine, len(others)


def _line_pairs(doc: object) -> set[tuple[str, str]]:
    out = set()
    for obj in json_objects(doc):
        src, ref = obj.get("source"), obj.get("source_ref")
        if isinstance(src, str) and isinstance(ref, str):
            out.add((src, ref))
    return out


def probe(ctx: ProbeContext) -> list[ProbeResult]:
    """Probe the fine-tune tier."""
    return to_results(TIER, measure(ctx), ctx.fingerprint)
