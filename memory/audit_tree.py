"""The Merkle tree over the audit log (RFC 6962 / RFC 9162 section 2.1), kept in `audit_merkle`.

Leaf i (0-based) is the entry with seq i+1; its input is the 32 raw bytes of that entry's
`entry_hash`, so the chain and the tree bind the same content. Leaf hash = SHA-256(0x00 || input),
interior node = SHA-256(0x01 || left || right), and MTH(D[n]) splits at the largest power of two
below n, as the RFC defines it.

`audit_merkle(level, idx, hash)` holds every perfect subtree of the stored leaves: node (level, idx)
covers leaves [idx * 2^level, (idx + 1) * 2^level). `extend` is the one routine that writes it, from
the last stored leaf to the head of the log (on a store made before the table existed, the first call
fills it once). Every left subtree in the RFC's recursion is such an aligned perfect subtree, so a root
at any size and a consistency proof each need O(log n) lookups, and a multiproof of k leaves
O(k log n).

The leaf and node hashes are the wire format's (`wire.format`), shared with the offline
verifier, which checks these proofs with its own code (`proof/verify/merkle.py`); this module only
builds them, and `recompute` re-derives the stored nodes from the entries for `verify_chain`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

import apsw

from erasure.errors import StoreError
from erasure.sqlite import transaction
from wire.format import MERKLE_EMPTY_ROOT, merkle_leaf, merkle_node, merkle_split

_BATCH = 20_000


def stored_size(conn: apsw.Connection) -> int:
    """How many leaves `audit_merkle` holds."""
    row = conn.execute("SELECT max(idx) FROM audit_merkle WHERE level = 0").fetchone()
    return 0 if row is None or row[0] is None else int(row[0]) + 1


def extend(conn: apsw.Connection) -> int:
    """Add the leaves (and the perfect subtrees they complete) from the last stored leaf to the head
    of the log; return the tree's size. Runs in the caller's transaction, else in its own."""
    if not conn.in_transaction:
        size = stored_size(conn)
        head = conn.execute("SELECT max(seq) FROM audit_log").fetchone()
        if head is None or head[0] is None or head[0] == size:  # up to date: no write lock taken
            return size
        with transaction(conn):
            return extend(conn)
    size = stored_size(conn)
    # The perfect subtrees of the first `size` leaves still waiting for a right sibling: one per set
    # bit of `size`, the node (level, (size >> level) - 1).
    waiting = {
        level: _node(conn, level, (size >> level) - 1) for level in range(size.bit_length()) if size >> level & 1
    }
    while True:
        batch = conn.execute(
            "SELECT seq, entry_hash FROM audit_log WHERE seq > ? ORDER BY seq LIMIT ?", (size, _BATCH)
        ).fetchall()
        if not batch:
            return size
        rows: list[tuple[int, int, bytes]] = []
        for seq, digest in batch:
            if seq != size + 1:
                raise StoreError(f"the audit log has no entry at seq {size + 1}: the tree cannot cover it")
            try:
                h = merkle_leaf(bytes.fromhex(str(digest)))
            except ValueError:
                raise StoreError(f"audit entry {seq} has a malformed entry_hash") from None
            level, idx = 0, size
            rows.append((level, idx, h))
            while idx & 1:
                h = merkle_node(waiting.pop(level), h)
                level, idx = level + 1, idx >> 1
                rows.append((level, idx, h))
            waiting[level] = h
            size += 1
        conn.executemany("INSERT INTO audit_merkle(level, idx, hash) VALUES (?, ?, ?)", rows)


def _node(conn: apsw.Connection, level: int, idx: int) -> bytes:
    row = conn.execute("SELECT hash FROM audit_merkle WHERE level = ? AND idx = ?", (level, idx)).fetchone()
    if row is None:
        raise StoreError(f"the audit tree has no node ({level}, {idx}): run audit.verify_chain")
    return bytes(row[0])


class _Tree:
    """Reads of the stored tree for one proof, each node looked up once."""

    def __init__(self, conn: apsw.Connection, size: int) -> None:
        if size > stored_size(conn):
            raise StoreError(f"the audit tree holds fewer than {size} leaves: extend it first")
        self._conn = conn
        self._seen: dict[tuple[int, int], bytes] = {}

    def node(self, level: int, idx: int) -> bytes:
        key = (level, idx)
        if key not in self._seen:
            self._seen[key] = _node(self._conn, level, idx)
        return self._seen[key]

    def mth(self, start: int, size: int) -> bytes:
        """MTH(D[start:start+size]); a perfect subtree aligned on its size is one stored node."""
        if size == 0:
            return MERKLE_EMPTY_ROOT
        if size & (size - 1) == 0 and start % size == 0:
            return self.node(size.bit_length() - 1, start // size)
        k = merkle_split(size)
        return merkle_node(self.mth(start, k), self.mth(start + k, size - k))

    def subproof(self, m: int, start: int, size: int, whole: bool) -> list[bytes]:
        """SUBPROOF(m, D[start:start+size], whole) (RFC 9162 2.1.4.1)."""
        if m == size:
            return [] if whole else [self.mth(start, size)]
        k = merkle_split(size)
        if m <= k:
            return [*self.subproof(m, start, k, whole), self.mth(start + k, size - k)]
        return [*self.subproof(m - k, start + k, size - k, False), self.mth(start, k)]


def root(conn: apsw.Connection, size: int) -> bytes:
    """MTH of the first `size` leaves (stored: call `extend` first)."""
    return _Tree(conn, size).mth(0, size)


def multiproof(conn: apsw.Connection, indices: Iterable[int], size: int) -> list[bytes]:
    """One proof that the leaves at `indices` are in the tree of the first `size` leaves: the MTH of
    every maximal subtree of the RFC's decomposition that holds none of them, left to right (none
    when `indices` is empty). It shares what separate audit paths repeat: about k * log2(size / k)
    hashes for k leaves."""
    wanted = sorted(set(indices))
    if wanted and not (wanted[0] >= 0 and wanted[-1] < size):
        raise ValueError(f"a leaf of {wanted[0]}..{wanted[-1]} is not in a tree of {size} leaves")
    tree, out = _Tree(conn, size), []

    def walk(start: int, n: int, lo: int, hi: int) -> None:  # wanted[lo:hi] lie in [start, start + n)
        if lo == hi:
            out.append(tree.mth(start, n))
        elif n > 1:
            k = merkle_split(n)
            mid = bisect.bisect_left(wanted, start + k, lo, hi)
            walk(start, k, lo, mid)
            walk(start + k, n - k, mid, hi)

    if wanted:
        walk(0, size, 0, len(wanted))
    return out


def consistency(conn: apsw.Connection, first: int, second: int) -> list[bytes]:
    """The consistency proof from the tree of `first` leaves to the tree of `second` (empty when
    first is 0 or equals second)."""
    if not 0 <= first <= second:
        raise ValueError(f"no consistency proof from size {first} to size {second}")
    if first in (0, second):
        return []
    return _Tree(conn, second).subproof(first, 0, second, True)


def recompute(
    conn: apsw.Connection, entry_hashes: Sequence[bytes], sizes: Iterable[int]
) -> tuple[int | None, dict[int, bytes]]:
    """Rebuild the tree from the entries' hashes (`entry_hashes[i]` of seq i+1) level by level and
    compare every stored node with it. Returns (the first seq a wrong, missing or surplus node
    covers, or None; {size: MTH} for each of `sizes` the entries reach)."""
    wanted = {n for n in sizes if 0 <= n <= len(entry_hashes)}
    parts: dict[int, list[bytes]] = {n: [] for n in wanted}  # its perfect subtrees, rightmost first
    stored = stored_size(conn)
    first_bad: int | None = None
    nodes = [merkle_leaf(h) for h in entry_hashes]
    n, level = len(nodes), 0
    while nodes or (stored >> level):
        expected = 0
        for idx, h in conn.execute("SELECT idx, hash FROM audit_merkle WHERE level = ? ORDER BY idx", (level,)):
            bad_idx = None
            if int(idx) != expected or int(idx) >= (stored >> level):
                bad_idx = min(int(idx), expected)
            elif int(idx) >= len(nodes) or nodes[int(idx)] != bytes(h):
                bad_idx = int(idx)
            if bad_idx is not None:  # the first seq the node covers, or the first it covers that is missing
                seq = (bad_idx << level) + 1 if bad_idx < len(nodes) else max((bad_idx << level) + 1, n + 1)
                first_bad = seq if first_bad is None else min(first_bad, seq)
                break
            expected += 1
        if expected < (stored >> level) and first_bad is None:  # a node the stored leaves need is missing
            first_bad = (expected << level) + 1
        for n in wanted:
            if n >> level & 1:
                parts[n].append(nodes[(n >> level) - 1])
        nodes = [merkle_node(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
        level += 1
    roots = {}
    for n in wanted:
        acc = MERKLE_EMPTY_ROOT if n == 0 else parts[n][0]
        for left in parts[n][1:]:  # parts[n] runs from the smallest subtree (rightmost) to the largest
            acc = merkle_node(left, acc)
        roots[n] = acc
    return first_bad, roots
