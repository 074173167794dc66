"""Where the home's long-lived Prefect server is: `<home>/server/state.json` (written by `erasure server
start`), whether its process is alive, and its API when it is up and takes the home's credential. Read by
every command that runs a flow (`cli.prefect_api`), by `erasure serve` and by `erasure server`."""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cli import prefect_auth
from erasure.config import PROJECT_ROOT, Home

STATE = "state.json"


@dataclass
class ServerState:
    """What `start` started: written to `<home>/server/state.json`."""

    host: str
    port: int
    server_pid: int
    worker_pids: list[int] = field(default_factory=list)
    postgres: bool = False
    project_dir: str = str(PROJECT_ROOT)
    started_at: str = ""

    @property
    def api_url(self) -> str:
        return f"http://{self.host}:{self.port}/api"

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.port}"


def state_dir(h: Home) -> Path:
    return h.root / "server"


def log_dir(h: Home) -> Path:
    return state_dir(h) / "logs"


def read_state(h: Home) -> ServerState | None:
    """The state file of the home's server, or None when there is none (or it is unreadable)."""
    try:
        doc = json.loads((state_dir(h) / STATE).read_text())
        return ServerState(**doc)
    except (OSError, ValueError, TypeError):
        return None


def write_state(h: Home, st: ServerState) -> None:
    """Write the state file and a pid file per process (atomically for the state file)."""
    d = state_dir(h)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{STATE}.tmp"
    tmp.write_text(json.dumps(asdict(st), indent=2, sort_keys=True) + "\n")
    tmp.replace(d / STATE)
    (d / "server.pid").write_text(f"{st.server_pid}\n")
    for old in d.glob("worker-*.pid"):
        old.unlink()
    for i, pid in enumerate(st.worker_pids, 1):
        (d / f"worker-{i}.pid").write_text(f"{pid}\n")


@contextlib.contextmanager
def start_lock(h: Home, waiting: Callable[[], None]) -> Iterator[None]:
    """Held for the whole of one `erasure server start`: a second start waits for the first (calling
    `waiting` once) instead of starting another server, or stopping the first."""
    d = state_dir(h)
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "start.lock", "a") as f:  # not inherited by the servers it starts (close-on-exec)
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            waiting()
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def starting(h: Home) -> bool:
    """Whether an `erasure server start` of this home is under way (it holds the start lock)."""
    path = state_dir(h) / "start.lock"
    if not path.exists():
        return False
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


def clear_state(h: Home) -> None:
    """Remove the state file and the pid files."""
    d = state_dir(h)
    for p in (d / STATE, d / "server.pid", *d.glob("worker-*.pid")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def pid_alive(pid: int) -> bool:
    """True when `pid` is a live (not zombie) Prefect process: a recycled pid is not ours."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return b"prefect" in cmdline and stat.rsplit(")", 1)[-1].split()[0] != "Z"


def server_alive(st: ServerState) -> bool:
    return pid_alive(st.server_pid)


def _listeners(port: int) -> list[tuple[bytes, int]]:
    """Every TCP socket listening on `port` (any address, v4 and v6): (packed address, inode)."""
    out: list[tuple[bytes, int]] = []
    for table, size in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            addr, _, hexport = f[1].partition(":")
            if f[3] != "0A" or int(hexport, 16) != port:
                continue
            raw = bytes.fromhex(addr)  # 32-bit words in host (little-endian) order
            packed = b"".join(raw[i : i + 4][::-1] for i in range(0, size, 4))
            out.append((packed, int(f[9])))
    return out


def _session_sockets(sid: int) -> set[int]:
    """The socket inodes held open by the processes of session `sid` (a server and its children)."""
    inodes: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[3]) != sid:
                continue
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
        except (OSError, ValueError, IndexError):
            continue
    return inodes


def listens_as(pid: int, host: str, port: int) -> bool:
    """True when whatever accepts connections to host:port is held by the session that `pid` leads (the
    server `start` spawned in a session of its own): no other process, of this user or another, listens
    there on that address or on a wildcard one. What this reads is the kernel's, not the peer's word."""
    try:
        want = ipaddress.ip_address("127.0.0.1" if host == "localhost" else host)
    except ValueError:
        return False
    matching = []
    for packed, inode in _listeners(port):
        addr = ipaddress.ip_address(packed)
        mapped = addr.ipv4_mapped if isinstance(addr, ipaddress.IPv6Address) else None
        if addr.is_unspecified or addr == want or mapped == want:
            matching.append(inode)
    return bool(matching) and set(matching) <= _session_sockets(pid)


def own_server(st: ServerState) -> bool:
    """True when the state file's server is alive and is what listens on its address: only then is the
    home's credential sent there."""
    return server_alive(st) and listens_as(st.server_pid, st.host, st.port)


def running_api(h: Home) -> str | None:
    """The API URL of the home's server when it is up (its process alive and listening on the state
    file's address, and the server there takes the home's credential and refuses requests without it),
    else None."""
    st = read_state(h)
    if st is None or not own_server(st):
        return None
    return st.api_url if prefect_auth.is_ours(st.api_url, prefect_auth.home_secret(h)) else None
