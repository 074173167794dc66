"""The credential of the Prefect server a home runs (`erasure server start`, `erasure serve`, the temporary
server of a CLI command).

A self-hosted Prefect server has no users, only one shared credential: `PREFECT_SERVER_API_AUTH_STRING`
on the server, `PREFECT_API_AUTH_STRING` on its clients (sent as HTTP Basic). Without it anyone who
reaches 127.0.0.1 can create runs. Each home has its own, generated on first use into
`<home>/keys/prefect-api.auth` (mode 0600), and given to every client the project starts: the CLI, the
workers (and through them every flow run), `make serve`, the tests. The health check stays open
(Prefect exempts it), so "is a server there" and "is it ours" are two questions: `is_ours` asks the
second.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from erasure.config import Home
from erasure.errors import ConfigError
from erasure.files import FILE_MODE

if TYPE_CHECKING:
    import httpx

AUTH_FILE = "prefect-api.auth"
SERVER_VAR = "PREFECT_SERVER_API_AUTH_STRING"
CLIENT_VAR = "PREFECT_API_AUTH_STRING"


def auth_path(h: Home) -> Path:
    """Where the home's credential lives."""
    return h.keys_dir / AUTH_FILE


def home_secret(h: Home) -> str:
    """The home's credential, created (0600, atomically: concurrent first runs agree) when missing."""
    path = auth_path(h)
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{AUTH_FILE}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        os.write(fd, (secrets.token_urlsafe(32) + "\n").encode())
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails when another process made it first: theirs is kept
    except FileExistsError:
        pass
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return _read(path)


def _read(path: Path) -> str:
    try:
        secret = path.read_text().strip()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(f"cannot read the Prefect server's credential {path}: {exc.strerror}") from None
    if not secret:
        raise ConfigError(f"the Prefect server's credential {path} is empty: delete it and start the server again")
    return secret


def server_env(secret: str) -> dict[str, str]:
    """The variables a server and its clients need: the server requires it, the clients send it."""
    return {SERVER_VAR: secret, CLIENT_VAR: secret}


def headers(secret: str | None) -> dict[str, str]:
    """HTTP headers for a request to the API (none without a credential)."""
    if not secret:
        return {}
    return {"Authorization": "Basic " + base64.b64encode(secret.encode()).decode()}


def api_client(api_url: str, secret: str | None, timeout: float = 30.0) -> httpx.Client:
    """An HTTP client for the Prefect REST API at `api_url` with the credential `secret`. It is Prefect's
    own client class, so it retries what Prefect's clients retry: a 503 the server sends while its
    database is busy, a 429, a 502, a dropped connection. Statuses are returned, not raised."""
    from prefect.client.base import PrefectHttpxSyncClient

    return PrefectHttpxSyncClient(base_url=api_url, timeout=timeout, headers=headers(secret), raise_on_all_errors=False)


def is_ours(api_url: str, secret: str, timeout: float = 3.0) -> bool:
    """True when the server at `api_url` requires a credential and accepts this one: refused without it
    (401), answered with it (200). An open server, or one with another credential, is not ours."""
    import httpx

    probe = f"{api_url.rstrip('/')}/admin/version"
    try:
        if httpx.get(probe, timeout=timeout).status_code != 401:
            return False
        return httpx.get(probe, timeout=timeout, headers=headers(secret)).status_code == 200
    except httpx.HTTPError:
        return False
