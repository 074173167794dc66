"""The environment of a command the product runs on a target's behalf (a Chroma server's `stop`, `start`
and `stopped_check`, a backup listing command, PostgreSQL's tools): an allowlist, never the run's own.

A flow run's environment holds the Prefect credential (`PREFECT_API_AUTH_STRING`) and may hold the
PostgreSQL password variable of a target; a `start` command such as `runuser -u chroma -- chroma run`
would hand both to another user's long-lived process. Only the variables below are passed on: where
programs are, whose they are, language, time zone, temporary folder and the "no telemetry" switches.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ALLOWED = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TERM",
        "DO_NOT_TRACK",
        "ANONYMIZED_TELEMETRY",
    }
)
"""Names passed on as they are; besides these, only the locale's `LC_*`."""


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowlisted part of `base` (default: this process's environment)."""
    src = os.environ if base is None else base
    return {k: v for k, v in src.items() if k in ALLOWED or k.startswith("LC_")}
