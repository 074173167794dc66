"""The notes an export ships, as package data: VERIFY.md (the regulator's recipe, with its trusted-time
steps) and DPO-SIGN.md (the DPO's kit, in three parts). `@NAME@` slots are filled by `service.verify_note`
and `service.dpo_kit`."""

from __future__ import annotations

from importlib.resources import files


def note(name: str) -> str:
    """The text of the note `name` (a file of this package, e.g. `VERIFY.md`)."""
    return files(__package__).joinpath(name).read_text(encoding="utf-8")
