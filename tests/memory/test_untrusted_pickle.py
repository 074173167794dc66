"""The one data-only unpickler (`erasure.untrusted.load_pickle`) that both sides read other software's
pickles with (Chroma's HNSW id map, local Qdrant's points): data loads, qdrant-client's point classes
become inert records, and a pickle that names anything else (`os.system`, `builtins.eval`,
`subprocess.Popen`, ...) is refused before it is looked up, whatever opcode or protocol names it."""

from __future__ import annotations

import os
import pickle
import pickletools
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from erasure.target_kinds.mem0 import QDRANT_POINT_CLASSES
from erasure.untrusted import PickledRecord, load_pickle
from tests import budget

HOSTILE = [
    ("os", "system"),
    ("posix", "system"),
    ("builtins", "eval"),
    ("builtins", "exec"),
    ("subprocess", "Popen"),
    ("builtins", "getattr"),
    ("importlib", "import_module"),
    ("qdrant_client.http.models.models", "Evil"),
    ("erasure.untrusted", "PickledRecord"),
]


class _Runs:
    def __init__(self, fn: Any, *args: Any) -> None:
        self.fn, self.args = fn, args

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.fn, self.args)


def _global_opcode(module: str, name: str, call: bytes) -> bytes:
    """A protocol-0 pickle: GLOBAL module name, then `call` (e.g. a REDUCE of a tuple of one string)."""
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n" + call


def _stack_global(module: str, name: str, call: bytes) -> bytes:
    """A protocol-4 pickle: STACK_GLOBAL from two unicode strings, then `call`."""

    def text(s: str) -> bytes:
        raw = s.encode()
        return b"\x8c" + bytes([len(raw)]) + raw

    return b"\x80\x04" + text(module) + text(name) + b"\x93" + call


CALLS = [b"(S'touch /tmp/pwned'\ntR.", b".", b"N\x85R.", b"}b."]


@pytest.mark.parametrize(("module", "name"), HOSTILE)
@pytest.mark.parametrize("build", [_global_opcode, _stack_global])
@pytest.mark.parametrize("records", [frozenset(), QDRANT_POINT_CLASSES])
def test_a_pickle_naming_a_function_is_refused(module: str, name: str, build: Any, records: frozenset[str]) -> None:
    for call in CALLS:
        with pytest.raises(pickle.UnpicklingError):
            load_pickle(build(module, name, call), records=records)


@pytest.mark.parametrize("fn", [os.system, eval, subprocess.Popen])
@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_what_pickle_writes_for_os_system_eval_and_popen_runs_nothing(fn: Any, protocol: int, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    blob = pickle.dumps(
        _Runs(fn, f"touch {marker}" if fn is not eval else f"open({str(marker)!r}, 'w')"), protocol=protocol
    )
    for records in (frozenset(), QDRANT_POINT_CLASSES):
        with pytest.raises(pickle.UnpicklingError):
            load_pickle(blob, records=records)
        with pytest.raises(pickle.UnpicklingError):
            load_pickle(pickle.dumps({"label_to_id": {1: _Runs(fn, "x")}}, protocol=protocol), records=records)
    assert not marker.exists()


@settings(max_examples=budget.examples(300), deadline=None)
@given(
    module=st.sampled_from([m for m, _ in HOSTILE]) | st.from_regex(r"[a-z_][a-z0-9_.]{0,30}", fullmatch=True),
    name=st.sampled_from([n for _, n in HOSTILE]) | st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True),
    build=st.sampled_from([_global_opcode, _stack_global]),
    call=st.sampled_from(CALLS),
    prefix=st.binary(max_size=8),
)
def test_property_no_global_outside_the_records_is_ever_looked_up(
    module: str, name: str, build: Any, call: bytes, prefix: bytes
) -> None:
    blob = build(module, name, call)
    for data in (blob, prefix + blob):
        try:
            out = load_pickle(data, records=QDRANT_POINT_CLASSES)
        except pickle.UnpicklingError:
            continue
        # Only a listed class may load at all, and then only as an inert record.
        assert f"{module}.{name}" in QDRANT_POINT_CLASSES or not _names_global(data)
        assert not callable(out) or out is PickledRecord


def _names_global(data: bytes) -> bool:
    try:
        return any(
            op.name in ("GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "EXT1", "EXT2", "EXT4")
            for op, _arg, _pos in pickletools.genops(data)
        )
    except Exception:
        return True


@settings(max_examples=budget.examples(200), deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.text(max_size=8), inner, max_size=4)
            | st.tuples(inner, inner)
        ),
        max_leaves=20,
    ),
    st.integers(3, pickle.HIGHEST_PROTOCOL),
)
def test_property_plain_data_loads_as_it_was(value: Any, protocol: int) -> None:
    """(Protocols 0-2 write bytes as a call of `codecs.encode`: refused, as every call is; the stores
    write protocol 3 or later.)"""
    assert load_pickle(pickle.dumps(value, protocol=protocol)) == value


def test_a_qdrant_point_becomes_an_inert_record_and_is_refused_where_no_record_is_allowed() -> None:
    models = pytest.importorskip("qdrant_client.http.models.models")
    blob = pickle.dumps(models.PointStruct(id="p1", payload={"user_id": "u"}, vector=[0.5, 1.0]))
    point = load_pickle(blob, records=QDRANT_POINT_CLASSES)
    assert isinstance(point, PickledRecord)
    assert point.state == {"id": "p1", "payload": {"user_id": "u"}, "vector": [0.5, 1.0]}
    with pytest.raises(pickle.UnpicklingError):
        load_pickle(blob)  # Chroma's id map names no class at all


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"\x80\x04",
        b"\x80\x04\x95\xff\xff\xff\xff",
        b"(lp0\nI1\naI2\n",
        b"garbage",
        b"\x80\x04}\x94(\x8c\x01a\x94\x8c\x01b\x94ub.",
    ],
)
def test_malformed_pickles_are_one_error(blob: bytes) -> None:
    with pytest.raises(pickle.UnpicklingError):
        load_pickle(blob)
