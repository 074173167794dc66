"""Issue 34, finding 1, what is left: on a machine where root starts the server (a service's unit, a
container, CI), every flow run executed as root. The worker left root only when the home already belonged
to another user; `server start` created none, so a root-run home ran its flows as uid 0, and anyone who
got code into a run (or a credential holder who found a way) had root.

Here a real `erasure server start`, run as root on a home root made (the way an operator sets one up),
then a run of `sla-monitor` created through the server's API: the run writes its metrics textfile
(temp file, then rename: the file is the run's own), whose owner is the run's effective uid. The server
and worker processes are read from /proc. A second start reuses the service user, and the commands a
root operator runs on the home afterwards act as that user too, so what they write stays the runs'.
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from erasure.config import Home
from erasure.errors import ConfigError
from erasure.service_user import SERVICE_USER, ensure_system_user, take_home
from tests.hardening.test_hardening_server_auth import Server, deployment_id, operator_client, wait_final
from tests.process_fixtures import clean_env, erasure, free_port

START_TIMEOUT = 600


@pytest.fixture(scope="module")
def root_server() -> Iterator[Server]:
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root (and useradd): the attack is a root-started server")
    from proof.keys import generate_keypair

    root = Path(tempfile.mkdtemp(prefix="erasure-h34-root-", dir="/tmp"))  # 0700: closed to the service user
    h = Home.resolve(root / "home", root / "evidence").ensure()
    generate_keypair("engine", h.keys_dir)
    assert h.root.stat().st_uid == 0
    env = clean_env(ERASURE_HOME=str(h.root), ERASURE_EVIDENCE=str(h.evidence_root))
    res = erasure(env, "server", "start", "--port", str(free_port()), "--json", timeout=START_TIMEOUT)
    if res.returncode != 0:
        erasure(env, "server", "stop")
        shutil.rmtree(root, ignore_errors=True)
        raise AssertionError(f"erasure server start failed:\n{res.stdout}\n{res.stderr}")
    srv = Server(root, h, json.loads(res.stdout)["api_url"], env)
    try:
        yield srv
    finally:
        erasure(env, "server", "stop")
        shutil.rmtree(root, ignore_errors=True)


def _uids(pid: int) -> list[int]:
    """Real, effective, saved and file-system uids of a process."""
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("Uid:"))
    return [int(x) for x in line.split()[1:]]


def _textfile(h: Home) -> Path:
    return h.root / "metrics" / "erasure_sla.prom"


@pytest.mark.prefect
def test_a_flow_run_on_a_home_root_set_up_does_not_run_as_root(root_server: Server) -> None:
    h = root_server.home
    _textfile(h).unlink(missing_ok=True)
    with operator_client(root_server) as c:
        r = c.post(f"/deployments/{deployment_id(root_server, 'sla-monitor')}/create_flow_run", json={})
        r.raise_for_status()
        run = wait_final(root_server, r.json()["id"])
    assert run["state"]["type"] == "COMPLETED", run["state"]
    uid = _textfile(h).stat().st_uid
    assert uid != 0, "the flow run executed as root"
    assert pwd.getpwuid(uid).pw_name == SERVICE_USER
    groups = subprocess.run(["id", "-G", SERVICE_USER], capture_output=True, text=True, check=True).stdout.split()
    # no supplementary group of root's or any other: its own, and where a home runs Prefect on PostgreSQL,
    # the cluster's (read-only access to its files, for the byte scan; cli/postgres.py `let_in`)
    allowed = {str(pwd.getpwnam(SERVICE_USER).pw_gid)}
    with contextlib.suppress(KeyError):
        allowed.add(str(grp.getgrnam("erasure-pg").gr_gid))
    assert groups[0] == str(pwd.getpwnam(SERVICE_USER).pw_gid) and set(groups) <= allowed, groups


@pytest.mark.prefect
def test_the_server_and_its_worker_hold_no_root_id(root_server: Server) -> None:
    st = json.loads((root_server.home.root / "server" / "state.json").read_text())
    svc = pwd.getpwnam(SERVICE_USER).pw_uid
    for pid in [st["server_pid"], *st["worker_pids"]]:
        assert _uids(pid) == [svc] * 4, pid


@pytest.mark.prefect
def test_the_home_is_the_service_users_and_its_secrets_stay_private(root_server: Server) -> None:
    h = root_server.home
    svc = pwd.getpwnam(SERVICE_USER).pw_uid
    for key in ("engine.pem", "prefect-api.auth"):
        st = (h.keys_dir / key).stat()
        assert (st.st_uid, st.st_mode & 0o777) == (svc, 0o600), key
    assert h.engine_dir.stat().st_uid == svc
    nobody = subprocess.run(["runuser", "-u", "nobody", "--", "cat", str(h.keys_dir / "engine.pem")], check=False)
    assert nobody.returncode != 0


@pytest.mark.prefect
def test_a_second_start_reuses_the_service_user(root_server: Server) -> None:
    before = pwd.getpwnam(SERVICE_USER)
    res = erasure(root_server.env, "server", "start", "--json", timeout=START_TIMEOUT)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["already_running"] and doc["runs_as"] == SERVICE_USER
    assert pwd.getpwnam(SERVICE_USER) == before
    lines = [ln for ln in Path("/etc/passwd").read_text().splitlines() if ln.startswith(f"{SERVICE_USER}:")]
    assert len(lines) == 1


@pytest.mark.prefect
def test_a_root_operators_command_writes_as_the_service_user(root_server: Server) -> None:
    """`erasure store init` run by root on the home: the new store is the runs' (they erase in it)."""
    h = root_server.home
    res = erasure(root_server.env, "store", "init")
    assert res.returncode == 0, res.stdout + res.stderr
    made = [h.store_db, *h.store_dir.iterdir()]
    svc = pwd.getpwnam(SERVICE_USER).pw_uid
    assert h.store_db.exists() and {p.stat().st_uid for p in made} == {svc}


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: giving a home away is root's")


@needs_root
def test_giving_the_home_follows_no_link_a_run_planted(tmp_path: Path) -> None:
    """A run (the home's user) plants a symbolic link and a hard link to root's files in the home; the next
    root `server start` gives the home again, and root's files stay root's."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret, other = outside / "shadow", outside / "other"
    secret.write_text("root's")
    other.write_text("root's too")
    h = Home.resolve(tmp_path / "home", tmp_path / "evidence").ensure()
    (h.store_dir / "link").symlink_to(secret)
    (h.store_dir / "dir-link").symlink_to(outside, target_is_directory=True)
    os.link(other, h.store_dir / "hard")
    pw = take_home(h)
    assert pw.pw_name == SERVICE_USER
    assert h.store_dir.stat().st_uid == pw.pw_uid
    assert (secret.stat().st_uid, other.stat().st_uid, outside.stat().st_uid) == (0, 0, 0)
    assert (h.store_dir / "link").lstat().st_uid == pw.pw_uid  # the link itself, harmless


@needs_root
@pytest.mark.parametrize("name", ["passwd", ".bashrc"])
def test_a_folder_that_is_not_a_home_is_not_given_away(tmp_path: Path, name: str) -> None:
    """`--home /etc` by mistake, as root: nothing of it changes hands."""
    ensure_system_user(SERVICE_USER)
    folder = tmp_path / "etc"
    folder.mkdir(mode=0o755)
    (folder / name).write_text("x")
    (folder / name).chmod(0o644)
    h = Home.resolve(folder, tmp_path / "evidence")
    with pytest.raises(ConfigError, match="does not look like an erasure home"):
        take_home(h)
    assert {p.stat().st_uid for p in [folder, *folder.iterdir()]} == {0}
