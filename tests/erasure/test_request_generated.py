"""Generated request envelopes (hypothesis): valid ones and mutated ones (fields dropped, added or
replaced by any JSON, unsafe ids, dates at the calendar's edges or without a timezone, reasons that
name the subject, duplicate keys, JSON constants, huge numbers, deep nesting, truncation, bytes that
are not UTF-8, lone surrogates, files over the size cap). Every file is either vaulted (exit 0) or
refused with exit 2 and nothing written: the home (engine and store) is byte-identical. A valid
envelope is always vaulted, and no output repeats a subject's identifier.

Each example runs `erasure request submit` in this process on a fresh copy of one prepared home."""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from erasure.config import Home
from erasure.engine import open_engine
from erasure.models import MAX_ENVELOPE_BYTES
from erasure.tiers import CASCADE_ORDER
from memory.schema import create
from tests import budget
from tests.cli_fixtures import MARK, erasure, snapshot, subjects

FIELDS = [
    "request_id",
    "tenant_id",
    "subject",
    "data_classes",
    "legal_basis",
    "received_at",
    "requester_identity_proof_ref",
    "reason",
]
EXAMPLES = budget.examples(1000)
NOW = datetime.now(UTC)


@dataclass(frozen=True)
class World:
    template: Path
    snapshot: dict[str, str | None]
    cases: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("generated-requests")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ERASURE_HOME", str(root / "template"))  # each run exports its home: restored after
        mp.setenv("ERASURE_EVIDENCE", str(root / "evidence"))
        mp.setenv("PREFECT_HOME", str(root / "prefect"))
        for var in (
            "ERASURE_HOLIDAYS",
            "ERASURE_LEGAL_TZ",
            "ERASURE_TARGET_DAYS_BEFORE",
            "ERASURE_INTERNAL_BOUND_DAYS",
        ):
            mp.delenv(var, raising=False)
        h = Home.resolve(root / "template", root / "evidence").ensure()
        create(h.store_dir).close()
        open_engine(h.engine_db).close()
        cases = root / "cases"
        cases.mkdir()
        yield World(h.root, snapshot(h.root), cases)


# --- strategies ------------------------------------------------------------------------------------

_token = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,40}", fullmatch=True)
# A request id must not contain the subject's identifiers in any spelling (nor a name token, nor a
# phone's digits): valid ones use letters that none of MARK's tokens has, and few digits.
_request_id = st.from_regex(r"[bdfghj][bdfghijtvwyBDFGHJ._-]{0,20}[0-9]{0,4}", fullmatch=True)
# mypy infers tuple[str] for the tuple literal through hypothesis' decorators (a cast is "redundant")
_free = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60)  # type: ignore[arg-type]
# Reasons never name the subject: none of the letters of MARK's tokens, no digits.
_reason = st.text(st.sampled_from("bcdfghijltuvwy .,;-()'"), min_size=1, max_size=200)
_offset = st.integers(-14 * 60 + 1, 14 * 60 - 1).map(lambda m: timezone(timedelta(minutes=m)))


@st.composite
def received_ats(draw: st.DrawFn) -> str:
    day = draw(st.datetimes(min_value=datetime(2000, 1, 2), max_value=NOW.replace(tzinfo=None) - timedelta(days=1)))
    return day.replace(tzinfo=draw(_offset)).isoformat()


@st.composite
def valid_envelopes(draw: st.DrawFn) -> dict[str, Any]:
    env: dict[str, Any] = {
        "request_id": draw(_request_id),
        "tenant_id": draw(_token),
        "subject": draw(subjects()),
        "legal_basis": draw(st.sampled_from(["GDPR", "CCPA", "POPIA", "KE_DPA"])),
        "received_at": draw(received_ats()),
        "requester_identity_proof_ref": draw(_free),
        "reason": draw(_reason),
    }
    if draw(st.booleans()):
        env["data_classes"] = draw(st.lists(st.sampled_from([t.value for t in CASCADE_ORDER]), min_size=1, max_size=12))
    return env


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)

