"""Which Prefect API a command that runs a flow talks to, made ready before the flow starts.

In order: `PREFECT_API_URL` when it is set (a shared server, Prefect Cloud, `make serve`), which must
answer its health check (its credential, `PREFECT_API_AUTH_STRING` or `PREFECT_API_KEY`, is the
caller's); else the home's own long-lived server when it is up (`erasure server start` writes its
address to `<home>/server/state.json`; its credential is the home's, cli/prefect_auth.py); else Prefect
starts a temporary server for this process, which requires the home's credential too. A temporary
server migrates a brand-new Prefect database inside its start-up window (20 s by default), which a
busy 2-core machine misses: so we migrate the home's database first, once per Prefect version (under a
lock: two first commands at once), and give the temporary server a start-up window that fits a busy
machine.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from cli import prefect_auth
from cli.server_state import own_server, read_state, running_api
from erasure.config import Home
from erasure.errors import ConfigError

#: Seconds a temporary server may take to answer (Prefect's default, 20, is missed on a busy machine).
EPHEMERAL_STARTUP_SECONDS = "180"
MIGRATE_TIMEOUT = 600.0


def _prefect_version() -> str:
    from importlib.metadata import version

    return version("prefect")


def prefect_home(h: Home) -> Path:
    """Prefect's home in effect: `PREFECT_HOME` (the CLI sets it to `<home>/prefect` unless given)."""
    return Path(os.environ.get("PREFECT_HOME") or h.prefect_home)


def database_url_is_default() -> bool:
    """True when Prefect's server database is the SQLite file inside PREFECT_HOME (ours to migrate)."""
    return not os.environ.get("PREFECT_API_DATABASE_CONNECTION_URL") and not os.environ.get(
        "PREFECT_SERVER_DATABASE_CONNECTION_URL"
    )


def migrate_database(h: Home, *, say: bool = True, home_dir: Path | None = None) -> bool:
    """Create or upgrade the Prefect database of this home (or of the Prefect home `home_dir`), once per
    Prefect version, under a lock: a concurrent first run waits for this one's migrations.

    Returns True when it ran the migrations, False when they were already done."""
    ph = home_dir or prefect_home(h)
    marker = ph / f".migrated-{_prefect_version()}"
    if marker.exists() and (ph / "prefect.db").exists():
        return False
    ph.mkdir(parents=True, exist_ok=True)
    # Two commands at once in a new home both ran the migrations on the same new file, and one failed:
    # the first takes the lock and migrates; the others wait for it, then find the database ready.
    with _migration_lock(ph):
        if marker.exists() and (ph / "prefect.db").exists():
            return False
        _migrate(ph, marker, say=say)
    return True


