"""Which base64 runs can be read on, judged for a batch of runs at once (`readable_runs`).

A base64-looking run is read on (`probes.view_payloads._base64_pieces`) only where one of its pieces,
at one of its starts, decodes to bytes with a format's magic, to text (`TEXT_NOISE`), or to UTF-16/32
text; the run is then read, matched and declared as before. A database holds hundreds of thousands of
runs (columns glued together: `user-001293emailref-0000728`), and all but a few hundred decode to
noise at every start. Judging that run by run in Python cost about 4 us a run and 3 us a start; here it
is judged for all of a text's runs together, with numpy and one UTF-8 decoding of every start's bytes.

The judgement is a superset, never a subset, of the runs `_base64_pieces` reads on: it takes the same
pieces and starts, decodes the same bytes, and lets a run through when any start
- begins with a byte some magic begins with (`_FIRST`), or is as long as a tar header (the magics are
  checked by `_base64_piece` itself),
- reads as text by the same count as `view_payloads._noise` (undecodable and control characters, over
  the characters of the decoding), or
- holds enough NULs, or begins with a byte order mark, for `wide_codec` to call it UTF-16/32.
A piece too long to decode here (`LONG`) lets its run through. What is let through is read by the
unchanged code, which decides."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from probes.documents.formats import _MAGIC, _SHM_VERSION
from probes.matcher import MIN_BASE64

NO_CAPITALS = 48
"""Base64 characters in a row without a capital letter that end a base64 run: 26 of its 64 characters are
capitals, so 48 without one come once in 10^11 characters of base64 of random bytes; in base64 of text,
only where the text is 36 characters from h to z with no space, capital, digit or sign among them."""
GLUED = 7
"""Characters of a stretch without capitals that may still be the base64 run's own (see
`view_payloads._base64_pieces`)."""
TEXT_NOISE = 0.3
"""Share of a decoding's first KiB that may be undecodable or control characters for a base64 run's
decoding at one alignment to be preferred to the others (which alignment to read a run in, never whether
a payload was read: a run is part of a text that was)."""
LONG = 1300
"""Longest piece judged here: its decodings stay under the KiB `_noise` reads. A longer one's run is let
through (real payloads, a few in a store)."""
WHOLE = 1 << 16
"""A run longer than this is let through (a payload; one longer than `view_payloads.MAX_MEMBER` twice is
declared there)."""
FEW = 16
"""Fewer runs than this are all let through: numpy's fixed cost is more than theirs."""
BATCH = 8192
"""Most runs judged in one go (larger arrays spill out of the caches: 180k runs at once took 8-15x longer)."""

_VALUE = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"):
    _VALUE[_c] = _i
_VALUE[ord("-")], _VALUE[ord("_")] = 62, 63  # a url-safe piece is translated to `+/` before decoding
_CAPITAL = np.zeros(256, dtype=bool)
_CAPITAL[ord("A") : ord("Z") + 1] = True

_FIRST = np.zeros(256, dtype=bool)
"""First bytes that a magic `binary_format` or `_container_magic` knows can begin with, and of the byte
order marks `wide_codec` knows."""
for _b in [m[0] for m, _f in _MAGIC] + [0x1F, ord("B"), ord("R"), 0x80, _SHM_VERSION[0], 0xFD, ord("P")]:
    _FIRST[_b] = True
_FIRST[[0x00, 0xFE, 0xFF]] = True
TAR = 512
"""A decoding this long may be a tar (its magic is at byte 257)."""

_SEP = b"\xef\xbf\xbf\xef\xbf\xbe"
"""Between two starts' bytes, decoded as U+FFFF U+FFFE: complete characters, so an incomplete sequence
before them ends there as it would at the end of the bytes (one U+FFFD), and the next start's bytes are
decoded from their own first byte."""

_CONTROL = np.zeros(0xA0, dtype=bool)
_CONTROL[[*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0)]] = True

Ints = npt.NDArray[np.int64]


def readable_runs(runs: list[bytes]) -> set[bytes]:
    """The runs of `runs` that `_base64_pieces` may read on (a superset: see the module's docstring)."""
    if len(runs) < FEW:
        return set(runs)
    if len(runs) > BATCH:
        return set().union(*(_readable(runs[i : i + BATCH]) for i in range(0, len(runs), BATCH)))
    return _readable(runs)


