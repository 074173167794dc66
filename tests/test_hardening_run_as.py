"""Issue 34: runs execute as the home's owner, not as root. When `erasure server start` runs as root and
the home belongs to a service account, the worker (and so every flow run, its child) is started as that
account with no supplementary group (cli/run_as.py). Checked with a real process started with the same
keywords the worker gets, in a home given to `nobody`; and a root-owned home keeps today's behaviour.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cli.run_as import worker_env, worker_user
from erasure.config import Home


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as another user")
def test_a_root_started_worker_runs_as_the_homes_owner_not_root(tmp_path: Path) -> None:
    h = Home.resolve(tmp_path / "home", tmp_path / "evidence").ensure()
    shutil.chown(h.root, "nobody", "nogroup" if _has_group("nogroup") else None)
    kw = worker_user(h)
    env = worker_env(h, {"PATH": "/usr/bin:/bin"})
    out = subprocess.run(["/bin/sh", "-c", "id -u; id -G"], capture_output=True, text=True, check=True, env=env, **kw)
    uid, groups = out.stdout.split("\n", 1)
    assert int(uid) == h.root.stat().st_uid != 0
    assert "0" not in groups.split()  # root's group is not kept
    assert Path(env["PREFECT_HOME"]).stat().st_uid == int(uid)  # the worker's own Prefect home, its own


def test_a_root_owned_home_is_left_as_it_is(tmp_path: Path) -> None:
    h = Home.resolve(tmp_path / "home", tmp_path / "evidence").ensure()
    if h.root.stat().st_uid == 0 or os.geteuid() != 0:
        assert worker_user(h) == {}
        assert worker_env(h, {"A": "1"}) == {"A": "1"}


def _has_group(name: str) -> bool:
    import grp

    try:
        grp.getgrnam(name)
        return True
    except KeyError:
        return False
