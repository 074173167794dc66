"""Whether a text names a subject: the check intake runs on every free-text field (reasons, notes, ids)
before it is stored, so that only the vault ever holds a subject's identifiers."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from erasure.errors import InputError
from erasure.identity import MIN_MATCH_CHARS, Identity, fold
from erasure.subject import Subject

_MIN_TOKEN = 3  # name tokens and email local parts shorter than this would refuse most texts


def _squash(text: str) -> str:
    """Letters and digits only, in normal form: what is left of an identifier written without
    separators (`AnnabelQuist`, `annabel.quist-example.org`, `447958331277`)."""
    return re.sub(r"[\W_]+", "", fold(text))


@lru_cache(maxsize=4096)
def identifier_needles(subject: Subject) -> tuple[tuple[str, str], ...]:
    """(kind, normal form) pairs that a text must not contain beyond the identifiers themselves (which
    `erasure.identity.Identity` matches in every spelling): the email's local part and each name
    token of at least three characters."""
    ident = Identity.of(subject)
    needles: dict[tuple[str, str], None] = {}
    for email in ident.emails:
        local = email.split("@", 1)[0]
        if len(local) >= _MIN_TOKEN:
            needles[("email", local)] = None
    for name in ident.names:
        for tok in re.split(r"[\W_]+", name):
            if len(tok) >= _MIN_TOKEN:
                needles[("name", tok)] = None
    return tuple(needles)


@dataclass(frozen=True)
class _Matcher:
    identity: Identity
    whole: tuple[tuple[str, str], ...]
    """ids, emails and names of 4+ characters, matched as substrings of the folded text."""
    partial: tuple[tuple[str, re.Pattern[str]], ...]
    """the email's local part and name tokens, matched as tokens."""
    squashed_whole: tuple[tuple[str, str], ...]
    squashed_partial: tuple[tuple[str, str], ...]


@lru_cache(maxsize=4096)
def _matcher(subject: Subject) -> _Matcher:
    ident = Identity.of(subject)
    parts = identifier_needles(subject)
    sq_whole = [(k, _squash(v)) for k, v in ident.items() if k != "phone"]
    sq_whole += [("phone", d) for d in ident.phone_spellings()]
    return _Matcher(
        identity=ident,
        whole=tuple((k, v) for k, v in ident.items() if k != "phone" and len(v) >= MIN_MATCH_CHARS),
        partial=tuple((k, re.compile(rf"(?<![^\W_]){re.escape(v)}(?![^\W_])")) for k, v in parts),
        squashed_whole=tuple((k, v) for k, v in sq_whole if len(v) >= MIN_MATCH_CHARS),
        squashed_partial=tuple((k, v) for k, v in ((k, _squash(v)) for k, v in parts) if len(v) >= _MIN_TOKEN),
    )


def mentions_subject(text: str, subject: Subject, *, strict: bool = False, partial: bool = True) -> str | None:
    """The kind of identifier ('id', 'email', 'name', 'phone') of `subject` that `text` contains, or None.

    Built on `erasure.identity`: every identifier in every normalised spelling (NFKC, case folding,
    phones in E.164 and national spellings with any separators), token-bounded; ids, emails and names
    of 4+ characters also inside other text. With `partial` (the default) also the email's local part
    and name tokens of 3+ characters, as tokens. `strict` (for ids, which become file names and
    Prefect parameters) also refuses all of these with their separators removed (`AnnabelQuist`,
    `447958331277`), anywhere in the text."""
    m = _matcher(subject)
    kind = m.identity.found_in(text)
    if kind is not None:
        return kind
    folded = fold(text)
    for k, v in m.whole:
        if v in folded:
            return k
    if strict:
        flat = _squash(text)
        for k, v in m.squashed_whole + (m.squashed_partial if partial else ()):
            if v in flat:
                return k
    if partial:
        for k, rx in m.partial:
            if rx.search(folded):
                return k
    return None


def refuse_if_mentions_subject(field: str, text: str, subject: Subject) -> None:
    """Raise `InputError` naming only the field and the kind of identifier, never its value."""
    kind = mentions_subject(text, subject)
    if kind is not None:
        raise InputError(f"{field}: must not contain the subject's identifiers (found the subject's {kind})")


def refuse_if_mentions_anyone(field: str, text: str, subjects: Iterable[Subject], *, strict: bool = False) -> None:
    """Raise `InputError` when `text` holds a whole identifier (any spelling; with `strict`, also with
    its separators removed) of any of `subjects` (the vault's): the message names the field and the
    kind, never the value nor whose it is."""
    for subject in subjects:
        kind = mentions_subject(text, subject, strict=strict, partial=False)
        if kind is not None:
            raise InputError(
                f"{field}: must not contain a data subject's identifiers (found the {kind} of a subject in the vault)"
            )
