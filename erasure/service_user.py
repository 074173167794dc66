"""Who runs what when root starts the home's server: runs never need root (issue 34).

Root is needed only to set up: create the system users, give the home to its user, start PostgreSQL as
`erasure-pg`. Everything that touches the home's data (the Prefect server, the worker and so every flow
run, the request desk, and every other `erasure` command a root operator runs on the home) runs as the
home's owner: an account the operator gave the home to (`chown -R erasure: $ERASURE_HOME`), or else
`erasure-svc`, a system user `erasure server start` creates and gives the home to (`take_home`).

- `ensure_system_user`: the one way a system user is made (`erasure-svc` here, `erasure-pg` for
  PostgreSQL): no login, no home folder, a group of its own; reused when it exists.
- `take_home`: the home (but its `postgres/`, which is `erasure-pg`'s) and `<evidence>/erasure` are
  given to that user, files through a descriptor walk that never follows a link nor changes a file
  with more than one name; the folders it must pass through to reach them, the project and the Python
  interpreter get a traverse-only ACL entry for that user where they are closed to it.
- `become_home_owner`: a root process on a home owned by another user becomes that user (all ids,
  no supplementary group) for good, so what it writes stays readable by the runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import grp
import os
import pwd
import shutil
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from erasure.config import PROJECT_ROOT, Home
from erasure.errors import ConfigError

SERVICE_USER = "erasure-svc"
"""The system user runs execute as when root starts the server on a home root owns."""
_CLUSTER = "postgres"
"""The home's folder of Prefect's PostgreSQL cluster (cli/postgres.py): its own OS user's (`erasure-pg`),
readable by the runs' user through that user's group."""
_KEEP = (_CLUSTER,)
"""Folders of the home that stay their own user's."""
_SHARED_NAMES = ("targets.toml", "demo-subjects.json")
"""Files of a home that people write, readable by others as their umask made them."""


def ensure_system_user(name: str) -> pwd.struct_passwd:
    """The system user `name`, created when missing (`useradd --system`, its own group, no home folder,
    no login shell). Idempotent: an existing user is reused as it is; two processes creating it at once
    make one user (`_accounts_lock`)."""
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(name)
    with _accounts_lock():
        with contextlib.suppress(KeyError):  # made meanwhile by the process that held the lock
            return pwd.getpwnam(name)
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        nologin = shutil.which("nologin") or "/usr/sbin/nologin"
        cmd = [
            useradd,
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            nologin,
        ]
        done = _account_tool([*cmd, name])
        if done.returncode != 0 and "already exists" not in done.stderr:
            raise ConfigError(f"cannot create the system user `{name}`: {done.stderr.strip()}")
        return pwd.getpwnam(name)


ACCOUNTS_LOCK = Path("/run/lock/erasure-accounts.lock")
"""Serialises this product's own useradd/usermod calls: shadow's tools do not always exclude each other
(seen here: four `useradd` of one name at once, three exited 0 and the uid read back changed between
them)."""


