"""A PostgreSQL cluster for Prefect's server, under `<ERASURE_HOME>/postgres` (`erasure server start
--postgres`, `make serve POSTGRES=1`).

Debian's `postgresql` package (`initdb`, `pg_ctl` in `/usr/lib/postgresql/<version>/bin`). PostgreSQL
refuses to run as root, and CI runs as root: then every PostgreSQL command runs as the package's
`postgres` user (`runuser`), which owns the cluster's folder. The cluster listens on a Unix socket in
`<ERASURE_HOME>/postgres/run` only (no TCP port); local connections are trusted, and only the cluster's
owner (and root) can enter the socket's folder. As root, the home gets the `postgres` group and mode 0710
(traverse only, no world access) so that `postgres` reaches its cluster inside. Prefect connects with
`postgresql+asyncpg://prefect@/prefect?host=<socket folder>`.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from erasure.config import Home
from erasure.errors import ConfigError

DB_USER = "prefect"
DB_NAME = "prefect"
RUN_AS = "postgres"  # when we are root
START_TIMEOUT = 120
#: sun_path is 108 bytes on Linux, with its terminating NUL.
MAX_SOCKET_PATH = 107


@dataclass(frozen=True)
class Cluster:
    """Paths of the home's cluster."""

    root: Path

    @classmethod
    def of(cls, h: Home) -> Cluster:
        return cls(h.root / "postgres")

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "run"

    @property
    def log(self) -> Path:
        return self.root / "postgres.log"

    @property
    def url(self) -> str:
        """Prefect's `PREFECT_API_DATABASE_CONNECTION_URL` for this cluster."""
        return f"postgresql+asyncpg://{DB_USER}@/{DB_NAME}?host={self.socket_dir}"


def bindir() -> Path:
    """The newest installed PostgreSQL's bin folder; `ConfigError` when none is installed."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise ConfigError("PostgreSQL is not installed (no initdb): run `make postgres` (Debian's postgresql package)")


def _as_owner(cmd: list[str]) -> list[str]:
    """`cmd` as the cluster's owner: ourselves, or the `postgres` user when we are root."""
    if os.geteuid() != 0:
        return cmd
    try:
        pwd.getpwnam(RUN_AS)
    except KeyError:
        raise ConfigError(
            f"PostgreSQL refuses to run as root and there is no `{RUN_AS}` user: "
            "install Debian's postgresql package (`make postgres`)"
        ) from None
    return ["runuser", "-u", RUN_AS, "--", *cmd]


def _run(cmd: list[str], what: str, timeout: float = START_TIMEOUT) -> str:
    try:
        proc = subprocess.run(
            _as_owner(cmd), capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(f"PostgreSQL: {what} did not finish within {timeout:.0f} s") from None
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout or "no output").strip().splitlines()[-1]
        raise ConfigError(f"PostgreSQL: {what} failed (exit {proc.returncode}): {last}")
    return proc.stdout


def _give_to_owner(c: Cluster) -> None:
    """As root: the cluster's folder belongs to `postgres`, which must also be able to reach it."""
    c.root.mkdir(parents=True, exist_ok=True)
    c.socket_dir.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        c.root.chmod(0o700)
        c.socket_dir.chmod(0o700)
        return
    pw = pwd.getpwnam(RUN_AS)
    for p in (c.root, c.socket_dir, c.log):
        with contextlib.suppress(FileNotFoundError):
            os.lchown(p, pw.pw_uid, pw.pw_gid)
    c.root.chmod(0o700)
    c.socket_dir.chmod(0o700)
    _let_postgres_through(c.root.parent, pw.pw_gid)
    blocked = next(
        (
            str(d)
            for d in [c.root.parent, *c.root.parent.parents]
            if subprocess.run(["runuser", "-u", RUN_AS, "--", "test", "-x", str(d)], check=False).returncode != 0
        ),
        None,
    )
    if blocked is not None:
        raise ConfigError(
            f"the `{RUN_AS}` user cannot reach {c.root}: {blocked} is closed to it "
            f"(chmod o+x {blocked}, or use an ERASURE_HOME it can reach)"
        )


def _let_postgres_through(home: Path, gid: int) -> None:
    """`postgres` must pass through the home (0700) to reach its own 0700 cluster folder inside: the home
    gets the `postgres` group with traverse only (0710), never the world (an older version added o+x,
    which let every local user reach whatever in the home was not 0600/0700: it is taken back). A home
    someone else owns is left as it is (the reachability check below names what blocks)."""
    st = home.stat()
    if st.st_uid != os.geteuid():
        return
    if st.st_gid != gid:
        os.chown(home, -1, gid)
    mode = stat.S_IMODE(st.st_mode) | 0o010
    if mode & 0o007 == 0o001:
        mode &= ~0o001
    home.chmod(mode)


def is_running(c: Cluster) -> bool:
    """True when `pg_ctl status` finds the cluster running."""
    if not (c.data / "PG_VERSION").exists():
        return False
    proc = subprocess.run(
        _as_owner([str(bindir() / "pg_ctl"), "-D", str(c.data), "status"]),
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    return proc.returncode == 0


def start(h: Home) -> Cluster:
    """Create the cluster on first use (initdb, the `prefect` database), start it with pg_ctl on its Unix
    socket, and return it. Idempotent: a running cluster is left as it is."""
    c = Cluster.of(h)
    socket = c.socket_dir / ".s.PGSQL.5432"
    if len(str(socket)) > MAX_SOCKET_PATH:
        raise ConfigError(
            f"the PostgreSQL socket path {socket} is longer than {MAX_SOCKET_PATH} bytes: use a shorter ERASURE_HOME"
        )
    b = bindir()
    _give_to_owner(c)
    fresh = not (c.data / "PG_VERSION").exists()
    if fresh:
        _run(
            [
                str(b / "initdb"),
                "-D",
                str(c.data),
                "-U",
                DB_USER,
                "--auth-local=trust",
                "--auth-host=reject",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-instructions",
            ],
            "initdb",
        )
    if not is_running(c):
        opts = f"-c listen_addresses='' -k {c.socket_dir} -c unix_socket_permissions=0700"
        _run(
            [
                str(b / "pg_ctl"),
                "-D",
                str(c.data),
                "-l",
                str(c.log),
                "-o",
                opts,
                "-w",
                "-t",
                str(START_TIMEOUT),
                "start",
            ],
            "pg_ctl start",
        )
    if fresh or not _database_exists(c, b):
        _run([str(b / "createdb"), "-h", str(c.socket_dir), "-U", DB_USER, DB_NAME], "createdb")
    return c


def _database_exists(c: Cluster, b: Path) -> bool:
    out = _run(
        [
            str(b / "psql"),
            "-h",
            str(c.socket_dir),
            "-U",
            DB_USER,
            "-d",
            "postgres",
            "-tAc",
            f"SELECT 1 FROM pg_database WHERE datname = '{DB_NAME}'",
        ],
        "psql",
    )
    return out.strip() == "1"


def stop(h: Home) -> bool:
    """Stop the home's cluster (fast shutdown). Returns False when it was not running."""
    c = Cluster.of(h)
    if not is_running(c):
        return False
    _run([str(bindir() / "pg_ctl"), "-D", str(c.data), "-m", "fast", "-w", "-t", "60", "stop"], "pg_ctl stop")
    return True
