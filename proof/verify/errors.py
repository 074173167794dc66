"""The verifier's one error hierarchy: every check raises a `PackError` subclass whose `check` names it,
with a message of one line of printable ASCII (nothing taken from a pack can act on a terminal).
`checking` is each check's safety net: anything else a hostile input breaks ends as that check's
failure, never as a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn


def printable(text: str) -> str:
    """`text` with every character outside printable ASCII written as an escape (\\x1b, \\u202e...):
    safe on any terminal and any output encoding."""
    if text.isascii() and text.isprintable():
        return text
    out = []
    for ch in text:
        o = ord(ch)
        if 0x20 <= o < 0x7F:
            out.append(ch)
        elif o < 0x100:
            out.append(f"\\x{o:02x}")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    return "".join(out)


class PackError(Exception):
    """The pack failed a check. `check` names it; `str(err)` says why, in one line of printable ASCII."""

    check = "pack"
    step: int | None = None
    """The number of the verifier's step that raised it (`verifier.STEPS`); None outside a verification."""

    def __init__(self, why: str) -> None:
        super().__init__(printable(why))


class KeyArgumentError(PackError):
    """A public key given to the verifier is unusable."""

    check = "keys"


class ArchiveError(PackError):
    """Check 1: unsafe or malformed archive, or files missing or extra against the manifest."""

    check = "archive"


class SignatureError(PackError):
    """Check 2: no valid signature by the given key."""

    check = "signature"


class StatementError(PackError):
    """Check 3: wrong payload type, statement type, predicate type or predicate shape."""

    check = "statement"


class SubjectError(PackError):
    """Check 4: a file does not match the signed digests, or is not covered by them."""

    check = "subjects"


class ChecksumError(PackError):
    """Check 5: manifest.json, SHA256SUMS and the files disagree."""

    check = "checksums"


class SameKeyError(PackError):
    """Check 6: the engine and the DPO used the same key."""

    check = "distinct-keys"


class AuditLogError(PackError):
    """Check 7: the audit-log redaction evidence does not hold."""

    check = "audit-log"


class ConsistencyError(PackError):
    """Check 8: the claims contradict the step records or the probes."""

    check = "consistency"


class TimestampError(PackError):
    """Check 9: an RFC 3161 token does not cover its signature, does not chain to the pinned TSA root,
    or gives a time outside the run."""

    check = "timestamp"


class ReverifyError(PackError):
    """Check 11: a re-verification statement given beside the pack does not hold, or says the subject is
    back."""

    check = "reverify"


def fail(cls: type[PackError], why: str) -> NoReturn:
    """Raise `cls(why)`: a check's failure."""
    raise cls(why)


@contextmanager
def checking(cls: type[PackError]) -> Iterator[None]:
    """The safety net of one check: whatever a hostile input makes go wrong inside it ends as that
    check's failure, never as a traceback. (The tests require a named reason for every input they
    know; this catches what they do not.)"""
    try:
        yield
    except PackError:
        raise
    except RecursionError:
        raise cls("the input nests too deeply") from None
    except MemoryError:
        raise cls("the input needs more memory than this verifier allows") from None
    except Exception as exc:
        raise cls(f"refused: the input broke this check ({type(exc).__name__})") from exc
