"""Generated ingest files (hypothesis): valid lines and mutated ones (fields dropped, added or
replaced by any JSON, hostile attachments, truncation, bytes that are not UTF-8, deep nesting, lone
surrogates, unknown processors). Every file is either ingested (exit 0, private blob copies of the
folder's own files) or refused with exit 2 and nothing written: the home (store and engine) is
byte-identical and no blob file exists. A file of valid lines only is always ingested, and no output
repeats a subject's identifier or the content.

Each example runs `erasure ingest` in this process on a fresh copy of one prepared home."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from erasure.config import Home
from erasure.engine import open_engine
from erasure.sqlite import transaction
from memory import subprocessors
from memory.schema import create
from memory.subprocessor_service import start_service
from tests import budget
from tests.cli_fixtures import MARK, erasure, snapshot, subjects

ATTACHMENT_BYTES = b"the folder's own attachment"
SECRET_BYTES = b"a file outside the folder"
GOOD_ATTACHMENTS = ["files/a.txt", "./files/a.txt", "files/../files/a.txt", "link-in"]
HOSTILE_ATTACHMENTS = [
    "/etc/passwd",
    "../secret",
    "files/link-out",
    "/proc/self/environ",
    "files/sub",
    "files",
    "files/fifo",
    "loop",
    "files/missing",
    "",
    " ",
    "files/a.txt/",
    "\x00",
    "~/secret",
    "files/link-proc",
    "/dev/zero",
]
FIELDS = ["source", "source_ref", "subject", "content", "attachments", "training", "subprocessors"]
EXAMPLES = budget.examples(1000)


@dataclass(frozen=True)
class World:
    """The prepared home (store with one live processor registered, engine) and the JSONL folder."""

    template: Path
    snapshot: dict[str, str | None]
    folder: Path
    cases: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("generated-ingest")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ERASURE_HOME", str(root / "template"))  # each run exports its home: restored after
        mp.setenv("ERASURE_EVIDENCE", str(root / "evidence"))
        mp.setenv("PREFECT_HOME", str(root / "prefect"))
        h = Home.resolve(root / "template", root / "evidence").ensure()
        with start_service("crm-sync", root / "services") as svc:
            conn = create(h.store_dir)
            with transaction(conn):
                subprocessors.register(conn, "crm-sync", svc.url, "CRM", ["episodic"])
            conn.close()
            open_engine(h.engine_db).close()

            folder = root / "items"
            (folder / "files" / "sub").mkdir(parents=True)
            (folder / "files" / "a.txt").write_bytes(ATTACHMENT_BYTES)
            (root / "secret").write_bytes(SECRET_BYTES)
            (folder / "link-in").symlink_to(folder / "files" / "a.txt")
            (folder / "files" / "link-out").symlink_to(root / "secret")
            (folder / "files" / "link-proc").symlink_to("/proc/self/environ")
            (folder / "loop").symlink_to(folder / "loop")
            os.mkfifo(folder / "files" / "fifo")
            cases = root / "cases"
            cases.mkdir()
            yield World(h.root, snapshot(h.root), folder, cases)


# --- strategies ------------------------------------------------------------------------------------

_plain = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=24)
_source = _plain.map(lambda s: s.replace("/", "-")).filter(lambda s: s.strip() != "")
_source_ref = _plain.filter(lambda s: s.strip() != "")
_words = st.lists(
    st.sampled_from(
        [
            "billing",
            "refund",
            "the",
            "shipping",
            "Thanks.",
            "ok?",
            "Yes!",
            "\n",
            "é",
            "headphones",
            "x" * 40,
            "privacy",
            "—",
        ]
    ),
    max_size=60,
).map(" ".join)


@st.composite
def valid_items(draw: st.DrawFn) -> dict[str, Any]:
    item: dict[str, Any] = {
        "source": draw(_source),
        "source_ref": draw(_source_ref),
        "subject": draw(subjects()),
        "content": f"{MARK} {draw(_words)} {draw(_plain)}".strip(),
    }
    if draw(st.booleans()):
        item["attachments"] = draw(st.lists(st.sampled_from(GOOD_ATTACHMENTS), max_size=3))
    if draw(st.booleans()):
        item["training"] = draw(st.booleans())
    if draw(st.integers(0, 9)) == 0:
        item["subprocessors"] = ["crm-sync"]
    return item


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def mutated_lines(draw: st.DrawFn) -> bytes:
    """A valid item, then one mutation; as the bytes of one line (no newline)."""
    item = draw(valid_items())
    kind = draw(
        st.sampled_from(
            [
                "drop",
                "add",
                "replace",
                "hostile attachment",
                "unknown processor",
                "deep",
                "surrogate",
                "subject",
                "truncate",
                "bytes",
                "not an object",
                "bom",
            ]
        )
    )
    if kind == "drop":
        item.pop(draw(st.sampled_from(FIELDS)), None)
    elif kind == "add":
        item[draw(st.sampled_from(["extra", "Source", "content ", "attachment", "id"]))] = draw(_json_values)
    elif kind == "replace":
        item[draw(st.sampled_from(FIELDS))] = draw(_json_values)
    elif kind == "hostile attachment":
        good = draw(st.lists(st.sampled_from(GOOD_ATTACHMENTS), max_size=2))
        item["attachments"] = [*good, draw(st.sampled_from(HOSTILE_ATTACHMENTS))]
    elif kind == "unknown processor":
        item["subprocessors"] = [draw(st.sampled_from(["nobody", "CRM-SYNC", "crm-sync ", "../x"]))]
    elif kind == "deep":
        depth = draw(st.integers(20, 5000))
        field = draw(st.sampled_from(FIELDS))
        item[field] = "@DEEP@"
        return json.dumps(item).replace('"@DEEP@"', "[" * depth + "0" + "]" * depth).encode()
    elif kind == "surrogate":
        field = draw(st.sampled_from(["content", "source", "source_ref"]))
        item[field] = item[field] + "\ud800" + draw(st.sampled_from(["", "x", "\udc00"]))
    elif kind == "subject":
        subject = dict(item["subject"])
        change = draw(st.sampled_from(["no id", "bad email", "empty name", "extra", "id too long", "nul"]))
        if change == "no id":
            subject.pop("id")
        elif change == "bad email":
            subject["email"] = f"{MARK} at example"
        elif change == "empty name":
            subject["name"] = "   "
        elif change == "extra":
            subject["ssn"] = MARK
        elif change == "id too long":
            subject["id"] = MARK * 40
        else:
            subject["id"] = f"{MARK}\x00"
        item["subject"] = subject
    elif kind == "not an object":
        return json.dumps(draw(st.sampled_from([[item], item["content"], 42, None]))).encode()
    line = json.dumps(item, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    if kind == "truncate":
        return line[: draw(st.integers(0, max(0, len(line) - 1)))]
    if kind == "bytes":
        at = draw(st.integers(0, len(line)))
        return line[:at] + draw(st.binary(min_size=1, max_size=4)) + line[at:]
    if kind == "bom":
        return b"\xef\xbb\xbf" + line
    return line


@st.composite
def files(draw: st.DrawFn) -> tuple[list[bytes], bool]:
    """(lines, all valid): 1-4 lines, some blank, each valid or mutated."""
    lines: list[bytes] = []
    all_valid = True
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.integers(0, 5)) == 0:
            lines.append(draw(st.sampled_from([b"", b"   ", b"\t"])))
        elif draw(st.booleans()):
            lines.append(json.dumps(draw(valid_items())).encode())
        else:
            lines.append(draw(mutated_lines()))
            all_valid = False
    return lines, all_valid


# --- the property ----------------------------------------------------------------------------------

_case = itertools.count()


def _blob_files(home: Path) -> list[Path]:
    blobs = home / "store" / "blobs"
    return [p for p in blobs.rglob("*") if p.is_file() or p.is_symlink()] if blobs.exists() else []


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
@given(generated=files())
@example(
    generated=(
        [
            json.dumps(
                {"source": "chat", "source_ref": "r", "subject": {"id": f"{MARK}-1"}, "content": f"{MARK} \ud800"},
                ensure_ascii=True,
            ).encode()
        ],
        False,
    )
)
@example(generated=([b"[" * 100_000], False))
@example(
    generated=(
        [
            json.dumps(
                {
                    "source": "chat",
                    "source_ref": "r",
                    "subject": {"id": f"{MARK}-1"},
                    "content": MARK,
                    "attachments": ["/proc/self/environ"],
                }
            ).encode()
        ],
        False,
    )
)
def test_every_generated_file_is_ingested_or_refused_with_exit_2_and_nothing_written(
    world: World, generated: tuple[list[bytes], bool]
) -> None:
    lines, all_valid = generated
    home = world.cases / f"case-{next(_case)}"
    shutil.copytree(world.template, home, symlinks=True)
    path = world.folder / "items.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    try:
        res = erasure("ingest", str(path), "--home", str(home), "--json")
        event(f"exit {res.code}")
        assert res.code in (0, 2), res
        assert MARK not in (res.out + res.err).lower()
        assert SECRET_BYTES.decode() not in res.out + res.err
        if res.code == 2:
            assert res.err.startswith("error: ") and res.err.count("\n") == 1, res.err
            assert not all_valid, res.err
            assert snapshot(home) == world.snapshot
            assert _blob_files(home) == []
        else:
            report = json.loads(res.out)
            items = sum(1 for line in lines if line.strip())
            assert report["ingested"] + report["skipped_duplicate"] + report["skipped_suppressed"] == items
            for blob in _blob_files(home):
                assert not blob.is_symlink() and blob.read_bytes() == ATTACHMENT_BYTES
                assert stat.S_IMODE(blob.stat().st_mode) == 0o600
    finally:
        shutil.rmtree(home, ignore_errors=True)
