"""Errors of the proof writer and of `attest`, as the user sees them (one line each).

The offline verifier has its own hierarchy (`proof.verify.PackError`), because it may not import
`erasure`; `PackRejected` carries one of those across to the CLI.
"""

from __future__ import annotations

from erasure.errors import Conflict, ErasureError, InputError


class EvidenceInvalid(InputError):
    """An evidence file is missing, unreadable, or contradicts another: nothing was written."""


class IdentifierInPack(InputError):
    """A file of the pack would hold a subject identifier in plaintext: nothing was written."""


class SameKeyRefused(Conflict):
    """The DPO tried to attest with the engine's own key."""


class AlreadyAttested(Conflict):
    """The pack already carries a DPO attestation."""


class PackRejected(ErasureError):
    """The pack does not verify; the message names the failed check."""

    def __init__(self, check: str, why: str) -> None:
        super().__init__(f"pack does not verify: {check}: {why}")
        self.check = check
        self.why = why
