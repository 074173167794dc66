"""One error hierarchy. Every message is written for the person at the terminal; the CLI catches
`ErasureError` once, prints `error: <message>` and exits with the error's `exit_code`."""

from __future__ import annotations


class ErasureError(Exception):
    """Base of every error the user may see. `str(err)` is a one-line, user-facing message."""

    exit_code = 1


class ConfigError(ErasureError):
    """The environment is not usable (missing key, missing SQLite feature, bad home)."""

    exit_code = 3


class InputError(ErasureError):
    """Bad input from the user: a file, an argument, a request envelope. Nothing was written."""

    exit_code = 2


class NotFound(ErasureError):
    """A request, subject, hold or key that was named does not exist."""

    exit_code = 4


class Conflict(ErasureError):
    """The operation contradicts what is already recorded (same request id, different body)."""

    exit_code = 5


class HoldActive(ErasureError):
    """A litigation hold covers the subject: nothing is erased."""

    exit_code = 6


class RequestBlocked(ErasureError):
    """The request cannot run now (closed, wrong tenant, reason names the subject...)."""

    exit_code = 6


class VerificationFailed(ErasureError):
    """Independent probes found residue, or ran no probe at all."""

    exit_code = 7


class BystandersLost(ErasureError):
    """Probes found none of the subject, but other people's data shrank: over-erasure."""

    exit_code = 10


class StoreError(ErasureError):
    """The agent-memory store is missing, corrupt or of another tenant."""

    exit_code = 8


class EngineBusy(ErasureError):
    """Another thread of this process kept the run's engine connection past the wait
    (`erasure.engine_db.LEND_WAIT_SECONDS`): one run uses its engine from one thread at a time, so this
    is a bug to report. Nothing opened a second connection behind the run's back."""


def user_reason(exc: BaseException) -> str:
    """Why a run failed, for the request's state: our errors carry a user-facing message without
    identifiers; any other error is named by its type only (its text could hold anything)."""
    return str(exc)[:300] if isinstance(exc, ErasureError) else f"unexpected {type(exc).__name__}: see the run's logs"
