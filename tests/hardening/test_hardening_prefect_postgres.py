"""Issue 34, finding 3: Prefect's PostgreSQL (`erasure server start --postgres`) trusted local
connections. The cluster ran as Debian's shared `postgres` OS user with `trust`, the `prefect` role was a
superuser, and that account rewrote the work pool's template in SQL; the next run wrote `uid=0`.

The attack, as it happened: the home's cluster, started the way `server start --postgres` starts it
(cli/postgres.py), then `psql` as the OS user `postgres` against its socket, as every role that could
serve (`prefect`, the cluster's superuser, `postgres`). None gets in. Also checked: the cluster's
processes run as its own system user, not `postgres`; `pg_hba.conf` trusts nobody; the `prefect` role
(reached with its passfile, as the Prefect server reaches it) is no superuser and reaches only its
database.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from erasure.config import Home

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Home, Path]]:
    from cli import postgres as pg

    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root and runuser to act as the OS user postgres")
    try:
        pg.bindir()
        import pwd

        pwd.getpwnam("postgres")
    except (KeyError, Exception):
        pytest.skip("needs Debian's postgresql package (its `postgres` user is the attacker)")
    root = Path(tempfile.mkdtemp(prefix="h34pg-", dir="/tmp"))
    root.chmod(0o711)
    h = Home.resolve(root / "h", root / "ev").ensure()
    pg.start(h)
    try:
        yield h, pg.Cluster.of(h).socket_dir
    finally:
        pg.stop(h)
        shutil.rmtree(root, ignore_errors=True)


def _psql_as(
    os_user: str | None, socket: Path, role: str, db: str, sql: str, **env: str
) -> subprocess.CompletedProcess[str]:
    from cli import postgres as pg

    cmd = [str(pg.bindir() / "psql"), "-X", "-w", "-h", str(socket), "-U", role, "-d", db, "-tAc", sql]
    if os_user is not None:
        cmd = [shutil.which("runuser") or "/usr/sbin/runuser", "-u", os_user, "--", *cmd]
    base = {"PATH": "/usr/bin:/bin", **env}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, env=base, cwd="/")


@pytest.mark.parametrize("role", ["prefect", "erasure-pg", "postgres"])
def test_the_postgres_os_user_cannot_reach_prefects_database(cluster: tuple[Home, Path], role: str) -> None:
    _h, socket = cluster
    res = _psql_as("postgres", socket, role, "prefect", "SELECT current_user")
    assert res.returncode != 0, f"the postgres OS user got in as {role}: {res.stdout!r}"


def test_the_cluster_runs_as_its_own_user_and_trusts_nobody(cluster: tuple[Home, Path]) -> None:
    import pwd

    from cli import postgres as pg

    c = pg.Cluster.of(cluster[0])
    pid = int((c.data / "postmaster.pid").read_text().split()[0])
    uid = os.stat(f"/proc/{pid}").st_uid
    assert uid != pwd.getpwnam("postgres").pw_uid
    assert pwd.getpwuid(uid).pw_name == pg.RUN_AS
    methods = {ln.split()[-1] for ln in (c.data / "pg_hba.conf").read_text().splitlines() if ln and ln[0] != "#"}
    assert "trust" not in methods


def test_the_prefect_role_is_no_superuser_and_reaches_only_its_database(cluster: tuple[Home, Path]) -> None:
    from cli import postgres as pg

    h, socket = cluster
    passfile = pg.Cluster.of(h).passfile
    assert oct(passfile.stat().st_mode & 0o777) == "0o600"
    res = _psql_as(
        None,
        socket,
        "prefect",
        "prefect",
        "SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user",
        PGPASSFILE=str(passfile),
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "f|f|f"
    other = _psql_as(None, socket, "prefect", "postgres", "SELECT 1", PGPASSFILE=str(passfile))
    assert other.returncode != 0
    nopass = _psql_as(None, socket, "prefect", "prefect", "SELECT 1")
    assert nopass.returncode != 0  # root without the password: refused too (no trust, no peer for prefect)
