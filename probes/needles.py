"""Needles for the byte scan, and how they are cut from the subject's data.

A needle is a byte string whose presence anywhere in the store's files is residue. Several needles can
stand for one thing (a `group`): a 512-byte float32 vector is cut into 128-byte pieces, because a
vector stored in a SQLite blob can straddle an overflow page (4 bytes of page pointer in the middle)
and at most one piece of it can; the group counts as found when any of its pieces is.

Selection rules, so that a hit means the subject and not a bystander:
- identifiers (utf-8) of at least `MIN_IDENTIFIER_BYTES`, unless they also occur in data that is meant
  to survive (the subject's own (source, source_ref) keys kept by sticky erasure, other subjects' ids
  that contain them, bystanders' frames per FTS); such identifiers are withheld and counted;
- content windows: runs of plain ASCII text (no quote or backslash, so the bytes are the same in the
  database, JSON session files and JSONL corpora) of `MIN_WINDOW_CHARS`..`MAX_WINDOW_CHARS`, cut at
  word boundaries, that FTS does not find in any bystander frame;
- vector pieces with at least `MIN_NONZERO_FLOATS` non-zero floats (a sparse hashed embedding has
  long runs of zeros that match anything), from vectors with no identical bystander twin;
- canaries: windows of bystanders' frames, expected to SURVIVE (a byte-level bystander count).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

MIN_IDENTIFIER_BYTES = 4
MIN_WINDOW_CHARS = 24
MAX_WINDOW_CHARS = 48
MIN_WINDOW_WORDS = 4
VECTOR_PIECE_BYTES = 128
MIN_NONZERO_FLOATS = 4
MAX_VECTOR_PIECES = 2
"""Pieces kept per vector: its first and last distinctive ones. A page boundary splits at most one of
two pieces this far apart, and each piece costs the byte scan's compile time (a window's thousands)."""
MIN_BLOB_PIECE_DISTINCT = 16
BLOB_PIECE_BYTES = 64

_PLAIN_RUN = re.compile(r"[A-Za-z0-9 .,;:!?'()\-]+")
_FTS_TOKEN = re.compile(r"[^\W_]+")


class NeedleKind(StrEnum):
    """What a needle was cut from."""

    identifier = "identifier"
    shared_identifier = "shared_identifier"
    """An identifier that is also another subject's own (a namesake's name, a household phone): its hits
    are counted and reported as explained, not as residue."""
    content = "content"
    vector = "vector"
    blob = "blob"
    canary = "canary"


_VIEW_KINDS = {
    NeedleKind.identifier: "identifier",
    NeedleKind.content: "content",
    NeedleKind.shared_identifier: "shared",
}

SUBJECT_KINDS: tuple[NeedleKind, ...] = (NeedleKind.identifier, NeedleKind.content, NeedleKind.vector, NeedleKind.blob)
"""Needle kinds whose presence after the cascade is residue (shared identifiers are reported as
explained, canaries are the opposite)."""


class Needle(BaseModel):
    """One byte string to look for; `group` ties the pieces of one thing together. A `caseless`
    needle matches in any ASCII letter case (identifiers: full-text indexes keep lower-cased tokens)."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")

    kind: NeedleKind
    group: int
    data: bytes = Field(repr=False)
    caseless: bool = False
    ident: str | None = None
    """For an identifier: which kind of identifier it spells (`id`, `email`, `name`, `phone`), so the
    decoded views match it by its section of docs/matching.md."""

    def view(self) -> tuple[str, str]:
        """(kind, text) as the decoded views match it (`probes.views.scan_views`): identifiers and
        content windows are looked for, another subject's own identifier only explains hits, and the
        other kinds (vector and blob pieces, canaries) are raw bytes, not text (kind '')."""
        kind = _VIEW_KINDS.get(self.kind, "")
        if kind and self.ident and self.kind is not NeedleKind.content:
            kind = f"{kind}:{self.ident}"
        return kind, self.data.decode("utf-8", "replace")


