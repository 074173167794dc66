"""Issue 34, finding 7: a Chroma target's `start` command (and its `stop` and `stopped_check`) inherited
the whole run environment, the Prefect credential and the PostgreSQL password variable among it; a
`runuser -u chroma -- chroma run` start handed both to another user's long-lived process.

The attack, as it happens: the run's environment holds the secrets, the target's server is quiesced
(`erasure.server_control.quiesced`, what the erasure and the probes do) and its real `start` command,
a process of its own, writes down the environment it was given. The class: any variable name, holding
any value, that is not one of the few plain settings a program needs (oracle below, written apart from
the product's list) never reaches the command.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure.server_control import ServerControl, quiesced
from tests.budget import examples

#: What a command may see, decided here and not read from the product: no name that could hold a secret.
HARMLESS = {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM"}
HARMLESS_PREFIXES = ("LC_",)
SECRET = "s3cr3t-value-that-must-not-leak"


def _free_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _env_seen_by_start(tmp: Path) -> dict[str, str]:
    """Quiesce a (stopped) server whose `start` command dumps its environment; what it saw."""
    out = tmp / "start-env"
    out.unlink(missing_ok=True)
    control = ServerControl(
        target="agent-vectors",
        url=_free_url(),
        stop=("true",),
        start=("sh", "-c", 'env -0 > "$0"', str(out)),
        stop_wait_seconds=2.0,
        start_wait_seconds=0.3,
    )
    with quiesced(control, "the erasure") as window:
        pass
    assert window.start_error is not None  # nothing answers the heartbeat: the command did run, though
    pairs = [p.split("=", 1) for p in out.read_bytes().decode().split("\0") if p]
    return {k: v for k, v in pairs}


@contextmanager
def _environ(extra: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(extra)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_a_chroma_start_command_sees_no_prefect_credential_or_postgres_password(tmp_path: Path) -> None:
    secrets = {
        "PREFECT_API_AUTH_STRING": SECRET,
        "PREFECT_SERVER_API_AUTH_STRING": SECRET,
        "PGPASSWORD": SECRET,
        "LANGGRAPH_PG_PASSWORD": SECRET,
        "PREFECT_API_DATABASE_CONNECTION_URL": f"postgresql+asyncpg://prefect:{SECRET}@/prefect",
    }
    with _environ(secrets):
        seen = _env_seen_by_start(tmp_path)
    assert SECRET not in "\n".join(f"{k}={v}" for k, v in seen.items())
    assert not set(secrets) & set(seen)
    assert seen.get("PATH")  # a command still finds its programs


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.from_regex(r"\A[A-Z_][A-Z0-9_]{0,30}\Z", fullmatch=True),
    value=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=40),
)
def test_no_run_variable_but_a_plain_setting_reaches_a_server_command(tmp_path: Path, name: str, value: str) -> None:
    if name in HARMLESS or name.startswith(HARMLESS_PREFIXES):
        return
    with _environ({name: value}):
        seen = _env_seen_by_start(tmp_path)
    assert name not in seen


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a command as another user")
def test_a_start_command_run_as_another_user_gets_no_secret(tmp_path: Path) -> None:
    """`runuser -u nobody -- …` as the start command: the other user's process holds no secret."""
    shared = Path(tempfile.mkdtemp(prefix="child-env-"))  # /tmp: a folder `nobody` reaches
    shared.chmod(0o777)
    out = shared / "nobody-env"
    control = ServerControl(
        target="agent-vectors",
        url=_free_url(),
        stop=("true",),
        start=("runuser", "-u", "nobody", "--", "sh", "-c", 'env -0 > "$0"', str(out)),
        stop_wait_seconds=2.0,
        start_wait_seconds=0.3,
    )
    with _environ({"PREFECT_API_AUTH_STRING": SECRET, "PGPASSWORD": SECRET}), quiesced(control, "the erasure"):
        pass
    try:
        assert out.exists() and SECRET.encode() not in out.read_bytes()
    finally:
        shutil.rmtree(shared)
