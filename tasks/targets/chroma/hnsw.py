"""Kind `chroma`, the HNSW files: each vector segment's index read, its elements classified, the
index compacted without the dropped ones and written whole, and the new folder swapped in (see the
package docstring). The file format is `erasure.target_kinds.chroma.hnsw`; this rewrite is the eraser's
own."""

from __future__ import annotations

import os
import pickle
import re
import shutil
import struct
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from erasure.errors import StoreError
from erasure.files import inside_folder
from erasure.target_kinds.chroma.hnsw import (
    DATA_FILE,
    DELETED,
    HEADER_FILE,
    INDEX_FILES,
    LENGTH_FILE,
    LINK_COUNT,
    LINKS_FILE,
    PICKLE_FILE,
    HnswHeader,
)
from erasure.untrusted import load_pickle

NEW_SUFFIX = ".erasure-new"
OLD_SUFFIX = ".erasure-old"
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def segment_folder(root: Path, segment: str) -> Path:
    """The folder of a vector segment: its id comes from the `segments` rows, so it must name a folder
    inside the store's (`erasure.files.inside_folder`; `StoreError` naming "chroma segment id")."""
    return inside_folder(root, segment, "chroma segment id")


def check_segments(root: Path, segments: Iterable[str]) -> None:
    """Every vector segment's folder lies inside the store's: checked before anything is deleted."""
    for seg in segments:
        segment_folder(root, seg)


def _read_pickle(path: Path) -> dict[str, Any] | None:
    try:
        doc = load_pickle(path.read_bytes())
    except FileNotFoundError:
        return None
    except pickle.UnpicklingError as exc:
        raise StoreError(f"unreadable HNSW id map {path}: {exc}") from exc
    if not isinstance(doc, dict):
        raise StoreError(f"unreadable HNSW id map {path}")
    return doc


@dataclass
class Hnsw:
    """One persisted hnswlib index (`erasure.target_kinds.chroma.hnsw`) and its id map."""

    header: HnswHeader
    data: np.ndarray
    """(elements, stride) uint8."""
    lengths: bytes
    upper: list[bytes]
    """Per element: its upper-level link lists (levels x (4 + maxM*4) bytes)."""
    idmap: dict[str, Any] | None

    @property
    def count(self) -> int:
        return self.header.cur_element_count

    @property
    def upper_size(self) -> int:
        return 4 + 4 * self.header.max_m

    def flags(self) -> np.ndarray:
        return np.ascontiguousarray(self.data[:, 0:4]).view("<u4").reshape(-1)

    def labels(self) -> np.ndarray:
        lo = self.header.label_offset
        return np.ascontiguousarray(self.data[:, lo : lo + 8]).view("<u8").reshape(-1)

    def vectors(self) -> np.ndarray:
        do = self.header.offset_data
        return np.ascontiguousarray(self.data[:, do : do + 4 * self.header.dim]).view("<f4")

    def links0(self) -> np.ndarray:
        return np.ascontiguousarray(self.data[:, 4 : 4 + 4 * self.header.max_m0]).view("<u4")

    def level(self, i: int) -> int:
        return len(self.upper[i]) // self.upper_size

    def upper_links(self, i: int, lvl: int) -> list[int]:
        start = (lvl - 1) * self.upper_size
        block = self.upper[i][start : start + self.upper_size]
        (n,) = struct.unpack_from("<I", block)
        return list(struct.unpack_from(f"<{n}I", block, 4))


