"""The configuration of a PostgreSQL-backed target (kind `langgraph-postgres`), shared by its eraser and
its probe: only the keys, checked, never code that reads or writes the cluster.

    [[targets]]
    name = "prod-agent"
    kind = "langgraph-postgres"
    url = "postgresql://agent@/agent?host=/var/run/postgresql"   # a Unix socket folder, or host=db.internal
    password_env = "AGENT_PG_PASSWORD"     # or password_file = "/run/secrets/agent-pg" (never in this file)
    probe_url = "postgresql://auditor@/agent?host=/var/run/postgresql"   # optional: a read-only role
    probe_password_env = "AUDITOR_PG_PASSWORD"                        # (or probe_password_file)
    schema = "public"                      # optional: where PostgresStore / PostgresSaver put their tables
    namespace = ["users", "{subject_id}"]  # or namespaces = [[...], [...]] (as langgraph-sqlite)
    thread_key = "user_id"                 # or thread_keys = ["user_id", "uid"]
    episodic = ["episodes"]                # optional
    data_dir = "/var/lib/postgresql/18/main"  # optional: the cluster's files, when this machine can read them
    lock_timeout_ms = 2000                 # optional: how long one statement waits on the agent's locks
    wait_seconds = 120                     # optional: how long the eraser retries before it gives up
    wal_cycles = 200                       # optional override: most WAL switch + CHECKPOINT cycles (default:
                                           # derived from max_wal_size + wal_keep_size / wal_segment_size)
    log_dir = "/var/log/postgresql"        # optional: where the server log lands when not in data_dir
    rewrite_logs = false                   # optional: rotate the log, remove the subject's lines from closed files
    online_rewrite = true                  # optional: false = always VACUUM FULL (never REPACK, pg_repack)
    pg_bindir = "/usr/lib/postgresql/18/bin"  # optional: where the probe finds pg_waldump (compressed WAL)

The server log is part of the target: with `logging_collector` on, its files in `data_dir` (or an
absolute `log_directory`) are read; anything else (stderr caught by the service manager, Debian's
/var/log/postgresql) is read only from `log_dir`, else declared.

A password in `url` (`user:secret@` or `password=`) is refused: credentials come from the environment
or a file. Without `data_dir` (a managed service) the byte scan cannot run: the pack says so.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Self
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

from pydantic import ConfigDict

from erasure.errors import ConfigError
from erasure.target_kinds import KindConfig, KindSpec
from erasure.target_kinds.langgraph_sqlite import SUBJECT_LABEL
from erasure.targets import Target

__all__ = ["SUBJECT_LABEL", "LanggraphPostgresConfig", "PostgresTarget", "postgres_target"]
_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_METADATA_KEY = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
MAX_PASSWORD_FILE = 4096


@dataclass(frozen=True)
class PostgresTarget:
    """A langgraph-postgres target's keys, checked. `url` and `probe_url` carry the password (if any)
    resolved from the environment or a file: never log them."""

    name: str
    url: str
    probe_url: str
    schema: str
    namespaces: tuple[tuple[str, ...], ...]
    thread_keys: tuple[str, ...]
    episodic: frozenset[str]
    data_dir: Path | None
    lock_timeout_ms: int
    wait_seconds: float
    wal_cycles: int | None
    """An explicit limit of WAL switch + CHECKPOINT cycles; None: derived from the server's settings."""
    log_dir: Path | None = None
    """Where the server writes its log when it is not under `data_dir` (stderr caught by pg_ctl -l, the
    service manager or Debian's /var/log/postgresql)."""
    rewrite_logs: bool = False
    """After the erasure, rotate the collector's log and rewrite the closed files that name the subject
    without those lines (off by default: logs are often kept for audit)."""
    online_rewrite: bool = True
    """Rewrite the touched tables online where the server offers it (REPACK CONCURRENTLY, pg_repack;
    `pg_repack`'s extension is created when available and the role is a superuser), else VACUUM FULL."""
    pg_bindir: Path | None = None
    """Where the probe looks first for `pg_waldump` of the server's version, to read compressed WAL."""

    def data_dir_readable(self) -> bool:
        """Whether this process can read the cluster's files (`base/`, `pg_wal/`)."""
        d = self.data_dir
        return (
            d is not None
            and (d / "PG_VERSION").is_file()
            and os.access(d / "base", os.R_OK | os.X_OK)
            and os.access(d / "pg_wal", os.R_OK | os.X_OK)
        )


def _password(target: Target, prefix: str, where: str) -> str | None:
    env = target.text(f"{prefix}password_env")
    file = target.path(f"{prefix}password_file")
    if env is not None and file is not None:
        raise ConfigError(f"{where}: keys {prefix}password_env and {prefix}password_file exclude each other")
    if env is not None:
        value = os.environ.get(env)
        if value is None:
            raise ConfigError(f"{where}: key {prefix}password_env: the variable {env!r} is not set")
        return value
    if file is not None:
        try:
            with open(file, "rb") as f:
                raw = f.read(MAX_PASSWORD_FILE + 1)
        except OSError as exc:
            raise ConfigError(f"{where}: key {prefix}password_file: cannot read it ({exc.strerror})") from exc
        if len(raw) > MAX_PASSWORD_FILE:
            raise ConfigError(f"{where}: key {prefix}password_file: larger than {MAX_PASSWORD_FILE} bytes")
        return raw.decode("utf-8", "replace").strip("\r\n")
    return None


