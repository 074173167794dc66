"""A request's evidence folder as one object: `EvidenceFolder.of(home, request_id)` (or `EvidenceFolder(folder)`)
lists the folder once and answers what the product asks of it: the packs (the newest, and the history
before it), the loose files of the current run and of the run that wrote a pack (its
`verification.json`), each pack's re-verification statements and backups follow-up.

Not `proof.evidence.Evidence`: that is the five files of one run, read and checked to build a pack.
Only what the product itself wrote is read here; nothing of it is trusted as a verdict (the verifier
checks the packs and statements, `proof.verify`).
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any

from erasure.config import Home
from erasure.evidence_runs import current_run_dir
from proof.history import current_pack, packs, run_of, statement_prefix
from proof.reverification import statement_files
from wire.format import followup_name

VERIFICATION = "verification.json"


class EvidenceFolder:
    """One request's evidence folder, read once: its packs when it is made, the rest when first asked."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.packs: tuple[Path, ...] = tuple(p for _n, p in packs(self.folder))
        """The request's packs, oldest first (regular files only)."""

    @classmethod
    def of(cls, h: Home, request_id: str) -> EvidenceFolder:
        """The evidence folder of `request_id` (already checked as a safe token) in home `h`."""
        return cls(h.evidence_dir(request_id))

    @property
    def newest(self) -> Path:
        """The newest pack (the one signed off, re-verified and exported as current); the first pack's
        path when there is none yet (`proof.history.current_pack`)."""
        return self.packs[-1] if self.packs else current_pack(self.folder)

    @property
    def history(self) -> tuple[Path, ...]:
        """The packs before the newest, oldest first."""
        return self.packs[:-1]

    @cached_property
    def run_dir(self) -> Path:
        """The folder of the current run's loose files (`erasure.evidence_runs`)."""
        return current_run_dir(self.folder)

    @cached_property
    def verification(self) -> dict[str, Any] | None:
        """The current run's `verification.json`; None when there is none yet, or it is not a JSON object."""
        return _json_object(self.run_dir / VERIFICATION)

    def verification_of(self, pack: Path) -> dict[str, Any] | None:
        """The `verification.json` the run that wrote `pack` left beside it (None as for `verification`)."""
        return _json_object(run_of(pack) / VERIFICATION)

    def statements(self, pack: Path | None = None) -> list[Path]:
        """The re-verification statements of `pack` (default: the newest), in their chain's order (regular
        files only: a link is never followed out of the folder)."""
        found = statement_files(self.folder, statement_prefix(pack or self.newest))
        return [p for _n, p in found if not p.is_symlink()]

    def followup(self, pack: Path) -> Path | None:
        """The backups follow-up statement of `pack`, when a regular file holds it."""
        f = pack.with_name(followup_name(pack.name))
        return f if f.is_file() and not f.is_symlink() else None


def _json_object(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
