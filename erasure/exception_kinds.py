"""Every kind of exception a request can end with, each explained in one sentence for the people who
read it (the compliance team in the run summary, the DPO in the sign-off form, a regulator in
attestation.txt), and who acts on it next. One table: every surface reads it, and
`request_records.open_exception` refuses a kind it does not list, so no kind is ever shown unexplained.

The sentences themselves are defined once in `wire.explain`, which the standalone verifier and
the DPO's signer carry (standard library only): the regulator reads the same words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from wire.explain import EXPLANATIONS, explain

__all__ = ["KINDS", "Kind", "check_kind", "explain"]

Who = Literal["operator", "DPO", "nobody"]

RESIDUE = "residue"
UNSCANNED_CONTENT = "unscanned_content"
MENTION_IN_OTHERS_CONTENT = "mention_in_others_content"
MENTION_REPORTED = "mention_reported"
MENTION_AMBIGUOUS = "mention_ambiguous"
MENTION_UNREDACTABLE = "mention_unredactable"
MODEL_TRAINED_ON_SUBJECT = "model_trained_on_subject"
SUBPROCESSOR_NOT_CONFIRMED = "subprocessor_not_confirmed"
BEYOND_REACH = "beyond_reach"
HELD_IN_BACKUP = "held_in_backup_until"


@dataclass(frozen=True)
class Kind:
    """One exception kind: what it means (its one sentence, `wire.explain`), who acts next and
    what they do."""

    meaning: str
    who: Who
    next_step: str


KINDS: dict[str, Kind] = {
    RESIDUE: Kind(
        EXPLANATIONS[RESIDUE],
        "operator",
        "remove what the probes found at the locations listed, then run the request again",
    ),
    UNSCANNED_CONTENT: Kind(
        EXPLANATIONS[UNSCANNED_CONTENT],
        "operator",
        "open or remove the listed files, or declare them out of scope, then run the request again",
    ),
    MENTION_IN_OTHERS_CONTENT: Kind(
        EXPLANATIONS[MENTION_IN_OTHERS_CONTENT],
        "DPO",
        "judge whether the mention may stay, and say so in the attestation",
    ),
    MENTION_REPORTED: Kind(
        EXPLANATIONS[MENTION_REPORTED],
        "DPO",
        "confirm the policy applies to this request, or have the operator rerun with ERASURE_MENTIONS=redact",
    ),
    MENTION_AMBIGUOUS: Kind(
        EXPLANATIONS[MENTION_AMBIGUOUS],
        "operator",
        "review the counted items and redact by hand what is the subject's",
    ),
    MENTION_UNREDACTABLE: Kind(
        EXPLANATIONS[MENTION_UNREDACTABLE],
        "operator",
        "review the counted items and rewrite or remove them by hand",
    ),
    MODEL_TRAINED_ON_SUBJECT: Kind(
        EXPLANATIONS[MODEL_TRAINED_ON_SUBJECT],
        "operator",
        "retrain the model without the subject, or have the DPO record an Art.17(3) ground for keeping it",
    ),
    SUBPROCESSOR_NOT_CONFIRMED: Kind(
        EXPLANATIONS[SUBPROCESSOR_NOT_CONFIRMED],
        "operator",
        "run the request again, and escalate to the processor if it keeps failing",
    ),
    BEYOND_REACH: Kind(
        EXPLANATIONS[BEYOND_REACH],
        "operator",
        "erase or expire those copies by the target's own means",
    ),
    HELD_IN_BACKUP: Kind(
        EXPLANATIONS[HELD_IN_BACKUP],
        "nobody",
        "nothing: the backup expires on its own",
    ),
}


def check_kind(kind: str) -> None:
    """`ValueError` for a kind with no explanation (a programming error: add it to `KINDS` first)."""
    if kind not in KINDS:
        raise ValueError(f"exception kind {kind!r} has no explanation in erasure.exception_kinds.KINDS")
