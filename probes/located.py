"""Where the raw byte scan found a subject: the files of a residue, for the operator to look at."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence

from probes.model import ResidueFile


def residue_files(
    folder: str, files_of: Mapping[int, Sequence[str]], residue: Collection[int], tier_of: Callable[[str], str]
) -> list[ResidueFile]:
    """The files of `folder` that hold any needle of `residue` (indexes into the subject's needles), each
    with how many of those needles it holds; `files_of` is the raw scan's files per found needle."""
    count = Counter(rel for i in residue for rel in files_of.get(i, ()))
    return [ResidueFile(folder=folder, rel=rel, tier=tier_of(rel), hits=n) for rel, n in sorted(count.items())]
