"""Issue 23, item 13: two commands at once in a new home.

Two `erasure request run` started together in a home whose Prefect database is new: one exited 3,
"Prefect's database migrations failed" (both ran Prefect's migrations on the same new SQLite file).
The first-run migration now takes a lock: the second command waits for the first's migration, then
finds the database ready.

The cheapest command that migrates: `erasure request run` of a request that does not exist. It prepares
Prefect (migrating a new database) before it looks the request up, then exits 4 (not found): so both
must exit 4, neither 3. Real subprocesses, a brand-new ERASURE_HOME each time.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from erasure.config import PROJECT_ROOT

pytestmark = pytest.mark.prefect  # `erasure request run` in new homes migrates Prefect's database

ROUNDS = 3
AT_ONCE = 2


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ERASURE_"))}
    env.update(
        ERASURE_HOME=str(root / "home"),
        ERASURE_EVIDENCE=str(root / "evidence"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
    )
    return env


def _start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", *args],
        cwd=PROJECT_ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_two_request_runs_at_once_in_a_brand_new_home(tmp_path: Path, round_: int) -> None:
    env = _env(tmp_path)
    # As in the home: a store, a key, and the engine's database (requests were submitted there);
    # only Prefect's database is new.
    for args in (("store", "init"), ("keys", "generate", "--role", "engine"), ("request", "list")):
        ready = subprocess.run(
            [sys.executable, "-m", "cli.main", *args],
            cwd=PROJECT_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert ready.returncode == 0, ready.stderr
    prefect_home = tmp_path / "home" / "prefect"
    assert not (prefect_home / "prefect.db").exists()

    procs = [_start(env, "request", "run", f"req-none-{round_}-{i}") for i in range(AT_ONCE)]
    results = [(p.wait(timeout=600), *p.communicate()) for p in procs]

    for rc, out, err in results:
        assert "migrations failed" not in err, err
        assert rc == 4, (rc, out, err)
    db = sqlite3.connect(prefect_home / "prefect.db")
    try:
        (revision,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
    finally:
        db.close()
    assert revision
