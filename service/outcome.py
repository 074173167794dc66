"""How one request's run ended (`Outcome`), and what that means everywhere: the request's state, the
Prefect state's name, the error (and so the exit code) of `erasure request run`, and a window's verdict.

One decision, read by every surface: the cascade driver (`service.cascade`), the `erasure-request`,
`erasure-window` and `verification` flows, and the CLI.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NotRequired, TypedDict

from erasure.errors import BystandersLost, Conflict, ErasureError, RequestBlocked, VerificationFailed
from erasure.states import RequestState


class RunFailed(ErasureError):
    """The cascade did not complete (or a request of a window did not)."""


class RunEnded(ErasureError):
    """A flow run that ended short of all clear, as its Failed state's data: `str(err)` is the state's
    one-sentence message and `data` what the readers of the run need (ids and counts only). Prefect
    resolves a Failed state's data into an exception; a bare dict there ends the run in a TypeError."""

    def __init__(self, message: str, data: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.data: dict[str, Any] = dict(data)

    def __reduce__(self) -> tuple[Any, ...]:  # pickled with its data (a result store, a subprocess)
        return (type(self), (str(self), self.data))


class Outcome(StrEnum):
    """How one request's run ended."""

    all_clear = "all_clear"  # erased, verified all clear, pack written
    noop = "noop"  # already completed: nothing to do
    held = "held"  # a litigation hold: nothing erased
    conflict = "conflict"  # the email also belongs to other store ids nobody confirmed
    refused = "refused"  # preflight refused it (its state is left as it was)
    skipped = "skipped"  # another process is running this request
    failed = "failed"  # a step (or fingerprint, target, verification) did not finish
    no_pack = "no_pack"  # erased and verified, but the signed pack was not written
    residue = "residue"  # the probes found the subject
    bystanders_lost = "bystanders_lost"  # no residue, but other people's data shrank

    @property
    def state(self) -> RequestState | None:
        """The request's state after this outcome (None: left as it was)."""
        return _STATES.get(self)

    @property
    def settled(self) -> bool:
        """Whether a window counts this request as fine (its exit stays 0)."""
        return self in (Outcome.all_clear, Outcome.noop, Outcome.held)

    @property
    def completed(self) -> bool:
        """Whether the run of this request alone ends in a Completed Prefect state (exit 0)."""
        return self in (Outcome.all_clear, Outcome.noop)

    @property
    def state_name(self) -> str:
        """The Prefect state's name for a run of this request alone (the UI and `run_report` show it)."""
        return _STATE_NAMES.get(self, "Completed" if self.completed else "Failed")

    def error(self, message: str) -> ErasureError | None:
        """What `erasure request run ID` raises (its class carries the exit code); None: exit 0."""
        cls = _ERRORS.get(self, None if self.completed else RunFailed)
        return None if cls is None else cls(message)

    @property
    def exit_code(self) -> int:
        """The exit code of `erasure request run ID` for this outcome."""
        err = self.error("")
        return 0 if err is None else err.exit_code


_STATES: dict[Outcome, RequestState] = {
    Outcome.all_clear: RequestState.awaiting_attestation,
    Outcome.held: RequestState.blocked,
    Outcome.conflict: RequestState.exception,
    Outcome.failed: RequestState.exception,
    Outcome.no_pack: RequestState.exception,
    Outcome.residue: RequestState.exception,
    Outcome.bystanders_lost: RequestState.exception,
}
_STATE_NAMES = {
    Outcome.held: "Blocked",
    Outcome.conflict: "IdentityConflict",
    Outcome.no_pack: "NoPack",
    Outcome.bystanders_lost: "BystandersLost",
}
_ERRORS: dict[Outcome, type[ErasureError]] = {
    Outcome.held: RequestBlocked,
    Outcome.conflict: Conflict,
    Outcome.residue: VerificationFailed,
    Outcome.bystanders_lost: BystandersLost,
}


class ResultJson(TypedDict):
    """One request's end as a flow's result data and `--json` carry it (ids and counts only)."""

    outcome: str
    detail: str | None
    pack: NotRequired[str | None]


@dataclass(frozen=True)
class Result:
    """One request's end: its outcome, why (never an identifier), and its pack when one was written."""

    outcome: Outcome
    detail: str | None = None
    pack: str | None = None

    def to_json(self) -> ResultJson:
        out: ResultJson = {"outcome": self.outcome.value, "detail": self.detail}
        if self.pack is not None or self.outcome in (
            Outcome.all_clear,
            Outcome.residue,
            Outcome.bystanders_lost,
            Outcome.no_pack,
        ):
            out["pack"] = self.pack
        return out

    @classmethod
    def from_json(cls, data: object) -> Result | None:
        """The result a flow's state data carries; None when it carries none (the run crashed)."""
        if not isinstance(data, Mapping) or data.get("outcome") not in set(Outcome):
            return None
        detail, pack = data.get("detail"), data.get("pack")
        return cls(
            Outcome(data["outcome"]),
            detail if isinstance(detail, str) else None,
            pack if isinstance(pack, str) else None,
        )


def window_error(outcomes: Iterable[Outcome]) -> ErasureError | None:
    """What a window's `erasure request run` raises: none when every request is settled (all clear, held,
    or already done); else residue (7) over others' data lost (10) over anything else (1)."""
    found = set(outcomes)
    if all(o.settled for o in found):
        return None
    if Outcome.residue in found:
        return VerificationFailed("a request of the window ended with residue: see the table")
    if Outcome.bystanders_lost in found:
        return BystandersLost("a request of the window lost other people's data: see the table")
    return RunFailed("a request of the window did not complete: see the table")


def counts(results: Mapping[str, Result]) -> dict[str, int]:
    """How many requests ended in each outcome."""
    out: dict[str, int] = {}
    for r in results.values():
        out[r.outcome.value] = out.get(r.outcome.value, 0) + 1
    return out
