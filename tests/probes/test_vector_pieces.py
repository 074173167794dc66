"""The vector pieces the byte scan looks for: windows that end on as many, and as large, non-zero floats
as the vector allows (hyperscan finds a long literal's candidates by its last bytes, and a sparse hashed
embedding repeats short runs of small floats everywhere), that never overlap (so one page boundary splits
at most one), and that the window's vector pass finds in whichever rows hold them, whole or piece by
piece, at any offset."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.needles import (
    MAX_VECTOR_PIECES,
    MIN_NONZERO_FLOATS,
    MIN_SECOND_TAIL,
    PIECE_GRID_FLOATS,
    TAIL_FLOATS,
    VECTOR_PIECE_BYTES,
    distinctive_pieces,
)
from probes.vector_matcher import VectorMatcher
from tests import budget

vectors = st.lists(st.sampled_from([0.0, 0.0, 0.0, 0.125, -0.25, 0.5]), min_size=128, max_size=128).map(
    lambda xs: np.array(xs, dtype="<f4").tobytes()
)


def _tail(floats: np.ndarray) -> int:
    """How many of the last `TAIL_FLOATS` floats are non-zero before the first zero, from the end."""
    n = 0
    while n < TAIL_FLOATS and floats[len(floats) - 1 - n]:
        n += 1
    return n


@settings(max_examples=budget.examples(300), deadline=None)
@given(vector=vectors)
def test_pieces_end_on_the_longest_non_zero_tail_and_do_not_overlap(vector: bytes) -> None:
    pieces = distinctive_pieces(vector)
    assert len(pieces) <= MAX_VECTOR_PIECES
    width = VECTOR_PIECE_BYTES // 4
    everything = np.frombuffer(vector, dtype="<f4")
    windows = [everything[s : s + width] for s in range(0, 128 - width + 1, PIECE_GRID_FLOATS)]
    eligible = [w for w in windows if np.count_nonzero(w) >= MIN_NONZERO_FLOATS and w[-1]]
    best = max((_tail(w) for w in eligible), default=0)
    assert bool(pieces) == bool(eligible)
    tails = []
    for at, piece in pieces:
        assert at % (4 * PIECE_GRID_FLOATS) == 0 and piece == vector[at : at + VECTOR_PIECE_BYTES]
        floats = np.frombuffer(piece, dtype="<f4")
        assert len(piece) == VECTOR_PIECE_BYTES and np.count_nonzero(floats) >= MIN_NONZERO_FLOATS
        tails.append(_tail(floats))
    if pieces:
        assert max(tails) == best and min(tails) >= min(best, MIN_SECOND_TAIL)
    starts = sorted(at for at, _p in pieces)
    assert all(b - a >= VECTOR_PIECE_BYTES for a, b in itertools.pairwise(starts))


def test_a_dense_vector_gives_two_pieces_and_the_larger_ending_floats_win() -> None:
    dense = np.arange(1, 129, dtype="<f4").tobytes()
    assert [at // 4 for at, _p in distinctive_pieces(dense)] == [64, 96]  # the largest floats end the vector
    sparse = np.zeros(128, dtype="<f4")
    sparse[[*range(16), 28, 29, 30, 31]] = 0.25  # [0, 32): the densest window, ending on four small floats
    sparse[[60, 61, 62, 63]] = 0.5  # [32, 64): four floats, all at its end, the largest
    sparse[[92, 93, 94, 95]] = 0.375  # [64, 96): the next largest
    assert [at // 4 for at, _p in distinctive_pieces(sparse.tobytes())] == [32, 64]


@settings(max_examples=budget.examples(100), deadline=None)
@given(vector=vectors, others=st.lists(vectors, max_size=6), seed=st.integers(0, 2**32 - 1))
def test_the_matcher_finds_exactly_the_rows_holding_a_vector_or_a_piece(
    vector: bytes, others: list[bytes], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    pieces = distinctive_pieces(vector)
    rows: list[tuple[int, bytes]] = [(1, vector)]
    for i, other in enumerate(others, start=2):
        if pieces and rng.random() < 0.5:  # a bystander sharing a piece at its place
            at, piece = pieces[int(rng.integers(len(pieces)))]
            other = other[:at] + piece + other[at + len(piece) :]
        rows.append((i, other))
    rows.append((99, vector[:-4]))  # another size: compared byte by byte
    wanted_at: dict[int, set[bytes]] = {}
    for at, piece in pieces:
        wanted_at.setdefault(at, set()).add(piece)
    found = set(VectorMatcher([vector], wanted_at).holders(rows))
    want: set[tuple[int, bytes, int | None]] = {(rid, data, None) for rid, data in rows if data == vector}
    want |= {
        (rid, data[at : at + VECTOR_PIECE_BYTES], at)
        for rid, data in rows
        for at, piece in pieces
        if data[at : at + VECTOR_PIECE_BYTES] == piece
    }
    assert found == want
