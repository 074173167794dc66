"""Tier 5 (fine-tune): versioned JSONL training corpora and model lineage.

A corpus `<name>` has versions `corpora/<name>/v<version>.jsonl` (paths relative to the store dir).
Ingest appends to the latest version that is not frozen; `freeze_and_train` freezes it (sha256,
frozen_at), records the model trained on it, and starts the next version as a copy of the frozen
one, so corpora are cumulative. Each line is `{"source", "source_ref", "prompt", "completion"}` and
has an `ft_examples` row (`line_no` is 1-based) saying whose example it is.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw

from erasure.errors import Conflict, InputError, NotFound, StoreError
from erasure.files import inside_folder, open_private, private_dirs
from erasure.sqlite import transaction
from memory.schema import CORPORA_DIR

SFT_CORPUS = "assistant-sft"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class CorpusVersion:
    """One `ft_corpora` row."""

    corpus_id: int
    name: str
    version: int
    path: str
    examples: int
    frozen_at: str | None


@dataclass(frozen=True)
class Example:
    """One training example to append: whose it is, and its JSONL line (without newline)."""

    subject_id: str | None
    source: str
    source_ref: str
    line: str


def iso(at: datetime | None = None) -> str:
    """ISO 8601 UTC with Z (the store's timestamp format)."""
    at = at or datetime.now(UTC)
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def example_line(source: str, source_ref: str, prompt: str, completion: str) -> str:
    """The JSONL line of one example (sorted keys, UTF-8 kept)."""
    return json.dumps(
        {"source": source, "source_ref": source_ref, "prompt": prompt, "completion": completion},
        sort_keys=True,
        ensure_ascii=False,
    )


def relative_path(name: str, version: int) -> str:
    """`corpora/<name>/v<version>.jsonl`."""
    if not _NAME.match(name):
        raise InputError("corpus names are 1-64 characters of [A-Za-z0-9_.-]")
    return f"{CORPORA_DIR}/{name}/v{version}.jsonl"


def corpus_file(store_dir: Path, rel: str) -> Path:
    """The file of a corpus version's `ft_corpora.path`: inside the store's folder, or `StoreError`
    naming the kind "corpus path" (`erasure.files.inside_folder`): a row is not trusted with a path."""
    return inside_folder(Path(store_dir), rel, "corpus path")


def _row(r: tuple[Any, ...]) -> CorpusVersion:
    return CorpusVersion(int(r[0]), str(r[1]), int(r[2]), str(r[3]), int(r[4]), None if r[5] is None else str(r[5]))


def latest(conn: apsw.Connection, name: str) -> CorpusVersion | None:
    """The highest version of corpus `name`, or None."""
    r = conn.execute(
        "SELECT corpus_id, name, version, path, examples, frozen_at FROM ft_corpora WHERE name=?"
        " ORDER BY version DESC LIMIT 1",
        (name,),
    ).fetchone()
    return None if r is None else _row(r)


def _start_version(
    conn: apsw.Connection, store_dir: Path, name: str, version: int, now: str, copy_of: CorpusVersion | None
) -> CorpusVersion:
    rel = relative_path(name, version)
    path = Path(store_dir) / rel
    private_dirs(path.parent)
    # A corpus holds people's words: 0600 in 0700 folders, a copy too (copyfile keeps no mode).
    os.close(open_private(path))
    if copy_of is not None:
        shutil.copyfile(corpus_file(store_dir, copy_of.path), path)
    examples = copy_of.examples if copy_of else 0
    conn.execute(
        "INSERT INTO ft_corpora(name, version, path, examples, created_at) VALUES (?,?,?,?,?)",
        (name, version, rel, examples, now),
    )
    corpus_id = int(conn.last_insert_rowid())
    if copy_of is not None:
        conn.execute(
            "INSERT INTO ft_examples(corpus_id, line_no, subject_id, source, source_ref)"
            " SELECT ?, line_no, subject_id, source, source_ref FROM ft_examples WHERE corpus_id=?"
            " ORDER BY line_no",
            (corpus_id, copy_of.corpus_id),
        )
    return CorpusVersion(corpus_id, name, version, rel, examples, None)


def open_version(conn: apsw.Connection, store_dir: Path, name: str, now: str) -> CorpusVersion:
    """The version ingest appends to: the latest unfrozen one, started if needed (v1 empty, or the
    next version as a copy of a frozen latest). Runs inside the caller's transaction."""
    cur = latest(conn, name)
    if cur is None:
        return _start_version(conn, store_dir, name, 1, now, None)
    if cur.frozen_at is not None:
        return _start_version(conn, store_dir, name, cur.version + 1, now, cur)
    return cur


def append_examples(conn: apsw.Connection, store_dir: Path, version: CorpusVersion, examples: list[Example]) -> int:
    """Append lines to an unfrozen version's file and index them in `ft_examples`. Runs inside the
    caller's transaction; returns the file size before the append (to truncate back on rollback)."""
    path = corpus_file(store_dir, version.path)
    before = path.stat().st_size if path.exists() else 0
    row = conn.execute("SELECT examples FROM ft_corpora WHERE corpus_id=?", (version.corpus_id,)).fetchone()
    if row is None:
        raise StoreError(f"corpus version {version.corpus_id} is gone")
    first = int(row[0]) + 1
    with path.open("ab") as f:
        f.write("".join(e.line + "\n" for e in examples).encode("utf-8"))
    conn.executemany(
        "INSERT INTO ft_examples(corpus_id, line_no, subject_id, source, source_ref) VALUES (?,?,?,?,?)",
        [(version.corpus_id, first + i, e.subject_id, e.source, e.source_ref) for i, e in enumerate(examples)],
    )
    conn.execute("UPDATE ft_corpora SET examples = examples + ? WHERE corpus_id=?", (len(examples), version.corpus_id))
    return before


def file_sha256(path: Path) -> str:
    """sha256 hex of a file."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def freeze_and_train(
    conn: apsw.Connection, store_dir: Path, name: str, model_id: str, base_model: str, *, now: datetime | None = None
) -> int:
    """Freeze the latest version of `name` (sha256, frozen_at), record `model_id` as trained on it
    in `model_lineage`, and start the next version as a copy. Returns the frozen corpus_id.

    Opens its own transaction. `NotFound` if there is no such corpus, `Conflict` if `model_id` is
    already recorded.
    """
    when = iso(now)
    started: Path | None = None
    try:
        with transaction(conn):
            cur = latest(conn, name)
            if cur is None:
                raise NotFound(f"no corpus named {name!r}")
            if conn.execute(
                "SELECT 1 FROM ft_corpora WHERE corpus_id=? AND removed_at IS NOT NULL", (cur.corpus_id,)
            ).fetchone():
                raise StoreError(f"the latest version of corpus {name!r} has had its bytes removed")
            if conn.execute("SELECT 1 FROM model_lineage WHERE model_id=?", (model_id,)).fetchone():
                raise Conflict(f"model {model_id!r} is already in the lineage")
            path = corpus_file(store_dir, cur.path)
            if not path.exists():
                raise StoreError(f"corpus file {cur.path} is missing")
            if cur.frozen_at is None:
                conn.execute(
                    "UPDATE ft_corpora SET sha256=?, frozen_at=? WHERE corpus_id=?",
                    (file_sha256(path), when, cur.corpus_id),
                )
            conn.execute(
                "INSERT INTO model_lineage(model_id, corpus_id, base_model, trained_at) VALUES (?,?,?,?)",
                (model_id, cur.corpus_id, base_model, when),
            )
            frozen = CorpusVersion(cur.corpus_id, name, cur.version, cur.path, cur.examples, when)
            started = Path(store_dir) / relative_path(name, cur.version + 1)
            _start_version(conn, store_dir, name, cur.version + 1, when, frozen)
    except BaseException:
        if started is not None:
            started.unlink(missing_ok=True)
        raise
    return cur.corpus_id