def _readable(runs: list[bytes]) -> set[bytes]:
    whole = {run for run in runs if len(run) > WHOLE}
    runs = [run for run in runs if len(run) <= WHOLE] if whole else runs
    if not runs:
        return whole
    cores = [run.rstrip(b"=") for run in runs]
    lengths = np.fromiter(map(len, cores), dtype=np.int64, count=len(cores))
    joined = np.frombuffer(b"A".join(cores) + b"AAAAA", dtype=np.uint8)  # a capital ends each stretch
    starts = np.zeros(len(cores), dtype=np.int64)
    np.cumsum(lengths[:-1] + 1, out=starts[1:])
    begins, stops, run_of = _pieces(joined, starts, lengths)
    base = starts[run_of]
    back = np.minimum(GLUED, begins - base)
    first = begins - back
    size = np.minimum(base + lengths[run_of], stops + 3) - first
    keep = size >= MIN_BASE64  # a shorter piece is not decoded
    first, back, size, run_of = first[keep], back[keep], size[keep], run_of[keep]
    passing = np.zeros(len(cores), dtype=bool)
    long = size > LONG
    passing[run_of[long]] = True
    first, back, size, run_of = first[~long], back[~long], size[~long], run_of[~long]
    # every start of every piece: range(max(4, back + 1)), while MIN_BASE64 characters are left
    count = np.minimum(np.maximum(4, back + 1), size - MIN_BASE64 + 1)
    piece = np.repeat(np.arange(len(first)), count)
    offset = np.arange(len(piece)) - np.repeat(np.cumsum(count) - count, count)
    chars = size[piece] - offset
    chars -= chars % 4 == 1  # the last character cannot end a group: dropped, as `_b64decode` does
    good = _judge(_VALUE[joined], first[piece] + offset, chars * 6 // 8)
    passing[run_of[piece[good]]] = True
    return whole | {run for run, ok in zip(runs, passing.tolist(), strict=True) if ok}


def _pieces(joined: npt.NDArray[np.uint8], starts: Ints, lengths: Ints) -> tuple[Ints, Ints, Ints]:
    """Each run's pieces between its stretches of `NO_CAPITALS` without a capital (in `joined`'s offsets),
    at least `MIN_BASE64 - GLUED` long, as `_base64_pieces` cuts them; and the run of each."""
    capitals = np.flatnonzero(_CAPITAL[joined])
    edges = np.concatenate(([-1], capitals))
    gap = edges[1:] - edges[:-1] - 1
    cut = gap >= NO_CAPITALS
    cut_start, cut_end = edges[:-1][cut] + 1, edges[1:][cut]
    begins = np.sort(np.concatenate((starts, cut_end)))
    stops = np.sort(np.concatenate((cut_start, starts + lengths)))
    wide = stops - begins >= MIN_BASE64 - GLUED
    begins, stops = begins[wide], stops[wide]
    return begins, stops, np.searchsorted(starts, begins, side="right") - 1


def _judge(values: npt.NDArray[np.uint8], at: Ints, nbytes: Ints) -> npt.NDArray[np.bool_]:
    """For each start (`at`, in `values`, base64 digits), whether its `nbytes` decoded bytes may be read
    on: a magic's first byte, a tar's length, text, or wide text (see the module's docstring)."""
    if not len(at):
        return np.zeros(0, dtype=bool)
    segment = np.repeat(np.arange(len(at)), nbytes)
    ends = np.cumsum(nbytes)
    k = np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - nbytes, nbytes)
    group, r = np.divmod(k, 3)
    pos = at[segment] + 4 * group
    v = values.astype(np.uint16)
    out = np.where(
        r == 0,
        (v[pos] << 2) | (v[pos + 1] >> 4),
        np.where(r == 1, ((v[pos + 1] & 15) << 4) | (v[pos + 2] >> 2), ((v[pos + 2] & 3) << 6) | v[pos + 3]),
    ).astype(np.uint8)
    starts = ends - nbytes
    good = _FIRST[out[starts]] | (nbytes >= TAR)
    zeros = np.bincount(segment, weights=out == 0, minlength=len(at))
    good |= zeros > 0.4 * (nbytes // 2) - 1e-9  # wide_codec: NULs in more than 0.4 of one alignment's bytes
    # All starts' bytes decoded as UTF-8 at once, `_SEP` after each.
    sep = np.frombuffer(_SEP, dtype=np.uint8)
    buf = np.empty(len(out) + len(sep) * len(at), dtype=np.uint8)
    shifted = np.arange(len(out)) + len(sep) * segment
    buf[shifted] = out
    seps = ends + len(sep) * np.arange(len(at))
    for i, b in enumerate(sep):
        buf[seps + i] = b
    text = buf.tobytes().decode("utf-8", "replace")
    if text.count("\uffff\ufffe") != len(at):  # a start's own bytes spell the separator: judged whole
        return np.ones(len(at), dtype=bool)
    chars = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    mark = np.flatnonzero((chars[:-1] == 0xFFFF) & (chars[1:] == 0xFFFE))
    bad = (chars == 0xFFFD) | _CONTROL[np.minimum(chars, 0x9F)] & (chars < 0xA0)
    before = np.concatenate(([0], np.cumsum(bad)))
    first_char = np.concatenate(([0], mark[:-1] + 2))
    n_chars = mark - first_char
    n_bad = before[mark] - before[first_char]
    good |= n_bad <= (TEXT_NOISE + 1e-9) * n_chars
    return np.asarray(good, dtype=bool)
