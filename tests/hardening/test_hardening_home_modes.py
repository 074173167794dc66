"""Hardening (issue 23, item 11): nothing under the home is readable by other users, with the usual
umask 022 and with `--postgres`. `erasure server start --postgres` used to make the home world-
traversable (o+x) while `demo-subjects.json` (names, emails, phones), `server/state.json`, the server's
logs, session and corpus files were 0644 in 0755 folders: any local user read them. Now files are
0600 and folders 0700; the one folder the cluster's user (`erasure-pg`) needs to pass through, the home itself, is
0710 with its group, never open to the world.

Real commands in subprocesses (`erasure store init --demo`, `erasure server start --postgres`), a real
PostgreSQL cluster, and a real second OS user (`nobody`, through `runuser`) who tries to read."""

from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.process_fixtures import clean_env, erasure, free_port

pytestmark = pytest.mark.slow

START_TIMEOUT = 600
OTHER = "nobody"


def _erasure(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`erasure ARGS` in a subprocess started with the usual umask 022."""
    return erasure(env, *args, timeout=timeout, umask=0o022)


def _as_other_can_read(path: Path) -> bool:
    """Whether `nobody` can read `path` (a file: cat; a folder: ls)."""
    cmd = ["cat", str(path)] if path.is_file() else ["ls", str(path)]
    return (
        subprocess.run(
            ["runuser", "-u", OTHER, "--", *cmd], capture_output=True, check=False, stdin=subprocess.DEVNULL
        ).returncode
        == 0
    )


def _open_to_others(root: Path, allowed: dict[Path, int], group_reads: Path | None = None) -> list[str]:
    """Every file or folder under `root` (itself included) with any group or other permission bit,
    except the folders of `allowed` with exactly their mode, and, under `group_reads`, the group's read
    (and a folder's traverse) bits. The cluster's folder is walked like the rest."""
    bad: list[str] = []
    for dirpath, dirs, files in os.walk(root):
        for p in [Path(dirpath), *(Path(dirpath) / f for f in files)]:
            if p != Path(dirpath) and p.is_symlink():
                continue
            st = p.lstat()
            if stat.S_ISSOCK(st.st_mode):
                continue  # PostgreSQL's socket: its 0700 folder is what guards it
            mode = stat.S_IMODE(st.st_mode)
            if p in allowed:
                if mode != allowed[p]:
                    bad.append(f"{p.relative_to(root.parent)} {mode:04o} (want {allowed[p]:04o})")
            elif mode & (0o027 if group_reads is not None and p.is_relative_to(group_reads) else 0o077):
                bad.append(f"{p.relative_to(root.parent)} {mode:04o}")
        dirs[:] = [d for d in dirs if not (Path(dirpath) / d).is_symlink()]
        if Path(dirpath) == root / "prefect":  # its copy of Prefect's public UI bundle (the package's own modes)
            dirs[:] = [d for d in dirs if d != "ui"]
    return bad


@pytest.fixture(scope="module")
def open_parent() -> Iterator[Path]:
    """A folder of its own under /tmp that every user may pass through (0711), as /home or /srv are:
    what guards the home is then the home's own modes and nothing above it."""
    root = Path(tempfile.mkdtemp(prefix="erasure-modes-", dir="/tmp"))
    root.chmod(0o711)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def demo_home(open_parent: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    home = open_parent / "home"
    env = clean_env(ERASURE_HOME=str(home), ERASURE_EVIDENCE=str(open_parent / "evidence"))
    res = _erasure(env, "store", "init", "--demo", "--frames", "1000", "--subjects", "3", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    yield home, env


def test_a_demo_home_is_its_owners_only(demo_home: tuple[Path, dict[str, str]]) -> None:
    home, _env = demo_home
    subjects_file = home / "demo-subjects.json"
    assert subjects_file.is_file()
    sessions = list((home / "store").rglob("*.json"))
    corpora = [p for p in (home / "store").rglob("*.jsonl")]
    assert sessions and corpora, "the demo store writes session and corpus files"
    assert _open_to_others(home, {}) == []
    assert not _as_other_can_read(subjects_file)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None, reason="needs root and runuser")
def test_with_postgres_only_the_clusters_group_passes_through_the_home(demo_home: tuple[Path, dict[str, str]]) -> None:
    """The cluster's own system user (`erasure-pg`, issue 34), never Debian's shared `postgres`."""
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no PostgreSQL (make postgres)")
    home, env = demo_home
    res = _erasure(
        env,
        "server",
        "start",
        "--postgres",
        "--workers",
        "0",
        "--port",
        str(free_port()),
        "--json",
        timeout=START_TIMEOUT,
    )
    try:
        assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-2000:])
        state = home / "server" / "state.json"
        logs = list((home / "server").rglob("*.log"))
        assert state.is_file() and logs
        # nobody else reads what names people or what the server logs
        for p in [home / "demo-subjects.json", state, *logs]:
            assert not _as_other_can_read(p), p
        st = home.stat()
        assert stat.S_IMODE(st.st_mode) == 0o710, oct(st.st_mode)
        assert st.st_gid == pwd.getpwnam("erasure-pg").pw_gid, grp.getgrgid(st.st_gid).gr_name
        # the cluster's folder and socket folder: the Prefect server's user (erasure-svc) reads and passes
        # through by an ACL entry of its own (the mask shows as the group's r-x); the cluster's files are
        # its group's to read (--allow-group-access: the runs' user is a member, for the byte scan), never
        # anyone else's
        cluster = {home / "postgres": 0o750, home / "postgres" / "run": 0o750}
        assert _open_to_others(home, {home: 0o710, **cluster}, group_reads=home / "postgres") == []
        members = grp.getgrgid(pwd.getpwnam("erasure-pg").pw_gid).gr_mem
        assert members == ["erasure-svc"], members  # never Debian's postgres, never anyone else
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):
            _erasure(env, "server", "stop", timeout=120)
    # the server really ran on PostgreSQL through that 0710 home
    assert json.loads(res.stdout).get("api_url", "").startswith("http://127.0.0.1:")
