"""LangGraph's namespaces and checkpoint metadata as the erasing side reads them, on SQLite and on
PostgreSQL alike (`tasks.targets.langgraph_postgres` imports this): whose a namespace is and in which
tier its items belong, and which metadata keys name the subject."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from erasure.identity import fold
from erasure.subject import Subject
from erasure.target_kinds.langgraph_sqlite import LANGGRAPH_METADATA_KEYS, SUBJECT_LABEL
from erasure.tiers import Tier


class NamespaceMatcher:
    """Whether a dot-joined namespace is the subject's, and which tier its items belong to.

    A namespace is the subject's when one of its labels IS the subject's id (whole label, compared
    after NFKC and case folding, as the cascade compares ids), under a configured prefix or not: an
    app that wrote the person under a second layout (`("users", id, "prefs")` beside `("memories",
    id)`) still wrote the person. The configured prefixes (their other labels compared exactly, as
    LangGraph does) decide the tier and tell which of the subject's layouts nobody configured."""

    def __init__(self, prefixes: Iterable[tuple[str, ...]], episodic: Iterable[str], subject: Subject) -> None:
        self.want = fold(subject.id)
        self.templates: list[list[tuple[str, bool]]] = [
            [(fold(x.replace(SUBJECT_LABEL, subject.id)), True) if SUBJECT_LABEL in x else (x, False) for x in ns]
            for ns in prefixes
        ]
        self.episodic = frozenset(episodic)

    def _configured(self, parts: list[str]) -> int | None:
        """The length of the configured prefix `parts` lies under, if any."""
        for labels in self.templates:
            if len(parts) >= len(labels) and all(
                (fold(part) if folded else part) == label for part, (label, folded) in zip(parts, labels, strict=False)
            ):
                return len(labels)
        return None

    def _own_label(self, parts: list[str]) -> int | None:
        return next((i for i, part in enumerate(parts) if fold(part) == self.want), None)

    def tier(self, prefix: str) -> Tier | None:
        """The tier of an item in namespace `prefix` if it is the subject's, else None."""
        parts = prefix.split(".")
        end = self._configured(parts)
        if end is None:
            own = self._own_label(parts)
            if own is None:
                return None
            end = own + 1
        rest = parts[end:]
        return Tier.episodic if rest and rest[0] in self.episodic else Tier.semantic

    def unconfigured(self, prefix: str) -> bool:
        """Whether no configured prefix holds namespace `prefix`."""
        return self._configured(prefix.split(".")) is None

    def unconfigured_layout(self, prefix: str) -> str | None:
        """For the subject's namespace outside every configured prefix: its layout (the labels up to
        the subject's, theirs replaced by the placeholder), used only to count layouts."""
        parts = prefix.split(".")
        if self._configured(parts) is not None:
            return None
        own = self._own_label(parts)
        return None if own is None else ".".join([*parts[:own], SUBJECT_LABEL])


def names_subject(meta: Any, want: str) -> set[str]:
    """The top-level keys of a checkpoint's metadata (a decoded dict), LangGraph's own aside, whose
    value is the subject's id (`want`, folded)."""
    if not isinstance(meta, dict):
        return set()
    return {
        str(k)
        for k, v in meta.items()
        if str(k) not in LANGGRAPH_METADATA_KEYS
        and not str(k).startswith("langgraph_")
        and isinstance(v, (str, int))
        and not isinstance(v, bool)
        and fold(str(v)) == want
    }
