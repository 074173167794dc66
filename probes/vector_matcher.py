"""Finding the rows of a vector table that hold a wanted embedding whole, or one of its distinctive pieces
at its own offset: a rolling polynomial hash over every window of every row, computed with numpy, and a
byte comparison where a bitmap of the wanted hashes admits one (`probes.store_facts` runs it once a
window over each vector table)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt

from probes.needles import VECTOR_PIECE_BYTES

_BASE = 0x9E3779B97F4A7C15  # odd: invertible modulo 2**64
_BASE_INV = pow(_BASE, -1, 2**64)
_BITMAP_BITS = 24
_MAX_WORDS = 4096


def _powers(base: int, n: int) -> npt.NDArray[np.uint64]:
    out = np.empty(n, dtype=np.uint64)
    x = 1
    for i in range(n):
        out[i] = x
        x = x * base % 2**64
    return out


def _poly_hash(words: bytes) -> int:
    """sum(w[j] * BASE**(len-1-j)) mod 2**64 over the 32-bit words: what `VectorMatcher` computes for
    any window of a row from its prefix sums."""
    h = 0
    for w in np.frombuffer(words, dtype="<u4").tolist():
        h = (h * _BASE + w) % 2**64
    return h


_POW = _powers(_BASE, _MAX_WORDS + 1)
_POW_INV = _powers(_BASE_INV, _MAX_WORDS)


class VectorMatcher:
    """Which rows of a batch hold a wanted vector whole, or a wanted piece at its offset (any float
    offset). A polynomial hash of every window comes from one prefix sum per row, computed at C speed
    (numpy); the rows and offsets whose hash a bitmap of the wanted hashes admits are compared byte for
    byte."""

    def __init__(self, whole: Iterable[bytes], wanted_at: dict[int, set[bytes]]) -> None:
        self._whole = {w for w in whole if len(w) % 4 == 0}
        self._at = {at: ws for at, ws in wanted_at.items() if at % 4 == 0}
        self._bitmap = np.zeros(1 << _BITMAP_BITS, dtype=bool)
        for w in [*self._whole, *(p for ws in self._at.values() for p in ws)]:
            self._bitmap[_poly_hash(w) & ((1 << _BITMAP_BITS) - 1)] = True

    def holders(self, rows: list[tuple[int, bytes]]) -> Iterator[tuple[int, bytes, int | None]]:
        """(row id, the wanted bytes it holds, their offset or None for the whole vector)."""
        by_size: dict[int, list[tuple[int, bytes]]] = {}
        for rid, data in rows:
            by_size.setdefault(len(data), []).append((rid, data))
        mask = np.uint64((1 << _BITMAP_BITS) - 1)
        for size, same in by_size.items():
            if size % 4 or size // 4 > _MAX_WORDS:
                yield from self._byte_by_byte(same)
                continue
            d = size // 4
            words = np.frombuffer(b"".join(r for _i, r in same), dtype="<u4").reshape(len(same), d)
            # prefix[k, row] = sum of the row's first k words, each times BASE**-index: one row per k, so
            # the windows of every offset come out of one gather.
            prefix = np.zeros((d + 1, len(same)), dtype=np.uint64)
            np.cumsum(words.T.astype(np.uint64) * _POW_INV[:d, None], axis=0, out=prefix[1:])
            starts = [at // 4 for at in self._at if at // 4 + VECTOR_PIECE_BYTES // 4 <= d]
            if any(len(w) == size for w in self._whole):
                for i in np.flatnonzero(self._bitmap[(prefix[d] * _POW[d - 1]) & mask]):
                    rid, data = same[int(i)]
                    if data in self._whole:
                        yield rid, data, None
            if not starts:
                continue
            width = VECTOR_PIECE_BYTES // 4
            at = np.array(starts)
            hashes = (prefix[at + width] - prefix[at]) * _POW[at + width - 1][:, None]
            for k, i in zip(*np.nonzero(self._bitmap[hashes & mask]), strict=True):
                rid, data = same[int(i)]
                offset = 4 * starts[int(k)]
                got = data[offset : offset + VECTOR_PIECE_BYTES]
                if got in self._at[offset]:
                    yield rid, got, offset

    def _byte_by_byte(self, rows: list[tuple[int, bytes]]) -> Iterator[tuple[int, bytes, int | None]]:
        for rid, data in rows:
            if data in self._whole:
                yield rid, data, None
            for at, wanted in self._at.items():
                got = data[at : at + VECTOR_PIECE_BYTES]
                if got in wanted:
                    yield rid, got, at
