"""Fault injection for the crash drills: `ERASURE_CRASH_AT=<point>` kills this process with SIGKILL when
the cascade reaches that point (e.g. `mid:episodic:0`, inside the first batch's transaction, or
`end:semantic`, after the step's record). Unset in normal operation: then this is one dict lookup."""

from __future__ import annotations

import os
import signal


def maybe_crash(point: str) -> None:
    """Die like `kill -9` if the drill asked for this point."""
    if os.environ.get("ERASURE_CRASH_AT") == point:
        os.kill(os.getpid(), signal.SIGKILL)
