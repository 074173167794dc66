"""Shared fixtures. Feature-specific fixtures live in their own test files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A fresh ERASURE_HOME (and evidence root) in a temp dir, exported to the environment."""
    from erasure.config import Home

    h = Home.resolve(tmp_path / "home", tmp_path / "evidence").ensure()
    monkeypatch.setenv("ERASURE_HOME", str(h.root))
    monkeypatch.setenv("ERASURE_EVIDENCE", str(h.evidence_root))
    return h


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One Prefect test server for the whole session (about 13 s to start). Request it in flow tests.
    Like every server the project starts, it requires a credential (issue 23): its clients send it."""
    import secrets

    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_SERVER_API_AUTH_STRING, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    secret = secrets.token_urlsafe(32)
    with (
        temporary_settings({PREFECT_SERVER_API_AUTH_STRING: secret, PREFECT_API_AUTH_STRING: secret}),
        prefect_test_harness(server_startup_timeout=120),
    ):
        yield
