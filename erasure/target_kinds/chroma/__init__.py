"""Kind `chroma`: a Chroma `PersistentClient` directory, every collection in it, optionally served by a
Chroma server (`chroma run`) that the erasure stops and starts again.

    path = "chroma"             # the PersistentClient directory (chroma.sqlite3 + one folder per HNSW segment)
    subject_key = "user_id"     # the metadata field naming the subject (compared after NFKC + case folding)
    use_api = true              # optional: delete through the installed chromadb first (the eraser's step 1)

    # optional, when a server (`chroma run --path <path>`) keeps the folder open:
    url = "http://127.0.0.1:8000"                        # the server; its heartbeat says when it is back
    stop = ["/usr/bin/systemctl", "stop", "chroma"]      # argv lists, never a shell string: an absolute
    start = ["/usr/bin/systemctl", "start", "chroma"]    #   path, or a bare name found on PATH
    stopped_check = ["/usr/local/bin/chroma-is-down"]    # optional: exits 0 once the server has exited
    stop_wait_seconds = 60      # optional: how long to wait for it to stop (then: fail, nothing touched)
    start_wait_seconds = 120    # optional: how long to wait for its heartbeat after `start`

`stop` and `start` go together (we stop it, erase, start it, and stop it again while the probes read
the folder). Without them someone else stops the server (`stopped_check`, or with nothing but `url`,
until the URL refuses connections) and starts it after the run. Settings only: the process control is
`erasure.server_control`.
"""

from __future__ import annotations

import os
import shutil
from typing import Annotated, Any, Self
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, model_validator

from erasure.server_control import ServerControl
from erasure.target_kinds import KindConfig, KindSpec, TargetPath, Text

MAX_WAIT_SECONDS = 3600.0


def _metadata_key(value: str) -> str:
    if not value or value.startswith(("#", "chroma:")) or "\x00" in value:
        raise ValueError("key 'subject_key' must be a Chroma metadata key (not empty, not starting with # or chroma:)")
    return value


def _true_or_false(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("key 'use_api' must be true or false")
    return value


def _url(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("key 'url' must be a string")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("key 'url' must be the server's http:// or https:// URL")
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise ValueError("key 'url' must be the server's base URL, without credentials, query or fragment")
    try:
        _ = parts.port
    except ValueError:
        raise ValueError("key 'url' has a port that is not a number") from None
    return value.rstrip("/")


def _argv(key: str) -> Any:
    def check(value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            raise ValueError(
                f'key {key!r} must be an argv list (e.g. ["/usr/bin/systemctl", "stop", '
                '"chroma"]), never a shell string'
            )
        if not isinstance(value, list | tuple) or not all(isinstance(x, str) for x in value):
            raise ValueError(f"key {key!r} must be a list of strings (an argv)")
        if not value or not value[0]:
            raise ValueError(f"key {key!r} must name a command (an empty list runs nothing)")
        if any("\x00" in x for x in value):
            raise ValueError(f"key {key!r}: an argument holds a NUL byte")
        exe = value[0]
        if os.path.isabs(exe):
            if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
                raise ValueError(f"key {key!r}: {exe} is not an executable file")
        elif os.sep in exe or (os.altsep and os.altsep in exe):
            raise ValueError(f"key {key!r}: the command must be an absolute path or a bare name on PATH")
        elif shutil.which(exe) is None:
            raise ValueError(f"key {key!r}: {exe!r} is not found on PATH")
        return tuple(value)

    return check


def _seconds(key: str) -> Any:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_WAIT_SECONDS:
            raise ValueError(f"key {key!r} must be a number of seconds above 0, at most {MAX_WAIT_SECONDS:g}")
        return float(value)

    return check


class ChromaConfig(KindConfig):
    """A chroma target's keys."""

    path: TargetPath
    subject_key: Annotated[Text, AfterValidator(_metadata_key)]
    use_api: Annotated[bool, BeforeValidator(_true_or_false)] = True
    url: Annotated[str | None, BeforeValidator(_url)] = None
    stop: Annotated[tuple[str, ...], BeforeValidator(_argv("stop"))] = ()
    start: Annotated[tuple[str, ...], BeforeValidator(_argv("start"))] = ()
    stopped_check: Annotated[tuple[str, ...], BeforeValidator(_argv("stopped_check"))] = ()
    stop_wait_seconds: Annotated[float, BeforeValidator(_seconds("stop_wait_seconds"))] = 60.0
    start_wait_seconds: Annotated[float, BeforeValidator(_seconds("start_wait_seconds"))] = 120.0

    @model_validator(mode="after")
    def _server_keys(self) -> Self:
        if bool(self.stop) != bool(self.start):
            raise ValueError(
                "keys 'stop' and 'start' go together: we start again what we stopped (without "
                "both, give only 'url' and/or 'stopped_check', and start the server after the run)"
            )
        if (self.stop or self.stopped_check) and self.url is None:
            raise ValueError(
                "key 'url' is required with 'stop', 'start' or 'stopped_check' (its heartbeat "
                "says when the server is down and when it is back)"
            )
        return self

    def server(self, target: str) -> ServerControl | None:
        """The target's server and how to quiesce it (None: no server keeps the folder open)."""
        if self.url is None:
            return None
        return ServerControl(
            target=target,
            url=self.url,
            stop=self.stop,
            start=self.start,
            stopped_check=self.stopped_check,
            stop_wait_seconds=self.stop_wait_seconds,
            start_wait_seconds=self.start_wait_seconds,
        )


SPEC = KindSpec(ChromaConfig, backup_paths=("path",))