def _url(target: Target, key: str, prefix: str, where: str, *, required: bool) -> str | None:
    raw = target.text(key, required=required)
    if raw is None:
        return None
    parts = urlsplit(raw)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ConfigError(f"{where}: key {key!r} must be a postgresql:// URL")
    if parts.password is not None or any(k.lower() == "password" for k, _v in parse_qsl(parts.query)):
        raise ConfigError(
            f"{where}: key {key!r} holds a password: give it with {prefix}password_env or "
            f"{prefix}password_file, never in targets.toml"
        )
    password = _password(target, prefix, where)
    if password is None:
        return raw
    user = quote(parts.username or "", safe="")
    host = parts.netloc.rsplit("@", 1)[-1] if "@" in parts.netloc else parts.netloc
    netloc = f"{user}:{quote(password, safe='')}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _namespaces(target: Target, where: str) -> tuple[tuple[str, ...], ...]:
    out: list[tuple[str, ...]] = []
    if target.value("namespace") is not None:
        out.append(tuple(target.texts("namespace")))
    many = target.value("namespaces")
    if many is not None:
        if (
            not isinstance(many, list)
            or not many
            or not all(isinstance(ns, list) and all(isinstance(x, str) for x in ns) for ns in many)
        ):
            raise ConfigError(f"{where}: key 'namespaces' must be a list of namespace prefixes (lists of labels)")
        out += [tuple(ns) for ns in many if tuple(ns) not in out]
    for ns in out:
        if not ns or any(not label or "." in label for label in ns):
            raise ConfigError(f"{where}: key 'namespace': labels must be non-empty and hold no '.'")
        if sum(SUBJECT_LABEL in label for label in ns) != 1:
            raise ConfigError(f"{where}: key 'namespace' must hold {SUBJECT_LABEL} in exactly one label")
    return tuple(out)


def _int(target: Target, key: str, default: int, low: int, high: int, where: str) -> int:
    v = target.value(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
        raise ConfigError(f"{where}: key {key!r} must be a whole number from {low} to {high}")
    return v


def _bool(target: Target, key: str, default: bool, where: str) -> bool:
    v = target.value(key, default)
    if not isinstance(v, bool):
        raise ConfigError(f"{where}: key {key!r} must be true or false")
    return v


def postgres_target(target: Target) -> PostgresTarget:
    """The target's keys (`ConfigError` naming the key that is wrong)."""
    where = f"targets: target {target.name!r} ({target.kind})"
    url = _url(target, "url", "", where, required=True)
    assert url is not None
    probe_url = _url(target, "probe_url", "probe_", where, required=False) or url
    schema = target.text("schema", "public") or "public"
    if not _IDENT.fullmatch(schema):
        raise ConfigError(f"{where}: key 'schema' must be a lower-case SQL identifier")
    namespaces = _namespaces(target, where)
    one = target.text("thread_key")
    thread_keys = tuple(dict.fromkeys([*([one] if one is not None else []), *target.texts("thread_keys")]))
    if not namespaces and not thread_keys:
        raise ConfigError(f"{where}: key 'namespace' (or 'namespaces') or 'thread_key' (or 'thread_keys') is required")
    if not all(_METADATA_KEY.fullmatch(k) for k in thread_keys):
        raise ConfigError(f"{where}: key 'thread_key' / 'thread_keys' must name metadata keys (letters, digits, _ -)")
    return PostgresTarget(
        name=target.name,
        url=url,
        probe_url=probe_url,
        schema=schema,
        namespaces=namespaces,
        thread_keys=thread_keys,
        episodic=frozenset(target.texts("episodic")),
        data_dir=target.path("data_dir"),
        lock_timeout_ms=_int(target, "lock_timeout_ms", 2000, 10, 600_000, where),
        wait_seconds=float(_int(target, "wait_seconds", 120, 1, 86_400, where)),
        wal_cycles=None if target.value("wal_cycles") is None else _int(target, "wal_cycles", 0, 0, 100_000, where),
        log_dir=target.path("log_dir"),
        rewrite_logs=_bool(target, "rewrite_logs", False, where),
        online_rewrite=_bool(target, "online_rewrite", True, where),
        pg_bindir=target.path("pg_bindir"),
    )


class LanggraphPostgresConfig(KindConfig):
    """The kind's entry in the registry: `postgres_target` checks every key (a `ConfigError` naming it)
    and builds the `PostgresTarget` both sides read."""

    model_config = ConfigDict(frozen=True, extra="allow")

    @classmethod
    def of(cls, target: Target) -> Self:
        postgres_target(target)
        return super().of(target)


SPEC = KindSpec(LanggraphPostgresConfig)
