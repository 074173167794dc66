"""A hold released from the CLI frees the request it blocked (issue 24): after `erasure hold release`,
`erasure request run --all` and the hourly `erasure-window` pick the request up, as they do after the
`hold-release` deployment. Everything through the real `erasure` entry point, on a real store and the
session's Prefect server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from tests.cascade_fixtures import SUBJECT, build_store, owned_counts, submit
from tests.cli_fixtures import erasure

REQUEST = "req-ann-1"


@pytest.fixture
def held(home: Home, tmp_path: Path, prefect_harness: None) -> Home:
    """Ann's request, blocked by a hold placed and then released through the CLI."""
    from proof.keys import generate_keypair

    build_store(home, tmp_path)
    submit(home)
    generate_keypair("engine", home.keys_dir)
    h = str(home.root)
    placed = erasure(
        "hold",
        "place",
        "--subject-id",
        SUBJECT.id,
        "--reason",
        "litigation: case 2026-114",
        "--actor",
        "legal-team",
        "--home",
        h,
    )
    assert placed.code == 0, placed
    blocked = erasure("request", "run", REQUEST, "--home", h, "--json")
    assert blocked.code == 6, blocked
    assert state_of(home) == "blocked"
    released = erasure(
        "hold",
        "release",
        "--subject-id",
        SUBJECT.id,
        "--reason",
        "matter settled",
        "--actor",
        "legal-team",
        "--home",
        h,
    )
    assert released.code == 0, released
    return home


def state_of(home: Home) -> str:
    engine = open_engine(home.engine_db)
    try:
        return request_records.get(engine, REQUEST).state.value
    finally:
        engine.close()


def test_a_hold_released_from_the_cli_is_picked_up_by_run_all(held: Home) -> None:
    assert state_of(held) == "submitted"
    res = erasure("request", "run", "--all", "--home", str(held.root), "--json")
    assert res.code == 0, res
    assert json.loads(res.out)["requests"][REQUEST]["outcome"] == "all_clear"
    assert state_of(held) == "awaiting attestation"
    assert all(v == 0 for v in owned_counts(held, SUBJECT).values())


def test_a_hold_released_from_the_cli_is_picked_up_by_the_hourly_window(held: Home) -> None:
    from flows.window import erasure_window

    state = erasure_window(None, return_state=True)
    assert state.is_completed(), state.message
    assert cast(dict[str, Any], state.result())["requests"][REQUEST]["outcome"] == "all_clear"
    assert state_of(held) == "awaiting attestation"
