"""Every kind of exception a request can end with, each explained in one sentence for the people who
read it (the compliance team in the run summary, the DPO in the sign-off form, a regulator in
attestation.txt), and who acts on it next. One table: every surface reads it, and
`requests.open_exception` refuses a kind it does not list, so no kind is ever shown unexplained.

It lives in the domain package because `proof` (attestation.txt) may import only `erasure`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
    """One exception kind: what it means (one sentence), who acts next and what they do."""

    meaning: str
    who: Who
    next_step: str


KINDS: dict[str, Kind] = {
    RESIDUE: Kind(
        "The independent probes still found the subject here after the erasure, so nothing is certified.",
        "operator",
        "remove what the probes found at the locations listed, then run the request again",
    ),
    UNSCANNED_CONTENT: Kind(
        "The probes could not read this content (encrypted, damaged, too large or of an unknown format), "
        "so nothing can be said about the subject there.",
        "operator",
        "open or remove the listed files, or declare them out of scope, then run the request again",
    ),
    MENTION_IN_OTHERS_CONTENT: Kind(
        "Another person's item names the subject; it is that person's data, so it is kept and declared "
        "rather than erased (docs/matching.md 7.2).",
        "DPO",
        "judge whether the mention may stay, and say so in the attestation",
    ),
    MENTION_REPORTED: Kind(
        "Another person's item mentions the subject and the policy (ERASURE_MENTIONS=report) keeps such "
        "mentions, so they are counted here instead of redacted.",
        "DPO",
        "confirm the policy applies to this request, or have the operator rerun with ERASURE_MENTIONS=redact",
    ),
    MENTION_AMBIGUOUS: Kind(
        "A word that may be the subject's identifier or may be someone else's (a namesake, an everyday "
        "word) was left as it is, because redacting it could damage another person's text.",
        "operator",
        "review the counted items and redact by hand what is the subject's",
    ),
    MENTION_UNREDACTABLE: Kind(
        "A mention of the subject sits inside an encoded value (a base64 run) that cannot be changed in "
        "place without breaking the item.",
        "operator",
        "review the counted items and rewrite or remove them by hand",
    ),
    MODEL_TRAINED_ON_SUBJECT: Kind(
        "A model was fine-tuned on data that included the subject; the training examples are erased, but "
        "the model's weights may still reflect them.",
        "operator",
        "retrain the model without the subject, or have the DPO record an Art.17(3) ground for keeping it",
    ),
    SUBPROCESSOR_NOT_CONFIRMED: Kind(
        "A subprocessor holding a copy of the subject's data has not confirmed that it erased it.",
        "operator",
        "run the request again, and escalate to the processor if it keeps failing",
    ),
    BEYOND_REACH: Kind(
        "A target keeps copies the eraser cannot reach (a WAL archive, a standby, a replication slot), "
        "recorded with the Art.17(3) ground the target names.",
        "operator",
        "erase or expire those copies by the target's own means",
    ),
    HELD_IN_BACKUP: Kind(
        "A declared backup taken before the erasure still holds the subject until the date shown, when it "
        "expires; it is never restored without erasing again.",
        "nobody",
        "nothing: the backup expires on its own",
    ),
}


def explain(kind: str) -> str:
    """The one-sentence meaning of `kind` (an unknown kind, from an older pack, says so)."""
    k = KINDS.get(kind)
    return k.meaning if k is not None else f"An exception of kind {kind!r}, which this version does not know."


def check_kind(kind: str) -> None:
    """`ValueError` for a kind with no explanation (a programming error: add it to `KINDS` first)."""
    if kind not in KINDS:
        raise ValueError(f"exception kind {kind!r} has no explanation in erasure.exception_kinds.KINDS")
