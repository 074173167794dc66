"""A PostgreSQL cluster for Prefect's server, under `<ERASURE_HOME>/postgres` (`erasure server start
--postgres`, `make serve POSTGRES=1`).

Debian's `postgresql` package (`initdb`, `pg_ctl` in `/usr/lib/postgresql/<version>/bin`). Who may reach
Prefect's database (issue 34: the shared `postgres` account, with `trust` and a superuser role, rewrote
the work pool in SQL):
- the cluster runs as an OS user of its own: ourselves, or, as root (PostgreSQL refuses root), the
  dedicated system user `erasure-pg` (created when missing; never Debian's shared `postgres`);
- it listens on a Unix socket in `<ERASURE_HOME>/postgres/run` only (no TCP), a folder only that user
  (and root) can enter; the home gets that user's group with traverse only (0710);
- `pg_hba.conf` has two lines and rejects the rest: the cluster's own OS user as its superuser by `peer`
  (administration: initdb, createdb, roles), and the role `prefect` to the database `prefect` by
  password (scram-sha-256). `prefect` is no superuser, cannot create roles or databases, and owns only
  its database; PUBLIC may not connect to it;
- the password is in `<ERASURE_HOME>/keys/postgres-prefect.pgpass` (0600), given to the Prefect server
  as `PGPASSFILE` (a path: the password is in no environment and no command line).
Prefect connects with `postgresql+asyncpg://prefect@/prefect?host=<socket folder>`.
"""

from __future__ import annotations

import contextlib
import glob
import grp
import os
import pwd
import secrets
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from erasure.child_env import child_env
from erasure.config import Home
from erasure.errors import ConfigError
from erasure.files import FILE_MODE
from erasure.service_user import acl_allow, add_to_group, ensure_system_user, let_through

DB_USER = "prefect"
DB_NAME = "prefect"
RUN_AS = "erasure-pg"  # when we are root: a system user of its own, never the shared `postgres`
PASSFILE = "postgres-prefect.pgpass"
START_TIMEOUT = 120
#: sun_path is 108 bytes on Linux, with its terminating NUL.
MAX_SOCKET_PATH = 107


@dataclass(frozen=True)
class Cluster:
    """Paths of the home's cluster."""

    root: Path
    keys_dir: Path

    @classmethod
    def of(cls, h: Home) -> Cluster:
        return cls(h.root / "postgres", h.keys_dir)

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

    @property
    def passfile(self) -> Path:
        """The `prefect` role's password, in libpq's passfile format (0600, in the home's keys)."""
        return self.keys_dir / PASSFILE

    @property
    def server_env(self) -> dict[str, str]:
        """What the Prefect server needs to reach its database: the URL and the passfile's path."""
        return {"PREFECT_API_DATABASE_CONNECTION_URL": self.url, "PGPASSFILE": str(self.passfile)}


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
    return ["runuser", "-u", _owner().pw_name, "--", *cmd]


def _owner() -> pwd.struct_passwd:
    """The cluster's OS user: ourselves, or as root `erasure-pg` (a system user, created when missing)."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    return ensure_system_user(RUN_AS)


def _superuser() -> str:
    """The cluster's superuser role: its OS user's name (`peer` authentication maps one to the other)."""
    return _owner().pw_name


def _run(cmd: list[str], what: str, timeout: float = START_TIMEOUT, sql: str | None = None) -> str:
    """Run a PostgreSQL tool as the cluster's owner, with the allowlisted environment; `sql` on stdin."""
    try:
        proc = subprocess.run(
            _as_owner(cmd),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=child_env(),
            input=sql,
            stdin=None if sql is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(f"PostgreSQL: {what} did not finish within {timeout:.0f} s") from None
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout or "no output").strip().splitlines()[-1]
        raise ConfigError(f"PostgreSQL: {what} failed (exit {proc.returncode}): {last}")
    return proc.stdout


