"""The folded-text probe: a subject's identifiers written in forms the byte scan cannot see.

The byte scan looks for literal bytes (ASCII letter case aside). A name typed in full-width letters
(`Ａｎｎａｂｅｌ`, what a CJK input method gives), with a ligature, or in another letter case outside
ASCII (`JOSÉ` for `José`) is the same name to a reader but other bytes. This probe reads the store's
texts that hold any non-ASCII character (the text columns people's words live in, and the corpus and
session files line by line), folds them as `probes.identity` folds identifiers (NFKC, case folding),
and looks for every subject's identifier needles, folded the same way, in one hyperscan pass. ASCII
texts are left to the byte scan: folding does not change them.

A hit is residue of the needle's group (`scan-folded:identifier`), judged like the byte scan's own:
the needles are the fingerprint's identifier needles, so a shared or withheld spelling is not one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from pathlib import Path

import hyperscan

from probes.bytescan import compile_needles
from probes.needles import Needle, NeedleKind
from probes.store import CORPORA_DIR, DB_FILE, SESSIONS_DIR, open_store, regular_files

TEXT_COLUMNS = (
    ("frames", "content", ""),
    ("raw_archive", "content", "erased_at IS NULL"),
    ("working_sessions", "state", ""),
    ("kg_entities", "name", ""),
)
"""(table, column, condition): where people's words are stored as text."""
TEXT_DIRS = (CORPORA_DIR, SESSIONS_DIR)
BATCH_BYTES = 32 << 20


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _non_ascii_texts(store_dir: Path) -> Iterator[str]:
    """Every stored text with a character outside ASCII: rows of `TEXT_COLUMNS`, lines of the files
    under `TEXT_DIRS`."""
    if (store_dir / DB_FILE).exists():  # no database: the tier probes report it, the files are still read
        with open_store(store_dir) as conn:
            for table, col, cond in TEXT_COLUMNS:
                where = f"{cond} AND " if cond else ""
                for (text,) in conn.execute(
                    f"SELECT {col} FROM {table} WHERE {where}length(CAST({col} AS BLOB)) != length({col})"
                ):
                    if text is not None:
                        yield str(text)
    for folder in TEXT_DIRS:
        for path in regular_files(store_dir / folder):
            try:
                data = path.read_bytes()
            except OSError:
                continue  # the byte scan counts a file it cannot read
            if not data.isascii():
                yield from (line for line in data.decode("utf-8", "replace").splitlines() if not line.isascii())


def folded_groups(store_dir: Path, needle_sets: Sequence[Sequence[Needle]]) -> list[set[int]]:
    """Per needle set (a subject's fingerprint needles), the groups of its identifier needles found in
    a non-ASCII text of the store once both are folded."""
    folded: list[bytes] = []
    owners: list[tuple[int, int]] = []
    shared: set[str] = set()
    for i, needles in enumerate(needle_sets):
        for n in needles:
            if n.kind is NeedleKind.identifier:
                folded.append(_fold(n.data.decode("utf-8", "replace")).encode("utf-8"))
                owners.append((i, n.group))
            elif n.kind is NeedleKind.shared_identifier:
                shared.add(_fold(n.data.decode("utf-8", "replace")))
    # Another person's own identifier (a namesake's name) folds like the subject's spelling of it: it is
    # blanked out before matching, as the byte scan and the views explain it. One set serves every
    # subject: a string one subject shares with someone is, folded, shared by every subject who has it.
    explained = (
        re.compile("|".join(re.escape(t) for t in sorted(shared, key=len, reverse=True) if t)) if shared else None
    )
    found: list[set[int]] = [set() for _ in needle_sets]
    if not folded:
        return found
    db = compile_needles(folded, mode=hyperscan.HS_MODE_BLOCK)
    scratch = hyperscan.Scratch(db)

    def on_match(pattern_id: int, _start: int, _end: int, _flags: int, _ctx: object) -> None:
        i, group = owners[pattern_id]
        found[i].add(group)

    batch: list[str] = []
    size = 0
    for text in _non_ascii_texts(Path(store_dir)):
        batch.append(_fold(text) if explained is None else explained.sub("\x00", _fold(text)))
        size += len(batch[-1])
        if size >= BATCH_BYTES:
            db.scan("\x00".join(batch).encode("utf-8"), match_event_handler=on_match, scratch=scratch)
            batch, size = [], 0
    if batch:
        db.scan("\x00".join(batch).encode("utf-8"), match_event_handler=on_match, scratch=scratch)
    return found
