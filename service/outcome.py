"""How a run ended (`Outcome`), and what that means everywhere: the request's state, the Prefect
state (its type and name), and the error (and so the exit code) of the command that ran it.

One decision, read by every surface: the cascade driver (`service.cascade`), re-verification
(`service.reverification`), the restore replay (`service.restore`), every flow (each ends through
`flows.ended.ended`, the one place a Prefect state is built) and every command (each raises
`Outcome.error`, and `cli.main` turns the error into its exit code). The README's "Exit codes" table
lists every member (tests/architecture/test_outcome_everywhere.py keeps it true).
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


class ReplayFailed(ErasureError):
    """A replay of a restored store did not end all clear (the store stays refused)."""


class Outcome(StrEnum):
    """How a run ended: one request's, a window's, a re-verification's, a DPO's sign-off, a replay's."""

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
    reopened = "reopened"  # a re-verification found the subject again: the request is reopened
    rejected = "rejected"  # the DPO signed a reject: nothing is sent, the request is rejected
    replay_failed = "replay_failed"  # a restored store's replay did not end all clear (the store stays refused)

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
        """The Prefect state's type: Completed (exit 0) or else Failed."""
        return self in (Outcome.all_clear, Outcome.noop)

    @property
    def state_name(self) -> str:
        """The Prefect state's name (the UI, `run_report` and `--json`'s `flow_state` show it)."""
        return _STATE_NAMES.get(self, "Completed" if self.completed else "Failed")

    def error(self, message: str) -> ErasureError | None:
        """What the command that ran it raises (its class carries the exit code); None: exit 0."""
        cls = _ERRORS.get(self, None if self.completed else RunFailed)
        return None if cls is None else cls(message)

    def raise_error(self, message: str) -> None:
        """Raise `error(message)`; return only when this outcome exits 0."""
        err = self.error(message)
        if err is not None:
            raise err

    @property
    def exit_code(self) -> int:
        """The exit code of the command that ran it."""
        err = self.error("")
        return 0 if err is None else err.exit_code

    @classmethod
    def of(cls, data: object) -> Outcome | None:
        """The outcome a flow's result data names (`{"outcome": ...}`); None when it names none."""
        value = data.get("outcome") if isinstance(data, Mapping) else None
        return cls(value) if value in set(cls) else None


_STATES: dict[Outcome, RequestState] = {
    Outcome.all_clear: RequestState.awaiting_attestation,
    Outcome.held: RequestState.blocked,
    Outcome.conflict: RequestState.exception,
    Outcome.failed: RequestState.exception,
    Outcome.no_pack: RequestState.exception,
    Outcome.residue: RequestState.exception,
    Outcome.bystanders_lost: RequestState.exception,
    Outcome.reopened: RequestState.reopened,
    Outcome.rejected: RequestState.rejected,
}
_STATE_NAMES = {
    Outcome.held: "Blocked",
    Outcome.conflict: "IdentityConflict",
    Outcome.no_pack: "NoPack",
    Outcome.residue: "Residue",
    Outcome.bystanders_lost: "BystandersLost",
    Outcome.reopened: "Reopened",
    Outcome.rejected: "Rejected",
    Outcome.replay_failed: "ReplayFailed",
}
_ERRORS: dict[Outcome, type[ErasureError]] = {
    Outcome.held: RequestBlocked,
    Outcome.conflict: Conflict,
    Outcome.residue: VerificationFailed,
    Outcome.bystanders_lost: BystandersLost,
    Outcome.reopened: VerificationFailed,
    Outcome.replay_failed: ReplayFailed,
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
        outcome = Outcome.of(data)
        if outcome is None or not isinstance(data, Mapping):
            return None
        detail, pack = data.get("detail"), data.get("pack")
        return cls(outcome, detail if isinstance(detail, str) else None, pack if isinstance(pack, str) else None)


def window_outcome(outcomes: Iterable[Outcome]) -> Outcome:
    """A window's outcome: nothing to do when it had no request; all clear when every request is settled
    (all clear, held, or already done); else residue over others' data lost over failed."""
    found = set(outcomes)
    if not found:
        return Outcome.noop
    if all(o.settled for o in found):
        return Outcome.all_clear
    if Outcome.residue in found:
        return Outcome.residue
    if Outcome.bystanders_lost in found:
        return Outcome.bystanders_lost
    return Outcome.failed


_WINDOW_MESSAGES = {
    Outcome.residue: "a request of the window ended with residue: see the table",
    Outcome.bystanders_lost: "a request of the window lost other people's data: see the table",
    Outcome.failed: "a request of the window did not complete: see the table",
}


def window_error(outcomes: Iterable[Outcome]) -> ErasureError | None:
    """What a window's `erasure request run` raises: `window_outcome`'s error (none: exit 0)."""
    outcome = window_outcome(outcomes)
    return outcome.error(_WINDOW_MESSAGES.get(outcome, ""))


def counts(results: Mapping[str, Result]) -> dict[str, int]:
    """How many requests ended in each outcome."""
    out: dict[str, int] = {}
    for r in results.values():
        out[r.outcome.value] = out.get(r.outcome.value, 0) + 1
    return out