@contextlib.contextmanager
def _accounts_lock() -> Iterator[None]:
    path = ACCOUNTS_LOCK if ACCOUNTS_LOCK.parent.is_dir() else Path("/tmp") / ACCOUNTS_LOCK.name
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _account_tool(cmd: list[str], wait: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run useradd/usermod; while another process (an administrator's tool) holds the account files'
    lock ("cannot lock /etc/passwd; try again later."), try again for up to `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode == 0 or "try again later" not in done.stderr or time.monotonic() > deadline:
            return done
        time.sleep(0.2)


def add_to_group(user: str, group: str) -> None:
    """`user` becomes a member of `group` (`usermod -a -G`; idempotent): read access to what that group may
    read, for every process that user starts, however it is started (`become`, runuser, su)."""
    with _accounts_lock():
        with contextlib.suppress(KeyError):
            if user in grp.getgrnam(group).gr_mem:
                return
        usermod = shutil.which("usermod") or "/usr/sbin/usermod"
        done = _account_tool([usermod, "-a", "-G", group, user])
        if done.returncode != 0:
            raise ConfigError(f"cannot add `{user}` to the group `{group}`: {done.stderr.strip()}")


def home_owner(h: Home) -> pwd.struct_passwd | None:
    """The user a root process on this home acts as: its owner when that is not root; None when we are
    not root, the home is root's or does not exist yet."""
    if os.geteuid() != 0:
        return None
    try:
        uid = h.root.stat().st_uid
    except OSError:  # not there yet, or not a folder: `Home.ensure` says so
        return None
    if uid == 0:
        return None
    try:
        return pwd.getpwuid(uid)
    except KeyError:
        return pwd.struct_passwd((str(uid), "x", uid, uid, "", str(h.root), "/usr/sbin/nologin"))


def take_home(h: Home) -> pwd.struct_passwd:
    """As root: the user runs execute as (the home's owner, else `erasure-svc`, created when missing),
    given the home and the evidence folder, and let through to them, the project and the interpreter.
    Idempotent: run at every `server start`, it also gives back what a root process made since."""
    pw = home_owner(h) or ensure_system_user(SERVICE_USER)
    h.root.mkdir(parents=True, exist_ok=True)
    h.evidence_root.mkdir(parents=True, exist_ok=True)
    _refuse_foreign(h.root)
    _give(h.root, pw.pw_uid, keep=_KEEP)
    (h.evidence_root / "erasure").mkdir(mode=0o700, exist_ok=True)  # runs write only there (`Home.evidence_dir`)
    _give(h.evidence_root / "erasure", pw.pw_uid)  # the evidence folder itself may be shared: not given
    interpreter = Path(sys.executable)
    for path in (h.root, h.evidence_root, PROJECT_ROOT, interpreter.parent, interpreter.resolve().parent):
        let_through(path, pw.pw_uid)
    return pw


def become_home_owner(h: Home) -> pwd.struct_passwd | None:
    """When root and the home belongs to another user: become that user for the rest of this process
    (`become`). Returns the user, or None when nothing changed."""
    pw = home_owner(h)
    if pw is not None:
        become(pw, h)
    return pw


def runs_as() -> str:
    """This process's user name (after `become`: the one every run it starts executes as)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"


def become(pw: pwd.struct_passwd, h: Home) -> None:
    """Drop every privilege of root for good: `pw`'s own groups (none of root's), its group and user as
    real, effective and saved ids; HOME, USER, LOGNAME and PREFECT_HOME follow
    (HOME: its own, or the home when it has none)."""
    os.initgroups(pw.pw_name, pw.pw_gid)  # its own groups only: with PostgreSQL, the cluster's (add_to_group)
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)
    home_dir = pw.pw_dir if os.path.isdir(pw.pw_dir) and os.access(pw.pw_dir, os.W_OK) else str(h.root)
    # Prefect's own home too: one named in the environment (root's) is not this user's to read.
    os.environ.update(
        {"HOME": home_dir, "USER": pw.pw_name, "LOGNAME": pw.pw_name, "PREFECT_HOME": str(h.prefect_home)}
    )


def _refuse_foreign(root: Path) -> None:
    """A home holds only what the product made (private: no one else may read or write it) and the files
    people write into it: a folder holding anything else (`--home /etc`, a user's own folder) is not
    given away."""
    for entry in os.scandir(root):
        mode = entry.stat(follow_symlinks=False).st_mode
        if entry.name == _CLUSTER and not mode & 0o007:  # Prefect's PostgreSQL: its group reads it (0750)
            continue
        if mode & 0o066 and entry.name not in _SHARED_NAMES:
            raise ConfigError(
                f"{root} does not look like an erasure home ({entry.name} is not the product's): it is not given "
                "to the service user; use a home of its own, or give it yourself (chown -R USER: HOME)"
            )


@contextlib.contextmanager
def acting_as(pw: pwd.struct_passwd | None) -> Iterator[None]:
    """Root acting as `pw` for a while (its effective uid only; root again after): what it signals then
    is only that user's (a pid the user's own files name is never another user's process)."""
    if pw is None or os.geteuid() != 0:
        yield
        return
    os.seteuid(pw.pw_uid)
    try:
        yield
    finally:
        os.seteuid(0)


def _give(top: Path, uid: int, keep: tuple[str, ...] = ()) -> None:
    """Every folder and file under `top` owned by `uid` (the group is left as it is: everything is 0600
    or 0700, and the home's group lets PostgreSQL through). A descriptor walk: a link is changed itself,
    never followed; a file with more than one name (a hard link someone made to a file elsewhere) is
    left as it is; `keep`: top-level names not entered."""
    _own(top, uid)
    for dirpath, dirnames, filenames, dirfd in os.fwalk(top, follow_symlinks=False):
        if Path(dirpath) == top:
            dirnames[:] = [d for d in dirnames if d not in keep]
        for name in (*dirnames, *filenames):
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                if st.st_uid == uid or (stat.S_ISREG(st.st_mode) and st.st_nlink > 1):
                    continue
                os.chown(name, uid, -1, dir_fd=dirfd, follow_symlinks=False)


def _own(path: Path, uid: int) -> None:
    if path.lstat().st_uid != uid:
        os.chown(path, uid, -1, follow_symlinks=False)


# POSIX ACL extended attribute (linux/posix_acl_xattr.h): a version, then (tag, perm, id) entries.
_ACL_XATTR = "system.posix_acl_access"
_ACL_VERSION = 2
_USER_OBJ, _USER, _GROUP_OBJ, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x10, 0x20
_NO_ID = 0xFFFFFFFF
_ENTRY = struct.Struct("<HHI")


def let_through(path: Path, uid: int) -> None:
    """Let `uid` reach `path`: each folder above it (and it, when a folder) that `uid` cannot pass gets a
    traverse-only (x) ACL entry for `uid`, nothing for anyone else. `ConfigError` when that cannot be done
    (a file system without ACLs): it names the folder to open."""
    target = path.resolve()
    for d in reversed([target, *target.parents]):
        if not d.is_dir() or _passes(d.stat(), uid):
            continue
        try:
            acl_allow(d, uid, 1)
        except OSError as exc:
            raise ConfigError(
                f"the service user (uid {uid}) cannot reach {target}: {d} is closed to it and its ACL "
                f"cannot be set ({exc.strerror}); let it through (setfacl -m u:{uid}:x {d}) or move the folder"
            ) from None


def _passes(st: os.stat_result, uid: int) -> bool:
    """Whether `uid` (with no supplementary group) may traverse a folder with this status: its owner, the
    world's x bit (an ACL entry already there is added again, which changes nothing)."""
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    return bool(st.st_mode & stat.S_IXOTH)


def acl_allow(path: Path, uid: int, perm: int) -> None:
    """Add `perm` (rwx bits, 0-7) for `uid` to `path`'s access ACL (the mask widened to let it through;
    the owning group's own entry is unchanged). `OSError` when the file system has no ACLs."""
    d = path
    mode = d.stat().st_mode
    try:
        raw = os.getxattr(d, _ACL_XATTR, follow_symlinks=False)
        entries = [_ENTRY.unpack_from(raw, 4 + i * _ENTRY.size) for i in range((len(raw) - 4) // _ENTRY.size)]
    except OSError as exc:
        if exc.errno not in (61, 95):  # ENODATA: none yet; EOPNOTSUPP: reported by the set below
            raise
        entries = [
            (_USER_OBJ, (mode >> 6) & 7, _NO_ID),
            (_GROUP_OBJ, (mode >> 3) & 7, _NO_ID),
            (_OTHER, mode & 7, _NO_ID),
        ]
    by_key = {(tag, ident): perm for tag, perm, ident in entries}
    by_key[(_USER, uid)] = by_key.get((_USER, uid), 0) | perm
    group = by_key.get((_GROUP_OBJ, _NO_ID), (mode >> 3) & 7)
    by_key[(_MASK, _NO_ID)] = by_key.get((_MASK, _NO_ID), group) | by_key[(_USER, uid)]
    blob = struct.pack("<I", _ACL_VERSION) + b"".join(
        _ENTRY.pack(tag, perm, ident) for (tag, ident), perm in sorted(by_key.items())
    )
    os.setxattr(d, _ACL_XATTR, blob, follow_symlinks=False)
