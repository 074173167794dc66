"""One sentence per exception kind, defined once: the verifier's `OK` line, the DPO's signer,
attestation.txt, the demo and the summaries all explain an exception with these words.

A pack's exception is `{"tier", "kind", "item_key", "ground"}` (verification.json); it names no
person. Standard library only; the verifier's `.pyz` carries it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EXPLANATIONS = {
    "model_trained_on_subject": "A fine-tuned model was trained on a corpus that held the subject's data; its"
    " weights cannot be edited, so it must be retrained without them or kept under a recorded Art.17(3) ground.",
    "subprocessor_not_confirmed": "A subprocessor did not confirm the deletion it was asked for; retry the"
    " request and escalate to the processor.",
    "mention_reported": "Another person's item names the subject and was kept, not redacted, because the"
    " mentions policy is set to report.",
    "mention_ambiguous": "A mention in another person's item may mean someone else (a shared name, or an id"
    " that reads as a word), so it was kept for a person to review.",
    "mention_unredactable": "A mention sits where it cannot be removed in place (inside a base64 run), so the"
    " item was kept for a person to review.",
    "mention_in_others_content": "The subject is named inside another person's content that the erasure may"
    " not rewrite (their attachment); review it with its owner.",
    "held_in_backup_until": "A declared backup taken before the erasure still holds the subject's data until"
    " it expires; a restore from it replays the erasure.",
    "beyond_reach": "A copy the engine cannot erase (a WAL archive, a standby, a replication slot) may still"
    " hold the subject's data; the database's operator must clear it.",
    "unscanned_content": "A file no decoder could read was not searched, so the probes cannot say it is free"
    " of the subject; the operator must open or remove it.",
    "residue": "An independent probe still found the subject's data after the erasure; the operator must"
    " erase it and run the request again.",
}
UNKNOWN = "An exception of a kind this version does not describe; read its ground in verification.json."


def explain(kind: str) -> str:
    """The one sentence that says what an exception of `kind` means and who acts on it."""
    return EXPLANATIONS.get(kind, UNKNOWN)


def exception_line(exc: Mapping[str, Any] | Any) -> str:
    """`tier: kind (item): sentence` for one exception of a pack (any other value as its text)."""
    if not isinstance(exc, Mapping) or not isinstance(exc.get("kind"), str):
        return str(exc)
    where = f" ({exc['item_key']})" if exc.get("item_key") else ""
    return f"{exc.get('tier', '?')}: {exc['kind']}{where}: {explain(exc['kind'])}"


_WIDTHS = (14, 22, 8, 8, 8)


def tier_table(tiers: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The statement's per-tier rows as an indented text table: tier, status, before, after, residue
    (`-` where a tier counts nothing)."""

    def count(v: Any) -> str:
        return "-" if v is None else str(v)

    rows = [("tier", "status", "before", "after", "residue")] + [
        (str(tier), str(row.get("status")), *(count(row.get(k)) for k in ("before", "after", "residue")))
        for tier, row in tiers.items()
    ]
    return [
        "  "
        + r[0].ljust(_WIDTHS[0])
        + r[1].ljust(_WIDTHS[1])
        + "".join(c.rjust(w) for c, w in zip(r[2:], _WIDTHS[2:], strict=True))
        for r in rows
    ]
