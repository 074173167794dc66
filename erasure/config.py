"""Where state lives. One home (`ERASURE_HOME`, default `.erasure/` in the project) holds the store,
the engine database, keys, the outbox, local services' data and Prefect's own home."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from erasure.errors import ConfigError
from erasure.files import private_dirs, private_umask, tighten

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Home:
    """Paths under one `ERASURE_HOME`. Create with `Home.resolve()`; `ensure()` makes the dirs."""

    root: Path
    evidence_root: Path

    @classmethod
    def resolve(
        cls, home: str | os.PathLike[str] | None = None, evidence: str | os.PathLike[str] | None = None
    ) -> Home:
        """The home named by the argument, else `$ERASURE_HOME`, else `.erasure/` in the project."""
        root = Path(home or os.environ.get("ERASURE_HOME") or PROJECT_ROOT / ".erasure")
        ev = Path(evidence or os.environ.get("ERASURE_EVIDENCE") or PROJECT_ROOT / "evidence")
        return cls(root=root.resolve(), evidence_root=ev.resolve())

    @property
    def store_dir(self) -> Path:
        """The agent-memory store: everything the erasure acts on, and nothing else."""
        return self.root / "store"

    @property
    def store_db(self) -> Path:
        return self.store_dir / "memory.db"

    @property
    def engine_dir(self) -> Path:
        return self.root / "engine"

    @property
    def engine_db(self) -> Path:
        """Our own database: the request vault, step records, exceptions, receipts."""
        return self.engine_dir / "engine.db"

    @property
    def keys_dir(self) -> Path:
        return self.root / "keys"

    @property
    def outbox_dir(self) -> Path:
        return self.root / "outbox"

    @property
    def inbox_dir(self) -> Path:
        return self.root / "inbox"

    @property
    def services_dir(self) -> Path:
        """Data of local services (the demo subprocessors)."""
        return self.root / "services"

    @property
    def prefect_home(self) -> Path:
        return self.root / "prefect"

    def evidence_dir(self, request_id: str) -> Path:
        """`evidence/erasure/<request_id>/`; `request_id` must already be validated as a safe token."""
        return self.evidence_root / "erasure" / request_id

    def run_dir(self, request_id: str) -> Path:
        """The folder of the request's current run's loose evidence files (`erasure.evidence_runs`): the
        request's folder for its first run, `run-<n>/` in it for the n-th."""
        from erasure.evidence_runs import current_run_dir

        return current_run_dir(self.evidence_dir(request_id))

    def ensure(self) -> Home:
        """Create the home and its folders, each 0700 when this call makes it. Folders inside the home
        that are ours but readable by others (an older version made them 0755) are made 0700; the home
        folder itself keeps the mode it has when it already existed (`--home` may name a shared one).
        `ConfigError` when they cannot be made (the home is a file, or under one; no permission).
        It also sets this process's umask to 077 (`erasure.files.private_umask`): whatever is created
        under the home afterwards, by us, Prefect or PostgreSQL, is its owner's only."""
        private_umask()
        try:
            private_dirs(self.root)
            for d in (
                self.store_dir,
                self.engine_dir,
                self.keys_dir,
                self.outbox_dir,
                self.inbox_dir,
                self.services_dir,
                self.prefect_home,
            ):
                private_dirs(d)
                tighten(d)
                if not d.is_dir():
                    raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(d))
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(self.root) else ""
            raise ConfigError(f"cannot use the home {self.root}{where}: {exc.strerror or type(exc).__name__}") from None
        return self

    def export_env(self) -> None:
        """Point this process (and Prefect, imported later) at this home, offline and untracked."""
        os.environ["ERASURE_HOME"] = str(self.root)
        os.environ["ERASURE_EVIDENCE"] = str(self.evidence_root)
        os.environ.setdefault("PREFECT_HOME", str(self.prefect_home))
        os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
        os.environ.setdefault("DO_NOT_TRACK", "1")
