"""Request states, as shown everywhere a request's state is shown (CLI, SLA monitor, UI)."""

from __future__ import annotations

from enum import StrEnum


class RequestState(StrEnum):
    submitted = "submitted"  # vaulted, clock running
    paused = "paused"  # clock paused while identity is verified
    running = "running"  # a cascade run is under way
    blocked = "blocked"  # litigation hold: nothing erased
    failed = "failed"  # a step failed; rerun resumes
    exception = "exception"  # cascade or verification left something: not all clear
    awaiting_attestation = "awaiting attestation"  # verified all clear, engine-signed, DPO to sign
    rejected = "rejected"  # the DPO refused to attest (a reason code is logged): an open exception
    sealed = "sealed"  # DPO signed the pack
    notified = "notified"  # requester told (only when all clear)


OPEN_STATES = frozenset(RequestState) - {RequestState.notified}
"""States the SLA monitor watches: everything until the requester is notified."""
