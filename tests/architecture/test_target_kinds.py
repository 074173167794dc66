"""Each target kind is three modules found by name (`erasure/target_kinds/<kind>.py` its `SPEC`,
`tasks/targets/<kind>` its `ERASER`, `probes/targets/<kind>` its `PROBE`), the reference store too, and
both sides read a target's keys with the spec's one model: a key one side refuses, the other refuses
with the same message. No kind is named outside its own modules."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path
from typing import Any

import pytest

import erasure.target_kinds
import probes.targets
import tasks.targets
from erasure.config import Home
from erasure.errors import ConfigError
from erasure.target_kinds import KindConfig, KindSpec, spec_of
from erasure.targets import Target, default_targets
from erasure.tiers import CASCADE_ORDER, Tier
from probes.targets.probe import probe_for
from tasks.targets.eraser import eraser_for

ROOT = Path(__file__).resolve().parents[2]
NOT_KINDS = {"eraser", "probe", "run", "runner"}
"""Modules of tasks/targets and probes/targets that are not kinds: each side's protocol and its runner."""
KINDS = sorted(m.name.replace("_", "-") for m in pkgutil.iter_modules(erasure.target_kinds.__path__))
"""The registry: a kind is a spec in erasure/target_kinds, found by name."""


def _side(package: Any) -> list[str]:
    return sorted(m.name.replace("_", "-") for m in pkgutil.iter_modules(package.__path__) if m.name not in NOT_KINDS)


def _target(tmp_path: Path, kind: str, **keys: Any) -> Target:
    return Target.model_validate({"name": "t", "kind": kind, "base_dir": tmp_path, **keys})


def test_every_kind_has_its_three_modules_the_reference_store_too() -> None:
    assert _side(tasks.targets) == KINDS == _side(probes.targets)
    assert {"chroma", "langgraph-postgres", "langgraph-sqlite", "mem0", "reference"} <= set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_registers_the_same_way(kind: str) -> None:
    target = _target(Path("/"), kind)
    spec = spec_of(target)
    assert isinstance(spec, KindSpec)
    assert issubclass(spec.config, KindConfig) and spec.config.model_config.get("frozen")
    assert set(spec.backup_paths) <= set(spec.config.model_fields), "a backup path is a key of the kind"
    eraser = __import__(f"tasks.targets.{target.module}", fromlist=["ERASER"]).ERASER
    probe = __import__(f"probes.targets.{target.module}", fromlist=["PROBE"]).PROBE
    assert eraser.kind == kind == probe.kind
    assert eraser.tiers and all(isinstance(t, Tier) for t in eraser.tiers)
    assert len(set(eraser.tiers)) == len(eraser.tiers)
    for part in (eraser.check, eraser.files, probe.files):
        assert callable(part)


def test_the_reference_store_is_a_kind_holding_every_tier_in_the_homes_store(home: Home) -> None:
    from tasks.epochs import epoch_db, tracks_epoch

    (ref,) = default_targets(home.root, home.store_dir).targets
    assert eraser_for(ref).tiers == tuple(CASCADE_ORDER)
    assert eraser_for(ref).files(ref) == [home.store_db] == [epoch_db(ref, home)]
    assert probe_for(ref).files(ref) == [home.store_dir]
    assert tracks_epoch(ref, home)


KIND_NAMES = {k for kind in KINDS for k in (kind, kind.replace("-", "_"))}
PACKAGES = ("wire", "erasure", "memory", "tasks", "probes", "proof", "service", "flows", "cli")
NAMED_ELSEWHERE = {
    ("erasure/targets.py", "reference"),  # REFERENCE: the default target of a home without targets.toml
    ("flows/replay.py", "reference"),  # the replay form's default target name
    ("tasks/replay_find.py", "tasks.targets.langgraph_sqlite"),  # json_strings: a JSON value's strings
    ("probes/documents/layouts.py", "erasure.target_kinds.chroma.hnsw"),  # the byte scan names HNSW files
}
"""Where a kind is named outside its own modules, and why: nowhere else."""


def _kind_module(rel: Path) -> bool:
    parts = rel.parts
    return (
        len(parts) >= 3
        and (parts[0], parts[1]) in {("erasure", "target_kinds"), ("tasks", "targets"), ("probes", "targets")}
        and parts[2].removesuffix(".py") in KIND_NAMES
    )


def test_no_kind_is_named_outside_its_own_modules() -> None:
    """A kind name as a string (docstrings aside) or an import of a kind's module, outside the kind's
    three modules: what made adding a kind touch a dozen files."""
    found: set[tuple[str, str]] = set()
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            text = path.read_text()
            if _kind_module(rel) or not any(name in text for name in KIND_NAMES):
                continue
            tree = ast.parse(text)
            docs = {
                id(node.body[0].value)
                for node in ast.walk(tree)
                if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and node.body
                and isinstance(node.body[0], ast.Expr)
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and node.value in KIND_NAMES and id(node) not in docs:
                    found.add((rel.as_posix(), str(node.value)))
                elif isinstance(node, ast.ImportFrom) and node.module:
                    mod = node.module.split(".")
                    if len(mod) >= 3 and mod[1] in ("target_kinds", "targets") and mod[2] in KIND_NAMES:
                        found.add((rel.as_posix(), node.module))
    assert found == NAMED_ELSEWHERE


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
