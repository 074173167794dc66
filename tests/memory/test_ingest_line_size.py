"""Ingest line size: a line longer than the documented maximum (`MAX_LINE_BYTES`) rejects the file
with `FILE:LINE: ...` and exit 2 before it is held whole; a line of exactly the maximum is ingested.
The chunker is linear (timings in bench/chunking.py) and cuts exactly as it always did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from erasure.config import PROJECT_ROOT, Home
from erasure.errors import InputError
from memory.ingest_text import CHUNK_CHARS, chunk_text
from memory.items import MAX_LINE_BYTES, read_jsonl
from tests import budget
from tests.cli_fixtures import erasure, snapshot

SUBJECT = {"id": "user-0042", "email": "grace@example.org", "name": "Grace Example"}


def line_of(n_bytes: int, ref: str = "conv-1") -> bytes:
    """One JSON ingest line of exactly `n_bytes` bytes (newline excluded): content padded with words."""
    head = {"source": "chat", "source_ref": ref, "subject": SUBJECT, "content": ""}
    empty = len(json.dumps(head).encode())
    room = n_bytes - empty
    words = ("about billing and the refund " * (room // 29 + 2))[: room - 1] + "."
    out = json.dumps({**head, "content": words}).encode()
    assert len(out) == n_bytes
    return out


@pytest.fixture
def store_home(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    res = erasure("store", "init", "--home", str(home.root))
    assert res.code == 0, res.err
    return home


def test_a_line_longer_than_the_maximum_rejects_the_file_and_writes_nothing(store_home: Home, tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_bytes(line_of(1000) + b"\n" + line_of(MAX_LINE_BYTES + 1, "conv-2") + b"\n" + line_of(900, "c3"))
    before = snapshot(store_home.root)
    res = erasure("ingest", str(path), "--home", str(store_home.root))
    assert res.code == 2, res
    assert res.err == (
        f"error: {path}:2: line is longer than {MAX_LINE_BYTES:,} bytes (the maximum of one memory item)\n"
    )
    assert snapshot(store_home.root) == before


def test_read_jsonl_refuses_a_long_last_line_without_a_newline(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_bytes(line_of(500) + b"\n\n" + line_of(MAX_LINE_BYTES + 10, "conv-2"))
    with pytest.raises(InputError, match=rf"^{path}:3: line is longer than"):
        read_jsonl(path)


def test_a_line_of_exactly_the_maximum_is_ingested(store_home: Home, tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_bytes(line_of(MAX_LINE_BYTES) + b"\n")
    res = erasure("ingest", str(path), "--home", str(store_home.root), "--json")
    assert res.code == 0, res.err
    report = json.loads(res.out)
    assert report["ingested"] == 1 and report["chunks"] > MAX_LINE_BYTES // CHUNK_CHARS


def test_the_docs_state_the_maximum_line_size() -> None:
    readme = (PROJECT_ROOT / "docs" / "requests.md").read_text()
    assert f"{MAX_LINE_BYTES:,} bytes" in readme


# --- the chunker ---------------------------------------------------------------------------------


def reference_chunks(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """The chunker as it was first written (quadratic: it copies the rest of the text per chunk)."""
    if len(text) <= size:
        return [text]
    chunks: list[str] = []
    rest = text
    while len(rest) > size:
        cut = rest.rfind(" ", 0, size + 1)
        if cut <= 0:
            cut = size
        chunks.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        chunks.append(rest)
    return chunks


_TEXT = st.text(
    alphabet=st.sampled_from([" ", " ", "a", "b", "é", "\t", "\n", "\u3000", "\u00a0", "x", "."]), max_size=1200
)


@settings(max_examples=budget.examples(300), deadline=None)
@given(text=_TEXT, size=st.integers(min_value=1, max_value=40))
@example(text=" " * 301 + "a", size=CHUNK_CHARS)
@example(text="a" + " " * 700 + "b", size=CHUNK_CHARS)
@example(text="x" * 901, size=CHUNK_CHARS)
def test_the_linear_chunker_cuts_exactly_as_the_reference(text: str, size: int) -> None:
    assert chunk_text(text, size) == reference_chunks(text, size)


def test_the_chunker_of_a_maximum_line_keeps_every_word() -> None:
    text = line_of(MAX_LINE_BYTES).decode()
    chunks = chunk_text(text)
    assert all(len(c) <= CHUNK_CHARS for c in chunks)
    assert " ".join(chunks).split() == text.split()
