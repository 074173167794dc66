"""The hypothesis budget: CI's size in CI (`CI` or `ERASURE_TEST_FULL` set, as `make test` does), a
tenth of it locally (at least one example), so the inner loop stays fast and CI still searches wide."""

from __future__ import annotations

import os

FULL_ENV = ("CI", "ERASURE_TEST_FULL")


def full() -> bool:
    """True when the full budget is asked for: `CI` or `ERASURE_TEST_FULL` set to anything but empty,
    `0` or `false`."""
    return any(os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no") for name in FULL_ENV)


def examples(ci: int) -> int:
    """`max_examples` for a property test whose CI size is `ci`: `ci` in CI, a tenth locally (min 1)."""
    return ci if full() else max(1, ci // 10)
