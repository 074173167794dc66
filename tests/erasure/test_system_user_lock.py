"""Two root `server start`s at once (or an administrator's `useradd` meanwhile) never fail on the account
files' lock: the system-user helper (erasure/service_user.py) waits for the lock and tries again, where it
ended with "cannot create the system user: useradd: cannot lock /etc/passwd; try again later.".

The lock is taken the way shadow's own tools take it: a `/etc/passwd.lock` (or `/etc/group.lock`) holding a
live process's pid, released after a while by a second thread, as a concurrent `useradd` releases it."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import secrets
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from erasure.service_user import add_to_group, ensure_system_user

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating system users needs root")


@contextlib.contextmanager
def locked_for(lock: Path, seconds: float) -> Iterator[None]:
    """Hold shadow's lock file `lock` (our pid in it, as lckpwdf's holders write) for `seconds`."""
    mine = str(os.getpid())

    def release() -> None:  # only our own lock: once released, a useradd may hold one of its own there
        with contextlib.suppress(FileNotFoundError):
            if lock.read_text() == mine:
                lock.unlink()

    lock.write_text(mine)
    released = threading.Timer(seconds, release)
    released.start()
    try:
        yield
    finally:
        released.cancel()
        release()


@pytest.fixture
def user_name() -> Iterator[str]:
    name = f"erasure-lk{secrets.token_hex(3)}"
    yield name
    subprocess.run(["userdel", name], capture_output=True, check=False)
    subprocess.run(["groupdel", name], capture_output=True, check=False)


def test_a_system_user_is_created_once_the_account_files_lock_is_released(user_name: str) -> None:
    with locked_for(Path("/etc/passwd.lock"), 1.5):
        pw = ensure_system_user(user_name)
    assert pwd.getpwnam(user_name).pw_uid == pw.pw_uid


def test_a_user_joins_a_group_once_the_group_files_lock_is_released(user_name: str) -> None:
    ensure_system_user(user_name)
    with locked_for(Path("/etc/group.lock"), 1.5), locked_for(Path("/etc/passwd.lock"), 1.5):
        add_to_group(user_name, "nogroup")
    assert user_name in grp.getgrnam("nogroup").gr_mem


def test_two_starts_at_once_make_one_user(user_name: str) -> None:
    uids: list[int] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            uids.append(ensure_system_user(user_name).pw_uid)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    with locked_for(Path("/etc/passwd.lock"), 0.5):
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not errors, errors
    assert len(set(uids)) == 1 and len(uids) == 4