def fts_phrase(text: str) -> str | None:
    """`text` as one FTS5 phrase query (tokens as the unicode61 tokenizer splits them), or None if
    it has no token. The tokens are bare alphanumerics, so nothing in them needs escaping."""
    tokens = _FTS_TOKEN.findall(text)
    return '"' + " ".join(tokens) + '"' if tokens else None


def plain_windows(text: str, *, limit: int = 2) -> list[str]:
    """Up to `limit` distinctive-looking windows of plain ASCII text from `text`, longest runs first."""
    runs = sorted((_whole_words(text, m) for m in _PLAIN_RUN.finditer(text)), key=len, reverse=True)
    out: list[str] = []
    for run in runs:
        window = _cut_words(run)
        if window and window not in out:
            out.append(window)
        if len(out) >= limit:
            break
    return out


def _whole_words(text: str, m: re.Match[str]) -> str:
    """The run without a word it shares with the text around it ("mann: my order" out of "Großmann: my
    order" is "my order"): the full-text index holds whole words, so a window with a fragment is a
    phrase it never finds, and a namesake's identical sentence would not be seen as theirs."""
    run = m.group(0)
    if m.start() > 0 and text[m.start() - 1].isalnum() and run[0].isalnum():
        run = run.split(None, 1)[1] if len(run.split(None, 1)) == 2 else ""
    if m.end() < len(text) and text[m.end()].isalnum() and run[-1:].isalnum():
        run = run.rsplit(None, 1)[0] if len(run.rsplit(None, 1)) == 2 else ""
    return run


def _cut_words(run: str) -> str | None:
    words = run.split()
    picked: list[str] = []
    for word in words:
        if len(" ".join([*picked, word])) > MAX_WINDOW_CHARS:
            break
        picked.append(word)
    window = " ".join(picked)
    if len(window) < MIN_WINDOW_CHARS or len(picked) < MIN_WINDOW_WORDS:
        return None
    # The bytes must appear as written: a single space joins words, so the run must have had them so.
    return window if window in run else None


PIECE_GRID_FLOATS = 4
"""Pieces start on every 4th float: the window pass hashes each offset in use, so fewer offsets cost
less, and this grid covers as many vectors as any offset does on the demo store (1,767 of 1,769)."""


TAIL_FLOATS = 4
"""How many of a piece's last floats its choice looks at (see `distinctive_pieces`)."""
MIN_SECOND_TAIL = 2
"""Non-zero last floats a vector's later pieces need once it has one."""


def distinctive_pieces(embedding: bytes) -> list[tuple[int, bytes]]:
    """(byte offset, piece) of the float32 vector's pieces to look for in the store's bytes: windows of
    `VECTOR_PIECE_BYTES` on the `PIECE_GRID_FLOATS` grid with `MIN_NONZERO_FLOATS` in all, at most
    `MAX_VECTOR_PIECES` that do not overlap. The first ends on as many non-zero floats as any window of
    the vector does (up to `TAIL_FLOATS`), the largest such floats first; a later one ends on at least
    `MIN_SECOND_TAIL` of them (or as many as the first does).

    Why the ends: hyperscan finds a long literal's candidates by its last bytes, then compares the
    rest, and in a sparse hashed embedding a short run of floats (zeros, or one feature's weight over a
    common norm) recurs in thousands of other vectors, each one a candidate to compare. Measured at 1M
    frames with 30 subjects' pieces: random bytes in place of a piece's first 8 bytes changed nothing,
    in place of its last 16 bytes they took the scan from 2.2 to 1.3 s. A float where several features
    meet is larger and rarer; ending on the largest non-zero floats took the scan from 2.6 to 2.1 s
    (medians of 5) with more pieces (two for 1,537 vectors of 1,769 instead of 984). Two pieces that
    do not overlap are never both split by one page boundary (an overflow page holds 4 KiB or more)."""
    floats = np.frombuffer(embedding[: len(embedding) - len(embedding) % 4], dtype="<f4")
    width = VECTOR_PIECE_BYTES // 4
    if len(floats) < width:
        return []
    nonzero = floats != 0
    starts = np.arange(0, len(floats) - width + 1, PIECE_GRID_FLOATS)
    dense = np.convolve(nonzero, np.ones(width, dtype=np.int64), mode="valid")[starts]
    tail = np.abs(floats[starts[:, None] + width - np.arange(1, TAIL_FLOATS + 1)])
    in_run = np.cumprod(tail != 0, axis=1)  # the last float, and each before it up to the first zero
    run = in_run.sum(axis=1)
    weight = (tail * in_run).sum(axis=1, dtype=np.float64)
    eligible = np.flatnonzero((dense >= MIN_NONZERO_FLOATS) & (run > 0)).tolist()
    order = sorted(eligible, key=lambda k: (-int(run[k]), -weight[k], -int(dense[k]), k))
    picked: list[int] = []
    for k in order:
        if picked and run[k] < min(run[order[0]], MIN_SECOND_TAIL):
            break
        s = int(starts[k])
        if all(abs(s - u) >= width for u in picked):
            picked.append(s)
            if len(picked) == MAX_VECTOR_PIECES:
                break
    return [(4 * s, embedding[4 * s : 4 * (s + width)]) for s in sorted(picked)]


