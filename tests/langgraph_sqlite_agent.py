"""A running LangGraph agent in its own process, for the tests that erase while the agent holds its
store open (two SQLite libraries in one process do not see each other's POSIX locks, so the agent
must be another process, as it is in production).

    python -m tests.langgraph_sqlite_agent MEMORY.json

It opens the memory's `SqliteStore` and `SqliteSaver` with the framework, keeps them open, and
answers one line per command read on stdin: `ok ...` or `error ...`. Commands:

- `turn`: the subject writes one more turn in their first thread;
- `framework-delete`: `store.delete` and `delete_thread` for the subject (the framework alone);
- `hold SECONDS`: a write transaction on each database, through the framework's own connection
  and lock; answers `ok held` once both are held, then commits after SECONDS (answers nothing more);
- `check`: every bystander item, search and thread reads back, a new item and a new turn are written;
- `quit`.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from tests.langgraph_sqlite_fixtures import (
    _TOPICS,
    BYSTANDERS,
    SUBJECT,
    Memory,
    chat_graph,
    check_bystanders,
    framework_delete,
    open_saver,
    open_store,
    thread_config,
)


def _hold(frameworks: list[Any], seconds: float) -> None:
    held = threading.Barrier(len(frameworks) + 1)

    def one(framework: Any) -> None:
        with framework.lock:  # the framework's own connection, under its own lock
            framework.conn.execute("BEGIN IMMEDIATE")  # the write lock, until COMMIT
            held.wait()
            time.sleep(seconds)
            framework.conn.execute("COMMIT")

    for f in frameworks:
        threading.Thread(target=one, args=(f,), daemon=True).start()
    held.wait()


def main() -> int:
    mem = Memory.load(Path(sys.argv[1]))
    with open_store(mem.store_path) as store, open_saver(mem.checkpoints_path) as saver:
        graph = chat_graph(saver)
        print("ok ready", flush=True)
        for line in sys.stdin:
            cmd, *args = line.split()
            try:
                if cmd == "turn":
                    graph.invoke(
                        {"messages": [("user", f"{SUBJECT.name} again: {_TOPICS[SUBJECT.id][1]}")]},
                        thread_config(mem.threads[SUBJECT.id][0], SUBJECT.id),
                    )
                elif cmd == "framework-delete":
                    framework_delete(mem, SUBJECT, store=store, saver=saver)
                elif cmd == "hold":
                    _hold([store, saver], float(args[0]))
                    print("ok held", flush=True)
                    continue
                elif cmd == "check":
                    check_bystanders(mem, store=store, saver=saver)
                    b = BYSTANDERS[0]
                    store.put(("users", b.id, "memories"), "after", {"text": "A note written after the erasure"})
                    assert store.get(("users", b.id, "memories"), "after") is not None
                    graph.invoke(
                        {"messages": [("user", "One more question about the router")]},
                        thread_config(mem.threads[b.id][0], b.id),
                    )
                    check_bystanders(mem, store=store, saver=saver)
                elif cmd == "quit":
                    print("ok bye", flush=True)
                    return 0
                else:
                    raise ValueError(f"unknown command {cmd!r}")
                print("ok", flush=True)
            except Exception:
                print("error " + traceback.format_exc().replace("\n", " | "), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
