"""Each test file's measured seconds in a full run, for the order `make test` hands files to its workers.

`--dist loadfile` makes a file one unit of work. Handed out longest first (longest processing time
first), the suite ends when its longest files end; handed out in any other order, one worker runs a
long file alone at the end while the others sit idle (measured: a 480 s file started late kept one of
three workers busy for the last 8 minutes). The times come from a full run's JUnit report:

    make test PYTEST_ADDOPTS=--junitxml=/tmp/run.xml
    .venv/bin/python -m tests.durations /tmp/run.xml   # rewrites tests/durations.json

A file missing from the table (a new one) is estimated from its tiers (`tests/conftest.py`).
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

TABLE = Path(__file__).with_name("durations.json")


def load() -> dict[str, float]:
    """Seconds per test file (path relative to the project root, `tests/...py`); empty without a table."""
    try:
        return {str(k): float(v) for k, v in json.loads(TABLE.read_text()).items()}
    except (OSError, ValueError):
        return {}


def from_junit(report: Path) -> dict[str, float]:
    """Seconds per test file in a JUnit XML report (pytest's `--junitxml`: classname `tests.pkg.test_x`)."""
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).iter("testcase"):
        module = (case.get("classname") or "").split(".")
        while module and not module[-1].startswith("test_"):  # a test class: drop it
            module.pop()
        if module:
            seconds["/".join(module) + ".py"] += float(case.get("time") or 0)
    return {k: round(v, 1) for k, v in sorted(seconds.items())}


def main(argv: list[str]) -> int:
    """Rewrite tests/durations.json from the JUnit report named in `argv`."""
    if len(argv) != 1:
        print("usage: python -m tests.durations JUNIT.xml", file=sys.stderr)
        return 2
    table = from_junit(Path(argv[0]))
    TABLE.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{len(table)} files, {sum(table.values()):.0f} s in all -> {TABLE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
