"""Running the real `erasure` command in a subprocess, as a service or another user meets it: a free
port on 127.0.0.1, an environment without this process's Prefect or erasure settings, the command."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from erasure.config import PROJECT_ROOT


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any Prefect or erasure setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ERASURE_"))}
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1", **extra)
    return env


def erasure(env: dict[str, str], *args: str, timeout: float = 300, umask: int = -1) -> subprocess.CompletedProcess[str]:
    """`erasure ARGS` in a subprocess with `env` (`umask`: the child's, -1 this process's)."""
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=PROJECT_ROOT,
        env=env,
        text=True,
        capture_output=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
        umask=umask,
    )


def pause_the_hourly_window() -> None:
    """Pause the `erasure-window` deployment of the Prefect API the settings point at (its schedule stays
    as prefect.yaml has it). Served as a user serves it, it erases every submitted request of the home at
    the top of each hour: a test that crossed the hour lost the requests it was about to run itself to
    that window (seen at 11:00). Pausing deletes the runs already scheduled."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        client.pause_deployment(client.read_deployment_by_name("erasure-window/erasure-window").id)
