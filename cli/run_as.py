"""Whom the worker, and so every flow run, runs as: the home's owner, never root when root starts it.

`erasure server start` and `erasure serve` are often run as root (a service's unit, a container). The
Prefect server needs nothing of root either, but the worker is what executes runs: when we are root and
the home belongs to another OS user (the service account that owns the store, the engine database, the
keys and the evidence), the worker is started as that user, with no supplementary group. When the home
is root's own, runs stay root's: give the home to a service account (`chown -R erasure: $ERASURE_HOME`,
docs/security.md) so that they are not.
"""

from __future__ import annotations

import os
import pwd
from typing import Any

from erasure.config import Home


def worker_user(h: Home) -> dict[str, Any]:
    """`subprocess.Popen` keyword arguments that start a process as the home's owner (when we are root
    and the owner is not), else none."""
    if os.geteuid() != 0:
        return {}
    st = h.root.stat()
    if st.st_uid == 0:
        return {}
    return {"user": st.st_uid, "group": st.st_gid, "extra_groups": []}


def worker_env(h: Home, env: dict[str, str]) -> dict[str, str]:
    """The worker's environment as the home's owner: that user's HOME (a worker keeps its Prefect profile
    and caches there), and a Prefect home of its own in the home (the server's database in
    `<home>/prefect` stays root's)."""
    kw = worker_user(h)
    if not kw:
        return env
    try:
        home_dir = pwd.getpwuid(kw["user"]).pw_dir
    except KeyError:
        home_dir = str(h.root)
    ph = h.root / "prefect-worker"
    ph.mkdir(mode=0o700, exist_ok=True)
    os.chown(ph, kw["user"], kw["group"])
    return {**env, "HOME": home_dir if os.path.isdir(home_dir) else str(h.root), "PREFECT_HOME": str(ph)}