def _give_to_owner(c: Cluster) -> None:
    """The cluster's folder belongs to its OS user, which must also be able to reach it."""
    c.root.mkdir(parents=True, exist_ok=True)
    c.socket_dir.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        c.root.chmod(0o700)
        c.socket_dir.chmod(0o700)
        return
    pw = _owner()
    for p in (c.root, c.socket_dir, c.log):
        with contextlib.suppress(FileNotFoundError):
            os.lchown(p, pw.pw_uid, pw.pw_gid)
    # The runs' user (erasure/service_user.py) reads the cluster's files through its group: the byte
    # scan covers every folder of the home, Prefect's database too (it must never hold an identifier).
    c.root.chmod(0o750)
    c.socket_dir.chmod(0o700)
    _group_readable(c.data)
    _let_postgres_through(c.root.parent, pw.pw_gid)
    let_through(c.root.parent.parent, pw.pw_uid)  # the folders above the home: traverse only, that user only
    blocked = next(
        (
            str(d)
            for d in [c.root.parent, *c.root.parent.parents]
            if subprocess.run(["runuser", "-u", pw.pw_name, "--", "test", "-x", str(d)], check=False).returncode != 0
        ),
        None,
    )
    if blocked is not None:
        raise ConfigError(
            f"the `{pw.pw_name}` user cannot reach {c.root}: {blocked} is closed to it "
            f"(chmod o+x {blocked}, or use an ERASURE_HOME it can reach)"
        )


def _group_readable(data: Path) -> None:
    """A cluster made before its files were group-readable (initdb without --allow-group-access): its
    folders get g+rx and its files g+r, as PostgreSQL itself would have made them (never anything for
    others); the server keeps group read for what it writes next, from the data folder's mode."""
    if not data.is_dir() or stat.S_IMODE(data.stat().st_mode) == 0o750:
        return
    for dirpath, dirs, files in os.walk(data):
        os.chmod(dirpath, 0o750)
        for name in files:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                os.chmod(path, (stat.S_IMODE(st.st_mode) & 0o700) | 0o040)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(dirpath, d))]


def _let_postgres_through(home: Path, gid: int) -> None:
    """The cluster's user must pass through the home (0700) to reach its own 0700 cluster folder inside: the
    home gets that user's group with traverse only (0710), never the world (an older version added o+x,
    which let every local user reach whatever in the home was not 0600/0700: it is taken back). A home
    someone else owns is left as it is unless we are root (the reachability check below names what blocks)."""
    st = home.stat()
    if st.st_uid != os.geteuid() and os.geteuid() != 0:
        return
    if st.st_gid != gid:
        os.chown(home, -1, gid)
    mode = stat.S_IMODE(st.st_mode) | 0o010
    if mode & 0o007 == 0o001:
        mode &= ~0o001
    home.chmod(mode)


def let_in(h: Home, uid: int) -> None:
    """As root: let the OS user `uid` (the one the Prefect server runs as, erasure/service_user.py) reach the
    cluster's socket and read its files, and no one else: read and traverse entries on the cluster and socket
    folders, read-write on the socket (made again at every start). It still needs the role's password."""
    c = Cluster.of(h)
    # The cluster's files are group-readable (--allow-group-access): the runs' user reads them as a member
    # of its user's group, for the byte scan of every folder of the home (Prefect's database too).
    owner = _owner()
    add_to_group(pwd.getpwuid(uid).pw_name, grp.getgrgid(owner.pw_gid).gr_name)
    try:
        # read and traverse: a named entry for the user outranks its group's (the byte scan lists every
        # folder of the home; a socket is no file)
        for path, perm in ((c.root, 5), (c.socket_dir, 5), (c.socket_dir / ".s.PGSQL.5432", 6)):
            acl_allow(path, uid, perm)
    except OSError as exc:
        raise ConfigError(
            f"cannot let the service user reach PostgreSQL's socket ({exc.strerror}): {exc.filename}"
        ) from None


def is_running(c: Cluster) -> bool:
    """True when `pg_ctl status` finds the cluster running."""
    if not (c.data / "PG_VERSION").exists():
        return False
    proc = subprocess.run(
        _as_owner([str(bindir() / "pg_ctl"), "-D", str(c.data), "status"]),
        capture_output=True,
        text=True,
        check=False,
        env=child_env(),
        stdin=subprocess.DEVNULL,
    )
    return proc.returncode == 0


HBA = """# Written by erasure (cli/postgres.py): anything not named here is rejected.
local all {superuser} peer
local {db} {user} scram-sha-256
"""


