"""Probing kind `chroma`: the indexes on disk, parsed by the probe itself. HNSW segment folders (the
format is `erasure.target_kinds.chroma.hnsw`; reading the vectors, flags and labels out of it is the
probe's own code) and the FTS5 full-text index's leaf pages (the rowids in their doclists)."""

from __future__ import annotations

import pickle
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import apsw
import numpy as np

from erasure.target_kinds.chroma.hnsw import DATA_FILE, HEADER_FILE, PICKLE_FILE, HnswHeader
from erasure.untrusted import load_pickle
from probes.targets.chroma.store import has_table

_FTS_DATA = "embedding_fulltext_search_data"


@dataclass
class Index:
    """One HNSW segment folder's elements, as the probe reads them."""

    folder: Path
    dim: int
    flags: np.ndarray
    labels: np.ndarray
    vectors: np.ndarray
    label_to_id: dict[int, str]
    id_names: set[str]
    """Every id the id map names (id_to_label, label_to_id, id_to_seq_id)."""


def read_index(folder: Path) -> Index | None:
    """The index in `folder` (None when it has none or it cannot be read)."""
    try:
        head = (folder / HEADER_FILE).read_bytes()
        data = (folder / DATA_FILE).read_bytes()
    except OSError:
        return None
    h = HnswHeader.unpack(head)
    if h is None:
        return None
    count, stride, label_off, data_off = h.cur_element_count, h.size_data_per_element, h.label_offset, h.offset_data
    dim = h.dim
    if stride <= 0 or dim <= 0 or label_off + 8 != stride:
        return None
    count = min(count, len(data) // stride)
    raw = np.frombuffer(data[: count * stride], dtype=np.uint8).reshape(count, stride)
    flags = np.ascontiguousarray(raw[:, 0:4]).view("<u4").reshape(-1)
    labels = np.ascontiguousarray(raw[:, label_off : label_off + 8]).view("<u8").reshape(-1)
    vectors = np.ascontiguousarray(raw[:, data_off : data_off + 4 * dim]).view("<f4")
    label_to_id: dict[int, str] = {}
    names: set[str] = set()
    try:
        idmap = load_pickle((folder / PICKLE_FILE).read_bytes())
    except (OSError, pickle.UnpicklingError):
        idmap = None
    if isinstance(idmap, dict):
        for k, v in (idmap.get("label_to_id") or {}).items():
            label_to_id[int(k)] = str(v)
        names = (
            {str(k) for k in (idmap.get("id_to_label") or {})}
            | set(label_to_id.values())
            | {str(k) for k in (idmap.get("id_to_seq_id") or {})}
        )
    return Index(folder, dim, flags, labels, vectors, label_to_id, names)


def index_folders(root: Path) -> Iterator[Path]:
    """Every folder under the directory that holds an HNSW header (segment, orphan, half-swapped)."""
    for p in sorted(root.rglob(HEADER_FILE)):
        yield p.parent


# --- FTS5 index: the rowids in its doclists ----------------------------------------------------------


def _varint(b: bytes, i: int) -> tuple[int, int]:
    v = 0
    for _ in range(8):
        c = b[i]
        i += 1
        v = (v << 7) | (c & 0x7F)
        if c < 0x80:
            return v, i
    return (v << 8) | b[i], i + 1


def _leaf_rowids(b: bytes) -> set[int]:
    """The rowids of every doclist entry on one FTS5 leaf page (delete markers included)."""
    out: set[int] = set()
    if len(b) < 4:
        return out
    first_rowid, footer = struct.unpack_from(">HH", b)
    footer = min(footer, len(b))
    terms: list[int] = []
    i, off = footer, 0
    while i < len(b):
        d, i = _varint(b, i)
        off += d
        terms.append(off)
    starts: list[tuple[int, int]] = []
    if first_rowid:
        starts.append((first_rowid, terms[0] if terms else footer))
    for k, t in enumerate(terms):
        if k == 0:
            n, j = _varint(b, t)
        else:
            _prefix, j = _varint(b, t)
            n, j = _varint(b, j)
        starts.append((j + n, terms[k + 1] if k + 1 < len(terms) else footer))
    for j, end in starts:
        if j >= end:
            continue
        rowid, j = _varint(b, j)
        out.add(rowid)
        while j < end:
            size, j = _varint(b, j)
            j += size >> 1
            if j >= end:
                break
            delta, j = _varint(b, j)
            rowid += delta
            out.add(rowid)
    return out


def fts_rowids(conn: apsw.Connection) -> set[int]:
    """Every rowid any leaf page of the full-text index holds a posting or a delete marker for."""
    out: set[int] = set()
    if not has_table(conn, _FTS_DATA):
        return out
    for rowid, block in conn.execute(f"SELECT id, block FROM {_FTS_DATA} WHERE id > 10"):
        r = int(rowid)
        segid, dlidx, height = r >> 37, (r >> 36) & 1, (r >> 31) & 0x1F
        if 0 < segid < (1 << 16) and dlidx == 0 and height == 0 and block is not None:
            try:
                out |= _leaf_rowids(bytes(block))
            except IndexError:
                continue
    return out