BAD_DATES = [
    "0001-01-01T00:00:00+01:00",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59-01:00",
    "9999-12-31T00:00:00Z",
    "2999-01-01T00:00:00Z",
    "1999-12-31T23:59:59Z",
    "2000-01-01T00:00:00+14:00",
    "2024-01-01T00:00:00",
    "2024-02-30T00:00:00Z",
    "yesterday",
    "",
    "2024-01-01",
    "24:00",
    "2024-01-01T25:00:00Z",
    "2024-13-01T00:00:00Z",
    "+002024-01-01T00:00:00Z",
    "2024-01-01T00:00:00+24:00",
]
BAD_IDS = ["../x", "", ".hidden", "a b", "a/b", "ä", "a" * 129, "-x", "x\n", "x\x00", "CON", "a" * 128 + "\u0301"]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A valid envelope, then one mutation; as the bytes of the file."""
    env = draw(valid_envelopes())
    kind = draw(
        st.sampled_from(
            [
                "drop",
                "add",
                "replace",
                "date",
                "id",
                "classes",
                "basis",
                "subject",
                "reason",
                "deep",
                "truncate",
                "bytes",
                "duplicate key",
                "constant",
                "big int",
                "surrogate",
                "bom",
                "not an object",
                "too large",
            ]
        )
    )
    if kind == "drop":
        env.pop(draw(st.sampled_from(FIELDS)), None)
    elif kind == "add":
        env[draw(st.sampled_from(["extra", "Request_id", "subject_id", "reason "]))] = draw(_json_values)
    elif kind == "replace":
        env[draw(st.sampled_from(FIELDS))] = draw(_json_values)
    elif kind == "date":
        env["received_at"] = draw(st.sampled_from(BAD_DATES) | st.integers() | st.floats(allow_nan=False))
    elif kind == "id":
        env[draw(st.sampled_from(["request_id", "tenant_id"]))] = draw(st.sampled_from(BAD_IDS))
    elif kind == "classes":
        env["data_classes"] = draw(st.sampled_from([[], ["nope"], "working", [["working"]], ["WORKING"]]))
    elif kind == "basis":
        env["legal_basis"] = draw(st.sampled_from(["gdpr", "HIPAA", "", None, 1]))
    elif kind == "subject":
        subject = dict(env["subject"])
        change = draw(st.sampled_from(["empty", "none", "no id", "bad email", "empty name", "extra", "long id"]))
        if change == "empty":
            subject = {}
        elif change == "none":
            env["subject"] = None
        elif change == "no id":
            subject.pop("id")
        elif change == "bad email":
            subject["email"] = f"{MARK} at example"
        elif change == "empty name":
            subject["name"] = ""
        elif change == "extra":
            subject["ssn"] = MARK
        else:
            subject["id"] = MARK * 40
        if change != "none":
            env["subject"] = subject
    elif kind == "reason":
        env["reason"] = draw(
            st.sampled_from(
                [
                    f"asked by {env['subject']['id']}",
                    f"{MARK.upper()} asked",
                    "",
                    "x" * 2001,
                    f"call {env['subject'].get('phone', MARK)}",
                ]
            )
        )
    elif kind == "surrogate":
        env[draw(st.sampled_from(["reason", "requester_identity_proof_ref", "request_id"]))] = "a\ud800b"
    elif kind == "not an object":
        return json.dumps(draw(st.sampled_from([[env], "env", 42, None]))).encode()
    elif kind == "too large":
        env["requester_identity_proof_ref"] = "x" * (MAX_ENVELOPE_BYTES + 1)
    text = json.dumps(env, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    if kind == "deep":
        depth = draw(st.integers(20, 200_000))
        field = draw(st.sampled_from(FIELDS)).encode()
        body = json.dumps({k: v for k, v in env.items() if k != field.decode()}).encode()
        return body[:-1] + b', "' + field + b'": ' + b"[" * depth + b"0" + b"]" * depth + b"}"
    if kind == "truncate":
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]
    if kind == "bytes":
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.binary(min_size=1, max_size=4)) + text[at:]
    if kind == "duplicate key":
        key = draw(st.sampled_from(FIELDS)).encode()
        return text[:-1] + b', "' + key + b'": ' + json.dumps(env.get(key.decode(), 1)).encode() + b"}"
    if kind == "constant":
        return text[:-1] + b', "reason": ' + draw(st.sampled_from([b"NaN", b"Infinity", b"-Infinity"])) + b"}"
    if kind == "big int":
        return text[:-1] + b', "' + draw(st.sampled_from(FIELDS)).encode() + b'": ' + b"9" * 5000 + b"}"
    if kind == "bom":
        return b"\xef\xbb\xbf" + text
    return text


# --- the property ----------------------------------------------------------------------------------

_case = itertools.count()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
@given(
    generated=st.one_of(
        valid_envelopes().map(lambda env: (json.dumps(env).encode(), env)), mutated().map(lambda raw: (raw, None))
    )
)
@example(generated=(b"[" * 200_000, None))
@example(
    generated=(
        json.dumps(
            {
                "request_id": "r1",
                "tenant_id": "t",
                "subject": {"id": f"{MARK}-1"},
                "legal_basis": "GDPR",
                "received_at": "0001-01-01T00:00:00+01:00",
                "requester_identity_proof_ref": "idv/1",
                "reason": "Art.17",
            }
        ).encode(),
        None,
    )
)
@example(
    generated=(
        json.dumps(
            {
                "request_id": "r1",
                "tenant_id": "t",
                "subject": {"id": f"{MARK}-1"},
                "legal_basis": "GDPR",
                "received_at": "9999-12-31T23:59:59-01:00",
                "requester_identity_proof_ref": "idv/1",
                "reason": "Art.17",
            }
        ).encode(),
        None,
    )
)
def test_every_generated_envelope_is_vaulted_or_refused_with_exit_2_and_nothing_written(
    world: World, generated: tuple[bytes, dict[str, Any] | None]
) -> None:
    raw, valid = generated
    home = world.cases / f"case-{next(_case)}"
    shutil.copytree(world.template, home)
    path = world.cases / f"request-{home.name}.json"
    path.write_bytes(raw)
    try:
        res = erasure("request", "submit", str(path), "--home", str(home), "--json")
        event(f"exit {res.code}")
        assert res.code in (0, 2), res
        assert MARK not in (res.out + res.err).lower(), res
        if res.code == 2:
            assert res.err.startswith(f"error: {path}: ") and res.err.count("\n") == 1, res.err
            assert valid is None, res.err
            assert snapshot(home) == world.snapshot
        else:
            out = json.loads(res.out)
            assert out["created"] is True
            if valid is not None:
                assert out["request_id"] == valid["request_id"]
                assert out["legal_basis"] == valid["legal_basis"]
    finally:
        shutil.rmtree(home, ignore_errors=True)
        path.unlink(missing_ok=True)