def start(h: Home) -> Cluster:
    """Create the cluster on first use (initdb, the `prefect` role and database), start it with pg_ctl on
    its Unix socket, and return it. Idempotent: a running cluster is left as it is; the role's settings
    and password (from its passfile, made when missing) are set again at every start."""
    c = Cluster.of(h)
    socket = c.socket_dir / ".s.PGSQL.5432"
    if len(str(socket)) > MAX_SOCKET_PATH:
        raise ConfigError(
            f"the PostgreSQL socket path {socket} is longer than {MAX_SOCKET_PATH} bytes: use a shorter ERASURE_HOME"
        )
    b = bindir()
    _refuse_older_cluster(c)
    _give_to_owner(c)
    fresh = not (c.data / "PG_VERSION").exists()
    if fresh:
        _run(
            [
                str(b / "initdb"),
                "-D",
                str(c.data),
                "-U",
                _superuser(),
                "--auth-local=peer",
                "--auth-host=reject",
                "--allow-group-access",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-instructions",
            ],
            "initdb",
        )
        hba = HBA.format(superuser=_superuser(), db=DB_NAME, user=DB_USER)
        _run(["sh", "-c", 'cat > "$0"', str(c.data / "pg_hba.conf")], "writing pg_hba.conf", sql=hba)
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
    _ensure_role(c, b, _password(c))
    return c


def _refuse_older_cluster(c: Cluster) -> None:
    """A cluster an older version made (Debian's `postgres` owns it, local connections trusted, `prefect`
    a superuser) is not taken over silently."""
    if not (c.data / "PG_VERSION").exists():
        return
    if c.data.stat().st_uid != _owner().pw_uid or "trust" in _hba_methods(c.data / "pg_hba.conf"):
        raise ConfigError(
            f"the PostgreSQL cluster in {c.root} was made by an older version (it runs as another user or "
            "trusts local connections): `erasure server stop`, move that folder away and start again "
            "(Prefect's run history there is not kept; see docs/security.md)"
        )


def _hba_methods(hba: Path) -> set[str]:
    try:
        lines = hba.read_text().splitlines()
    except OSError:
        return set()
    return {ln.split()[-1] for ln in lines if ln.strip() and not ln.lstrip().startswith("#")}


def _password(c: Cluster) -> str:
    """The `prefect` role's password, from its passfile (`*:*:prefect:prefect:<password>`), made when
    missing (0600, created exclusively)."""
    try:
        return c.passfile.read_text().strip().rsplit(":", 1)[1]
    except (FileNotFoundError, IndexError):
        pass
    password = secrets.token_hex(24)
    c.passfile.parent.mkdir(parents=True, exist_ok=True)
    c.passfile.unlink(missing_ok=True)
    fd = os.open(c.passfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        os.write(fd, f"*:*:{DB_NAME}:{DB_USER}:{password}\n".encode())
    finally:
        os.close(fd)
    return password


def _ensure_role(c: Cluster, b: Path, password: str) -> None:
    """The `prefect` role (no superuser, no role or database creation, its password) and its database,
    which it owns and PUBLIC may not connect to. SQL on stdin: the password is on no command line."""
    psql = [str(b / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(c.socket_dir), "-U", _superuser()]
    role = (
        f"DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{DB_USER}') "
        f"THEN CREATE ROLE {DB_USER}; END IF; END$$;\n"
        f"ALTER ROLE {DB_USER} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS "
        f"PASSWORD '{password}';\n"
    )
    _run([*psql, "-d", "postgres", "-f", "-"], "creating the prefect role", sql=role)
    if not _database_exists(c, b):
        _run([str(b / "createdb"), "-h", str(c.socket_dir), "-U", _superuser(), "-O", DB_USER, DB_NAME], "createdb")
    grants = f"REVOKE ALL ON DATABASE {DB_NAME} FROM PUBLIC;\nALTER DATABASE {DB_NAME} OWNER TO {DB_USER};\n"
    _run([*psql, "-d", "postgres", "-f", "-"], "the prefect database's grants", sql=grants)


def _database_exists(c: Cluster, b: Path) -> bool:
    out = _run(
        [
            str(b / "psql"),
            "-X",
            "-h",
            str(c.socket_dir),
            "-U",
            _superuser(),
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
