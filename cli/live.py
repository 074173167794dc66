"""A flow run in this process with a live table beside it: `erasure request run` (one request or a
window) shows its progress while the flow runs in a thread."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from typing import Any

from rich.live import Live
from rich.table import Table

from cli import prefect_api
from cli.shell import console


def run_with_table(call: Callable[[], Any], table: Callable[[], Table] | None, *, transient: bool = False) -> Any:
    """Run `call` (a flow, in this process) in a thread, showing `table()` live until it ends (when
    given); returns its result, or raises what it raised (a Prefect start-up failure explained)."""
    result: dict[str, Any] = {}
    context = contextvars.copy_context()  # the caller's engine session goes with the flow

    def target() -> None:
        try:
            result["state"] = context.run(call)
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=target, name="erasure-flow", daemon=True)
    thread.start()
    if table is not None:
        with Live(table(), console=console, refresh_per_second=4, transient=transient) as view:
            while thread.is_alive():
                time.sleep(0.3)
                view.update(table())
            view.update(table())
    thread.join()
    if "error" in result:
        raise prefect_api.explain_start_failure(result["error"]) or result["error"]
    return result["state"]