def read_hnsw(folder: Path) -> Hnsw | None:
    """The index in `folder`, or None when it has none yet (a collection below its sync threshold)."""
    if not (folder / HEADER_FILE).is_file():
        return None
    header = HnswHeader.unpack((folder / HEADER_FILE).read_bytes())
    if header is None:
        raise StoreError(f"unreadable HNSW header in {folder}")
    if header.version != 1 or header.offset_level0 != 0 or header.label_offset + 8 != header.size_data_per_element:
        raise StoreError(f"HNSW index in {folder} has a layout this version does not know")
    n, stride = header.cur_element_count, header.size_data_per_element
    data = np.frombuffer((folder / DATA_FILE).read_bytes()[: n * stride], dtype=np.uint8)
    lengths = (folder / LENGTH_FILE).read_bytes()[: n * 4]
    links = (folder / LINKS_FILE).read_bytes()
    if data.size != n * stride or len(lengths) != n * 4:
        raise StoreError(f"truncated HNSW index in {folder}")
    upper: list[bytes] = []
    pos = 0
    for _ in range(n):
        (size,) = struct.unpack_from("<I", links, pos)
        upper.append(links[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return Hnsw(
        header=header,
        data=data.reshape(n, stride),
        lengths=lengths,
        upper=upper,
        idmap=_read_pickle(folder / PICKLE_FILE),
    )


def _label_to_id(h: Hnsw) -> dict[int, str]:
    if h.idmap is None:
        return {}
    raw = h.idmap.get("label_to_id") or {}
    return {int(k): str(v) for k, v in raw.items()}


@dataclass(frozen=True)
class HnswCount:
    subject: int = 0
    tombstones: int = 0
    unmapped: int = 0
    """Live elements whose label maps to no record that exists."""


def classify(h: Hnsw, subject_ids: set[str], live_ids: set[str] | None) -> tuple[np.ndarray, HnswCount]:
    """A keep-mask over the elements, and what is dropped."""
    flags = h.flags()
    labels = h.labels()
    names = _label_to_id(h)
    deleted = (flags & DELETED) != 0
    keep = ~deleted
    subj = unmapped = 0
    if h.idmap is not None:
        for i in np.nonzero(keep)[0]:
            rid = names.get(int(labels[i]))
            if rid is not None and rid in subject_ids:
                keep[i] = False
                subj += 1
            elif rid is None or (live_ids is not None and rid not in live_ids):
                keep[i] = False
                unmapped += 1
    return keep, HnswCount(subject=subj, tombstones=int(deleted.sum()), unmapped=unmapped)


def _distances(space: str, vecs: np.ndarray, u: int, cand: list[int]) -> np.ndarray:
    a = vecs[u].astype(np.float64)
    b = vecs[cand].astype(np.float64)
    if space == "l2":
        return np.asarray(((b - a) ** 2).sum(axis=1))
    return np.asarray(-(b @ a))


def _compact(h: Hnsw, keep: np.ndarray, space: str) -> tuple[Hnsw, int]:
    """The index without the dropped elements: survivors renumbered in order, their labels, vectors and
    links kept, a link to a dropped element replaced by the nearest survivors among that element's own
    neighbours (two hops). Returns the new index and how many link lists were repaired."""
    n = h.count
    new_id = np.full(n, -1, dtype=np.int64)
    kept = np.nonzero(keep)[0]
    new_id[kept] = np.arange(kept.size)
    vecs = h.vectors()
    links0 = h.links0()
    flags = h.flags()
    counts0 = flags & LINK_COUNT
    repaired = 0

    def relink(u: int, old: list[int], lvl: int, cap: int) -> list[int]:
        nonlocal repaired
        good = [int(new_id[x]) for x in old if x < n and new_id[x] >= 0]
        lost = [x for x in old if x < n and new_id[x] < 0]
        if not lost:
            return good
        repaired += 1
        present = {x for x in old}
        cand: set[int] = set()
        frontier = lost
        for _hop in range(2):
            nxt: list[int] = []
            for x in frontier:
                nb = (
                    links0[x, : counts0[x]].tolist() if lvl == 0 else h.upper_links(x, lvl) if h.level(x) >= lvl else []
                )
                for y in nb:
                    if y >= n or y == u or y in present:
                        continue
                    if new_id[y] >= 0:
                        cand.add(int(y))
                    else:
                        nxt.append(int(y))
            frontier = nxt
            if len(cand) >= cap - len(good):
                break
        picked: list[int] = []
        if cand:
            order = sorted(cand)
            dist = _distances(space, vecs, u, order)
            picked = [order[i] for i in np.argsort(dist, kind="stable")[: max(0, cap - len(good))]]
        if not good and not picked and kept.size > 1 and lvl == 0:
            others = [int(x) for x in kept if x != u]
            dist = _distances(space, vecs, u, others)
            picked = [others[i] for i in np.argsort(dist, kind="stable")[:cap]]
        return good + [int(new_id[x]) for x in picked]

    data = np.ascontiguousarray(h.data[kept])
    # Level 0, vectorised for the elements that lost no neighbour; the others are relinked one by one.
    width = h.header.max_m0
    slots = np.arange(width)[None, :] < counts0[kept][:, None]
    mapped = np.where(slots, new_id[np.minimum(links0[kept], max(n - 1, 0))], 0)
    lost = (slots & ((mapped < 0) | (links0[kept] >= n))).any(axis=1)
    rows = np.zeros((kept.size, 1 + width), dtype="<u4")
    rows[:, 0] = counts0[kept]
    rows[:, 1:] = np.where(slots, mapped, 0)
    for new in np.nonzero(lost)[0].tolist():
        old = int(kept[new])
        l0 = relink(old, links0[old, : counts0[old]].tolist(), 0, width)
        rows[new] = 0
        rows[new, 0] = len(l0)
        rows[new, 1 : 1 + len(l0)] = l0
    data[:, 0 : 4 * (1 + width)] = rows.view(np.uint8).reshape(kept.size, 4 * (1 + width))
    upper: list[bytes] = []
    for old in kept.tolist():
        levels = []
        for lvl in range(1, h.level(old) + 1):
            ll = relink(old, h.upper_links(old, lvl), lvl, h.header.max_m)
            levels.append(struct.pack(f"<I{len(ll)}I", len(ll), *ll).ljust(h.upper_size, b"\0"))
        upper.append(b"".join(levels))
    if kept.size == 0:
        header = replace(h.header, cur_element_count=0, maxlevel=-1, enterpoint_node=-1)
    else:
        entry = h.header.enterpoint_node
        ep_old = entry if 0 <= entry < n else -1
        if ep_old < 0 or new_id[ep_old] < 0:
            ep_old = max(kept.tolist(), key=lambda i: (h.level(i), -i))
        header = replace(
            h.header, cur_element_count=int(kept.size), maxlevel=h.level(ep_old), enterpoint_node=int(new_id[ep_old])
        )
    # Cosine: the survivors' norms (get() multiplies them back in). l2/ip: never read, and written by
    # hnswlib from uninitialised memory: zeros.
    lengths = np.frombuffer(h.lengths, dtype="<f4")[kept].tobytes() if space == "cosine" else bytes(4 * kept.size)
    out = Hnsw(header=header, data=data, lengths=lengths, upper=upper, idmap=None)
    return out, repaired


def _write_folder(folder: Path, files: dict[str, bytes], extra: Iterable[Path]) -> None:
    folder.mkdir()
    for name, blob in files.items():
        with open(folder / name, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
    for p in extra:
        shutil.copy2(p, folder / p.name)
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def finish_swaps(root: Path) -> int:
    """Complete or undo a swap a crash interrupted; returns how many folders it touched."""
    touched = 0
    for p in sorted(root.iterdir()):
        if not p.is_dir():
            continue
        if p.name.endswith(NEW_SUFFIX):
            base = root / p.name[: -len(NEW_SUFFIX)]
            if base.exists():
                shutil.rmtree(p)  # written but never swapped in: the next run writes it again
            elif (root / (base.name + OLD_SUFFIX)).exists():
                os.rename(p, base)  # crashed between the two renames: finish
            else:
                shutil.rmtree(p)
            touched += 1
        elif p.name.endswith(OLD_SUFFIX):
            base = root / p.name[: -len(OLD_SUFFIX)]
            if base.exists():
                shutil.rmtree(p)
            else:
                os.rename(p, base)
            touched += 1
    if touched:
        _fsync_dir(root)
    return touched


def _encode(h: Hnsw, idmap: dict[str, Any] | None) -> dict[str, bytes]:
    """The segment's files as this module writes them: every byte is the live elements' (no capacity
    past them, unused link slots and level padding zero), so equal indexes are equal bytes."""
    files = {
        HEADER_FILE: h.header.pack(),
        DATA_FILE: h.data.tobytes(),
        LENGTH_FILE: h.lengths,
        LINKS_FILE: b"".join(struct.pack("<I", len(u)) + u for u in h.upper),
    }
    if idmap is not None:
        files[PICKLE_FILE] = pickle.dumps(idmap, protocol=3)
    return files


def _same_files(folder: Path, files: dict[str, bytes]) -> bool:
    known = {*INDEX_FILES, PICKLE_FILE}
    present = {p.name for p in folder.iterdir() if p.is_file() and p.name in known}
    return present == set(files) and all(
        (folder / name).stat().st_size == len(blob) and (folder / name).read_bytes() == blob
        for name, blob in files.items()
    )


def rewrite_segment(
    root: Path, segment: str, space: str, subject_ids: set[str], live_ids: set[str] | None
) -> dict[str, int]:
    """One vector segment without the subject's elements, tombstones and unmapped elements, written
    whole whenever its files differ from that: hnswlib writes capacity it never initialised (chromadb
    creates every segment with room for 100 elements, from memory that held whatever the process had
    freed: we found the subject's identifiers there in stores below the sync threshold), so a segment
    with nothing to drop is rewritten too, unless it already is byte for byte what we would write."""
    folder = segment_folder(root, segment)
    h = read_hnsw(folder)
    if h is None:
        return {}
    keep, c = classify(h, subject_ids, live_ids)
    new, repaired = _compact(h, keep, space)
    idmap = h.idmap
    if idmap is not None:
        live = {int(x) for x in new.labels().tolist()}
        idmap = dict(idmap)
        idmap["id_to_label"] = {str(k): int(v) for k, v in (idmap.get("id_to_label") or {}).items() if int(v) in live}
        idmap["label_to_id"] = {int(k): str(v) for k, v in (idmap.get("label_to_id") or {}).items() if int(k) in live}
        ids = set(idmap["id_to_label"])
        idmap["id_to_seq_id"] = {str(k): int(v) for k, v in (idmap.get("id_to_seq_id") or {}).items() if str(k) in ids}
    files = _encode(new, idmap)
    if _same_files(folder, files):
        return {"hnsw_elements_kept": int(new.count)}
    staging = root / (segment + NEW_SUFFIX)
    retired = root / (segment + OLD_SUFFIX)
    known = {*INDEX_FILES, PICKLE_FILE}
    extra = [p for p in folder.iterdir() if p.is_file() and p.name not in known and not p.name.startswith(".tmp")]
    _write_folder(staging, files, extra)
    os.rename(folder, retired)
    os.rename(staging, folder)
    _fsync_dir(root)
    shutil.rmtree(retired)
    return {
        "hnsw_elements_kept": int(new.count),
        "hnsw_subject_dropped": c.subject,
        "hnsw_tombstones_dropped": c.tombstones,
        "hnsw_unmapped_dropped": c.unmapped,
        "hnsw_links_repaired": repaired,
        "hnsw_segments_rewritten": 1,
    }


def orphan_folders(root: Path, segments: set[str]) -> list[Path]:
    """Segment folders no `segments` row names (dropped collections)."""
    return [p for p in sorted(root.iterdir()) if p.is_dir() and _UUID.fullmatch(p.name) and p.name not in segments]


def swap_leftovers(root: Path) -> int:
    """Folders an interrupted swap left (written and not swapped in, or retired and not removed)."""
    return sum(1 for p in root.iterdir() if p.is_dir() and p.name.endswith((NEW_SUFFIX, OLD_SUFFIX)))
