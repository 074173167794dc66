"""The Merkle proofs of the audit-log evidence, checked as RFC 9162 section 2.1 defines them (leaf and
node hashes: `wire.merkle_leaf`, `wire.merkle_node`). Each returns True or False; check 7 says why."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

from wire.format import MERKLE_EMPTY_ROOT, merkle_node, merkle_split


def verify_inclusion(leaf: bytes, index: int, size: int, path: Sequence[bytes], root: bytes) -> bool:
    """RFC 9162 2.1.3.2: does `path` prove leaf hash `leaf` at `index` in the tree of `size` with `root`?"""
    if not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = merkle_node(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            r = merkle_node(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


def verify_multiproof(leaves: Mapping[int, bytes], size: int, proof: Sequence[bytes], root: bytes) -> bool:
    """Do the leaf hashes `leaves` (index -> hash) and `proof` give `root` for the tree of `size`?

    `proof` is the MTH of every maximal subtree of the RFC 9162 2.1.1 decomposition of D[size] that
    holds none of the leaves, in left-to-right order (a batch of inclusion proofs that shares its
    nodes: about k * log2(size / k) hashes for k leaves instead of k * log2(size)). Every hash of it
    must be used, and no leaf may lie outside the tree. No leaves: the proof is empty (nothing is
    shown)."""
    indices = sorted(leaves)
    if not indices:
        return not proof
    if indices[0] < 0 or indices[-1] >= size:
        return False
    hashes = iter(proof)

    def mth(start: int, n: int, lo: int, hi: int) -> bytes:  # leaves indices[lo:hi] lie in [start, start + n)
        if lo == hi:
            return next(hashes)
        if n == 1:
            return leaves[start]
        k = merkle_split(n)
        mid = bisect.bisect_left(indices, start + k, lo, hi)
        return merkle_node(mth(start, k, lo, mid), mth(start + k, n - k, mid, hi))

    try:
        computed = mth(0, size, 0, len(indices))
    except StopIteration:
        return False
    return computed == root and next(hashes, None) is None


def verify_consistency(first: int, second: int, first_root: bytes, second_root: bytes, proof: Sequence[bytes]) -> bool:
    """RFC 9162 2.1.4.2: does `proof` show the tree of `second` (root `second_root`) extends the tree of
    `first` (root `first_root`)? Equal sizes: the proof is empty and the roots equal; size 0: the
    proof is empty and `first_root` is the empty tree's hash."""
    if not 0 <= first <= second:
        return False
    if first == second:
        return not proof and first_root == second_root
    if first == 0:
        return not proof and first_root == MERKLE_EMPTY_ROOT
    if not proof:
        return False
    path = list(proof)
    if first & (first - 1) == 0:  # a power of two: the first tree is a node of the second
        path.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = merkle_node(c, fr), merkle_node(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            sr = merkle_node(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return fr == first_root and sr == second_root and sn == 0
