"""The type of the `engine_of` fixture (tests/conftest.py): a test is an entry point, and `engine_of(h)`
is the engine it opened for home `h`."""

from __future__ import annotations

from collections.abc import Callable

from erasure.config import Home
from erasure.engine_db import Engine

EngineOf = Callable[[Home], Engine]
