"""Text embedders for the store's vector tier.

The default `HashingEmbedder` is deterministic, local and needs no model download: feature hashing
of lowercase word tokens and character trigrams, each with a hashed sign, L2-normalised. It is fully
vectorised with numpy over a whole batch, so building a million-frame demo store stays in minutes.

The algorithm, precisely (so that anyone can re-implement it without importing this module):
1. text -> `text.lower()` -> UTF-8 bytes `b`.
2. words: maximal runs of bytes in [a-z0-9_] or >= 0x80. A word `w` of bytes w_0..w_{n-1} hashes
   to h = sum(w_i * P^i) mod 2^64 with P = 0x100000001B3, then h ^= WORD_SALT.
3. trigrams: every window b_i b_{i+1} b_{i+2} inside the text: h = b_i | b_{i+1} << 8 | b_{i+2} << 16.
4. each h is mixed with the splitmix64 finaliser; bucket = mixed % dim, sign = +1 if bit 63 of
   mixed is 0 else -1; word features weigh 1.0, trigram features TRIGRAM_WEIGHT.
5. the vector is L2-normalised (an all-zero vector, e.g. of empty text, stays zero).
Vectors go into the vec0 tables as float32 little-endian bytes: `arr.astype('<f4').tobytes()`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

_U64 = np.uint64
P = 0x100000001B3
WORD_SALT = 0x9E3779B97F4A7C15
TRIGRAM_WEIGHT = 0.5

FloatMatrix = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into fixed-size float32 vectors."""

    dim: int

    def embed(self, texts: list[str]) -> FloatMatrix:
        """Embed `texts` into an array of shape (len(texts), dim), dtype float32."""
        ...


def _mix(h: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64 finaliser (wrapping uint64 arithmetic)."""
    h = h ^ (h >> _U64(30))
    h = h * _U64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> _U64(27))
    h = h * _U64(0x94D049BB133111EB)
    return h ^ (h >> _U64(31))


def _powers(base: int, n: int) -> npt.NDArray[np.uint64]:
    """base**i mod 2**64 for i in 0..n-1 (cumprod wraps in uint64)."""
    out = np.full(n, base, dtype=_U64)
    if n:
        out[0] = 1
        out = np.cumprod(out, dtype=_U64)
    return out


class HashingEmbedder:
    """Deterministic feature-hashing embedder (see the module docstring for the exact algorithm)."""

    def __init__(self, dim: int = 128) -> None:
        if dim < 1:
            raise ValueError("dim must be positive")
        self.dim = dim

    def embed(self, texts: list[str]) -> FloatMatrix:
        """Embed a batch of texts; returns float32 (len(texts), dim), rows L2-normalised."""
        n = len(texts)
        if n == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        encoded = [t.lower().encode("utf-8") for t in texts]
        lengths = np.fromiter((len(e) for e in encoded), dtype=np.int64, count=n)
        total = int(lengths.sum())
        out = np.zeros(n * self.dim, dtype=np.float64)
        if total == 0:
            return out.reshape(n, self.dim).astype(np.float32)
        buf = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        starts = np.zeros(n, dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        row_of = np.repeat(np.arange(n, dtype=np.int64), lengths)
        pos_in_text = np.arange(total, dtype=np.int64) - starts[row_of]

        hashes: list[npt.NDArray[np.uint64]] = []
        rows: list[npt.NDArray[np.int64]] = []
        weights: list[npt.NDArray[np.float64]] = []

        # words
        is_word = ((buf >= 97) & (buf <= 122)) | ((buf >= 48) & (buf <= 57)) | (buf == 95) | (buf >= 128)
        new_text = pos_in_text == 0
        prev_word = np.concatenate(([False], is_word[:-1])) & ~new_text
        word_start = is_word & ~prev_word
        next_word = np.concatenate((is_word[1:], [False]))
        next_new_text = np.concatenate((new_text[1:], [True]))
        word_end = is_word & ~(next_word & ~next_new_text)
        if word_start.any():
            word_id = np.cumsum(word_start) - 1  # index of the word each byte belongs to
            start_idx = np.flatnonzero(word_start)
            end_idx = np.flatnonzero(word_end)
            wbytes = np.flatnonzero(is_word)
            offset = wbytes - start_idx[word_id[wbytes]]
            pw = _powers(P, int(offset.max()) + 1)
            contrib = buf[wbytes].astype(_U64) * pw[offset]
            # sum per word: contributions are contiguous per word, in word order
            csum = np.cumsum(contrib, dtype=_U64)
            lens = end_idx - start_idx + 1
            ends = np.cumsum(lens) - 1
            wsum = csum[ends].copy()
            wsum[1:] = wsum[1:] - csum[ends[:-1]]
            hashes.append(wsum ^ _U64(WORD_SALT))
            rows.append(row_of[start_idx])
            weights.append(np.ones(len(start_idx), dtype=np.float64))

        # trigrams: windows that start at least 2 bytes before the end of their text
        tri_ok = pos_in_text + 2 < lengths[row_of]
        tri_idx = np.flatnonzero(tri_ok)
        if len(tri_idx):
            b0 = buf[tri_idx].astype(_U64)
            b1 = buf[tri_idx + 1].astype(_U64)
            b2 = buf[tri_idx + 2].astype(_U64)
            hashes.append(b0 | (b1 << _U64(8)) | (b2 << _U64(16)))
            rows.append(row_of[tri_idx])
            weights.append(np.full(len(tri_idx), TRIGRAM_WEIGHT, dtype=np.float64))

        if hashes:
            mixed = _mix(np.concatenate(hashes))
            bucket = (mixed % _U64(self.dim)).astype(np.int64)
            sign = np.where((mixed >> _U64(63)) == 0, 1.0, -1.0)
            w = np.concatenate(weights) * sign
            flat = np.concatenate(rows) * self.dim + bucket
            out += np.bincount(flat, weights=w, minlength=n * self.dim)
        mat = out.reshape(n, self.dim)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        result: FloatMatrix = (mat / norms).astype(np.float32)
        return result


def to_blob(vector: npt.NDArray[np.float32]) -> bytes:
    """One vector as the bytes a vec0 column stores (float32 little-endian)."""
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()