def vector_pieces(embedding: bytes) -> list[bytes]:
    """The aligned pieces of a float32 vector worth looking for (enough non-zero floats each): the
    other targets' probes, whose bystander check compares aligned pieces."""
    out = []
    for start in range(0, len(embedding) - VECTOR_PIECE_BYTES + 1, VECTOR_PIECE_BYTES):
        piece = embedding[start : start + VECTOR_PIECE_BYTES]
        floats = np.frombuffer(piece, dtype="<f4")
        if int(np.count_nonzero(floats)) >= MIN_NONZERO_FLOATS:
            out.append(piece)
    return out if len(out) <= MAX_VECTOR_PIECES else [out[0], out[-1]]


def blob_pieces(head: bytes, middle: bytes) -> list[bytes]:
    """Pieces of an upload's bytes (its start and its middle) varied enough to be distinctive."""
    out = []
    for piece in (head[:BLOB_PIECE_BYTES], middle[:BLOB_PIECE_BYTES]):
        if len(piece) == BLOB_PIECE_BYTES and len(set(piece)) >= MIN_BLOB_PIECE_DISTINCT and piece not in out:
            out.append(piece)
    return out


class NeedleSet:
    """Builds the needle list, numbering groups and counting what was kept and withheld."""

    def __init__(self) -> None:
        self.needles: list[Needle] = []
        self.stats: dict[str, int] = {}
        self._group = 0
        self._seen: set[bytes] = set()

    def add_group(
        self, kind: NeedleKind, pieces: Iterable[bytes], *, caseless: bool = False, ident: str | None = None
    ) -> bool:
        """Add one group (pieces already seen are skipped); False if nothing new was added."""
        fresh = [p for p in pieces if p and (p.lower() if caseless else p) not in self._seen]
        if not fresh:
            return False
        for p in fresh:
            self._seen.add(p.lower() if caseless else p)
            self.needles.append(Needle(kind=kind, group=self._group, data=p, caseless=caseless, ident=ident))
        self._group += 1
        self.bump(kind.value)
        return True

    def bump(self, stat: str, n: int = 1) -> None:
        """Count something about the selection (kept per kind, withheld per reason)."""
        self.stats[stat] = self.stats.get(stat, 0) + n


MAX_TARGET_CONTENT_GROUPS = 400
"""Content windows a store kind's fingerprint keeps at most."""


def add_content_windows(needles: NeedleSet, texts: Iterable[str], corpus: str) -> None:
    """Content needles from the subject's `texts` (`plain_windows`, each text once): a window that stands
    in other people's text (`corpus`) proves nothing and is withheld; at most `MAX_TARGET_CONTENT_GROUPS`."""
    for text in dict.fromkeys(texts):
        for window in plain_windows(text):
            if window in corpus:
                needles.bump("content_in_bystander_text")
            elif needles.stats.get(NeedleKind.content.value, 0) < MAX_TARGET_CONTENT_GROUPS:
                needles.add_group(NeedleKind.content, [window.encode()])
