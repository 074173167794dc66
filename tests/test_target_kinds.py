"""Each target kind has one configuration model (`erasure/target_kinds/<kind>.py`), found by name as its
eraser and its probe are, and both sides read a target's keys with it: a key one side refuses, the
other refuses with the same message."""

from __future__ import annotations

import pkgutil
from pathlib import Path
from typing import Any

import pytest

import probes.targets
import tasks.targets
from erasure.errors import ConfigError
from erasure.target_kinds import KindConfig, spec_of
from erasure.targets import Target
from probes.targets.probe import probe_for
from tasks.targets.eraser import eraser_for

NOT_KINDS = {"eraser", "probe", "run", "runner"}
"""Modules of tasks/targets and probes/targets that are not kinds: each side's protocol and its runner."""
KINDS = sorted(
    m.name.replace("_", "-") for m in pkgutil.iter_modules(tasks.targets.__path__) if m.name not in NOT_KINDS
)


def _target(tmp_path: Path, kind: str, **keys: Any) -> Target:
    return Target.model_validate({"name": "t", "kind": kind, "base_dir": tmp_path, **keys})


def test_every_kind_has_an_eraser_a_probe_and_one_configuration_model() -> None:
    probes_kinds = sorted(
        m.name.replace("_", "-") for m in pkgutil.iter_modules(probes.targets.__path__) if m.name not in NOT_KINDS
    )
    assert probes_kinds == KINDS and {"chroma", "langgraph-sqlite", "mem0"} <= set(KINDS)
    for kind in KINDS:
        model = spec_of(_target(Path("/"), kind)).config
        assert issubclass(model, KindConfig) and model.model_config.get("frozen")


BAD = [
    ("chroma", {"path": "c", "subject_key": "#x"}, "'subject_key' must be a Chroma metadata key"),
    ("chroma", {"path": "c", "subject_key": "uid", "use_api": "yes"}, "'use_api' must be true or false"),
    ("chroma", {"subject_key": "uid"}, "key 'path' is required"),
    ("mem0", {"history_db": "h.db", "qdrant_path": "q", "collection": "a/b"}, "key 'collection': must be"),
    ("mem0", {"history_db": "h.db", "qdrant_path": "q", "lock_timeout": -1}, "key 'lock_timeout': must be"),
    ("mem0", {"qdrant_path": "q"}, "key 'history_db' is required"),
    ("langgraph-sqlite", {}, "key 'store' or 'checkpoints' is required"),
    ("langgraph-sqlite", {"store": "s", "namespace": ["users"]}, "'namespace' must hold {subject_id}"),
    ("langgraph-sqlite", {"checkpoints": "c", "thread_keys": ["no way"]}, "'thread_key' / 'thread_keys'"),
    ("langgraph-sqlite", {"checkpoints": "c", "thread_key": 5}, "key 'thread_key' must be a string"),
]


@pytest.mark.parametrize(("kind", "keys", "says"), BAD)
def test_both_sides_refuse_a_bad_key_with_one_message(
    tmp_path: Path, kind: str, keys: dict[str, Any], says: str
) -> None:
    target = _target(tmp_path, kind, **keys)
    with pytest.raises(ConfigError) as erasing:
        eraser_for(target).files(target)
    with pytest.raises(ConfigError) as probing:
        probe_for(target).files(target)
    assert str(erasing.value) == str(probing.value)
    assert str(erasing.value).startswith(f"targets: target 't' ({kind}): ") and says in str(erasing.value)


def test_relative_paths_are_read_from_the_targets_files_folder(tmp_path: Path) -> None:
    from erasure.target_kinds.mem0 import Mem0Config

    cfg = Mem0Config.of(_target(tmp_path, "mem0", history_db="m/h.db", qdrant_path="/abs/q"))
    assert cfg.history_db == tmp_path / "m/h.db" and cfg.qdrant_path == Path("/abs/q")
    assert cfg.collection == "mem0" and cfg.lock_timeout == 120.0