@contextlib.contextmanager
def _migration_lock(ph: Path) -> Iterator[None]:
    """An exclusive lock on `<ph>/.migrate.lock` (released when the holder exits, even by a crash)."""
    import fcntl

    fd = os.open(ph / ".migrate.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _migrate(ph: Path, marker: Path, *, say: bool) -> None:
    if say:
        sys.stderr.write("preparing Prefect's database in this home (first run only) ...\n")
        sys.stderr.flush()
    env = dict(os.environ, PREFECT_HOME=str(ph), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=MIGRATE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ConfigError(
            f"Prefect's database migrations did not finish within {MIGRATE_TIMEOUT:.0f} s "
            f"(PREFECT_HOME={ph}): retry when the machine is less busy"
        ) from exc
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["no output"]
        raise ConfigError(f"Prefect's database migrations failed (exit {proc.returncode}): {last[0]}")
    marker.write_text("migrated\n")


def api_healthy(api_url: str, timeout: float = 3.0) -> bool:
    """True when `<api_url>/health` answers true."""
    import httpx

    try:
        r = httpx.get(f"{api_url.rstrip('/')}/health", timeout=timeout)
        return r.status_code == 200 and r.json() is True
    except (httpx.HTTPError, ValueError):
        return False


def prepare(h: Home) -> str | None:
    """Make the Prefect API ready for a flow run in this process.

    Returns the API URL when a server is set or the home's server is up (then exported as
    PREFECT_API_URL), or None when a temporary server will be started. `ConfigError` (exit 3) when
    `PREFECT_API_URL` names a server that does not answer."""
    api_url = os.environ.get("PREFECT_API_URL")
    if api_url:
        _require_healthy(api_url)
        _home_credential_for(h, api_url)
        return api_url

    home_api = home_server(h)
    if home_api:
        os.environ["PREFECT_API_URL"] = home_api
        os.environ[prefect_auth.CLIENT_VAR] = prefect_auth.home_secret(h)
        return home_api
    # The temporary server listens on 127.0.0.1 too: it requires the home's credential as well.
    os.environ.update(prefect_auth.server_env(prefect_auth.home_secret(h)))
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", EPHEMERAL_STARTUP_SECONDS)
    if database_url_is_default():
        migrate_database(h)
    return None


_NAMED: set[str] = set()
"""API URLs the user named on the command line (`erasure --api-url URL`): the home's credential may go
there, as they said."""


def name_api_url(api_url: str) -> None:
    """`erasure --api-url URL`: use this server, and send it the home's credential (the user's word)."""
    url = api_url.rstrip("/")
    _NAMED.add(url)
    os.environ["PREFECT_API_URL"] = url


def _home_credential_for(h: Home, api_url: str) -> None:
    """`PREFECT_API_URL` is set and no credential was given: send the home's only to the home's own
    server (its state file's address, where its own process listens: `own_server`), or to a URL named
    with `--api-url`. A stale export that now names another user's listener gets nothing (issue 34)."""
    if os.environ.get(prefect_auth.CLIENT_VAR) or os.environ.get("PREFECT_API_KEY"):
        return
    secret = prefect_auth.home_secret(h)
    if api_url.rstrip("/") in _NAMED:
        os.environ[prefect_auth.CLIENT_VAR] = secret
        return
    st = read_state(h)
    if st is None or st.api_url != _normal(api_url) or not own_server(st):
        return
    if prefect_auth.is_ours(api_url, secret):
        os.environ[prefect_auth.CLIENT_VAR] = secret


def _normal(api_url: str) -> str:
    """`http://host:port/api`, as the state file writes it (`localhost` is not rewritten: not ours)."""
    from urllib.parse import urlsplit

    parts = urlsplit(api_url.rstrip("/"))
    try:
        return f"{parts.scheme}://{parts.hostname}:{parts.port}{parts.path}"
    except ValueError:
        return api_url


def _require_healthy(api_url: str) -> None:
    if not api_healthy(api_url):
        raise ConfigError(
            f"the Prefect API at {api_url} does not answer: start it "
            "(`erasure server start`), or unset PREFECT_API_URL to use a temporary server"
        )


def home_server(h: Home) -> str | None:
    """The API URL of this home's long-lived server (`erasure server start`) when it is up, else None."""
    return running_api(h)


def require_api(h: Home) -> str:
    """The API of a long-lived server, for commands that configure one (automations): PREFECT_API_URL
    or the home's server. Exported as PREFECT_API_URL. `ConfigError` (exit 3) when there is none."""
    api_url = os.environ.get("PREFECT_API_URL")
    if not api_url:
        api_url = home_server(h)
        if not api_url:
            raise ConfigError("no Prefect server: start one (`erasure server start`) or set PREFECT_API_URL")
        os.environ[prefect_auth.CLIENT_VAR] = prefect_auth.home_secret(h)
    _require_healthy(api_url)
    _home_credential_for(h, api_url)
    os.environ["PREFECT_API_URL"] = api_url
    return api_url


def explain_start_failure(exc: BaseException) -> ConfigError | None:
    """A one-line `ConfigError` for Prefect's "could not start/reach the server" errors, else None."""
    text = str(exc)
    if isinstance(exc, RuntimeError) and "ephemeral Prefect API server" in text:
        timeout = os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "20")
        return ConfigError(
            f"Prefect's temporary server did not start within {timeout} s: retry, raise "
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, or run a long-lived server "
            "(`erasure server start`): the CLI then uses it"
        )
    return None
