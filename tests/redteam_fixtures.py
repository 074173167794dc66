"""Helpers of the red team's CLI tests (tests/redteam/test_issue22_cases.py, tests/redteam/test_redteam_generated.py):
a home driven only through the real `erasure` command (in this process, on the session's Prefect test
server), and the one rule every test ends with (`assert_truthful`): either the run says all clear and
the oracle finds nothing of the subject in any decoded view of any file, or the run says, specifically,
that it is not all clear."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import sqlite3
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.cli_fixtures import CliResult, erasure
from tests.oracle import Scan, scan_home, scan_tree
from tests.oracle_person import Person

HONEST_KINDS = frozenset({"unscanned_content", "mention_ambiguous", "mention_reported", "mention_in_others_content"})
"""Exceptions that say specifically why a request is not all clear (docs/matching.md 7.2: another
person's content that names the subject is declared, `mention_in_others_content`)."""


@pytest.fixture(name="cli_home")
def cli_home_fixture(home: Any, prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh home whose `erasure` commands run their flows on the session's Prefect test server
    (its URL exported as PREFECT_API_URL, as a user with a long-lived server has it), with an engine key."""
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    assert url, "the Prefect test harness is not up"
    monkeypatch.setenv("PREFECT_API_URL", url)
    monkeypatch.setenv("PREFECT_HOME", str(home.root / "prefect"))
    ok(erasure("keys", "generate", "--role", "engine", "--home", str(home.root)))
    return home


def ok(res: CliResult) -> CliResult:
    assert res.code == 0, f"exit {res.code}\n{res.out[-3000:]}\n{res.err[-3000:]}"
    return res


def write_jsonl(path: Path, items: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
    return path


def ingest(home: Any, inputs: Path, items: list[dict[str, Any]], name: str = "items.jsonl") -> dict[str, Any]:
    """`erasure ingest FILE --json` of `items` (written outside the home); returns the report."""
    res = ok(erasure("ingest", str(write_jsonl(inputs / name, items)), "--home", str(home.root), "--json"))
    return json.loads(res.out)  # type: ignore[no-any-return]


def init_store(home: Any) -> None:
    ok(erasure("store", "init", "--home", str(home.root)))


def submit(home: Any, inputs: Path, request_id: str, subject: dict[str, Any]) -> None:
    envelope = {
        "request_id": request_id,
        "tenant_id": "default",
        "subject": subject,
        "legal_basis": "GDPR",
        "received_at": (datetime.now(UTC) - timedelta(days=1)).isoformat(),
        "requester_identity_proof_ref": "idv/redteam",
        "reason": "Art.17 request via the privacy portal",
    }
    path = inputs / f"{request_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(envelope, ensure_ascii=False), encoding="utf-8")
    ok(erasure("request", "submit", str(path), "--home", str(home.root)))


def run(home: Any, *request_ids: str) -> CliResult:
    """`erasure request run ID [ID ...] --json` (several ids: one erasure window)."""
    return erasure("request", "run", *request_ids, "--home", str(home.root), "--json")


@dataclass
class Verdict:
    """What the run said about one request: exit code, the pack's status and all_clear, the open
    exceptions' kinds."""

    code: int
    status: str | None
    all_clear: bool | None
    kinds: set[str] = field(default_factory=set)
    message: str = ""

    @property
    def claims_all_clear(self) -> bool:
        return self.code == 0 and self.all_clear is True and self.status == "erased"


def pack_files(home: Any, request_id: str) -> dict[str, bytes]:
    pack = home.evidence_dir(request_id) / "proof.tar.gz"
    if not pack.exists():
        return {}
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(pack.read_bytes()))) as tf:
        for m in tf.getmembers():
            f = tf.extractfile(m)
            if f is not None:
                out[m.name.split("/", 1)[-1] if "/" in m.name else m.name] = f.read()
    return out


def verdict(home: Any, request_id: str, res: CliResult) -> Verdict:
    files = pack_files(home, request_id)
    manifest = json.loads(files["manifest.json"]) if "manifest.json" in files else {}
    ver_path = home.evidence_dir(request_id) / "verification.json"
    ver = json.loads(ver_path.read_text()) if ver_path.exists() else {}
    kinds = {str(e.get("kind")) for e in ver.get("exceptions", [])}
    return Verdict(
        res.code,
        manifest.get("status"),
        manifest.get("all_clear", ver.get("all_clear")),
        kinds,
        (res.out + res.err)[-1500:],
    )


def oracle_after(home: Any, person: Person, extra: list[Path] | tuple[Path, ...] = ()) -> Scan:
    scan = scan_home(home.root, home.evidence_root, person)
    for root in extra:
        more = scan_tree(root, person)
        scan.hits += [type(h)(f"{root.name}/{h.file}", h.view, h.kind, h.text, h.who) for h in more.hits]
    return scan


def assert_truthful(
    home: Any,
    request_id: str,
    res: CliResult,
    person: Person,
    *,
    extra: list[Path] | tuple[Path, ...] = (),
    honest: frozenset[str] = HONEST_KINDS,
    must_be_clear: bool = False,
) -> tuple[Verdict, Scan]:
    """The one rule: never "all clear" while the oracle finds the subject. Returns what the run said
    and what the oracle found, for the test's own further checks.

    - the run claims all clear (exit 0, all_clear, status `erased`): the oracle must find nothing;
    - else it must say so specifically: exit 7 (verification found residue), or exit 0 with
      `erasedWithExceptions` and an open exception of a kind in `honest`; a crash (exit 1), an
      over-erasure (10) or any other outcome fails.
    With `must_be_clear`, only the first is accepted."""
    v = verdict(home, request_id, res)
    found = oracle_after(home, person, extra)
    if v.claims_all_clear:
        assert not found, f"{request_id}: ALL CLEAR while the oracle finds the subject:\n{found.summary()}"
        return v, found
    assert not must_be_clear, (
        f"{request_id}: must end all clear, got exit {v.code}, status {v.status}, "
        f"all_clear {v.all_clear}, exceptions {sorted(v.kinds)}\n{v.message}\n"
        f"oracle: {found.summary(8)}"
    )
    if v.code == 7:
        return v, found
    assert v.code == 0 and v.status == "erasedWithExceptions" and v.kinds & honest, (
        f"{request_id}: neither all clear nor an honest verdict: exit {v.code}, status {v.status}, "
        f"exceptions {sorted(v.kinds)} (expected one of {sorted(honest)})\n{v.message}\n"
        f"oracle: {found.summary(8)}"
    )
    return v, found


def archive_content(home: Any, source: str, source_ref: str) -> list[tuple[str | None, str | None]]:
    """(subject_id, content) of the reference store's archive rows of one item, read-only."""
    conn = sqlite3.connect(f"file:{home.store_dir / 'memory.db'}?mode=ro", uri=True)
    try:
        return [
            (r[0], r[1])
            for r in conn.execute(
                "SELECT subject_id, content FROM raw_archive WHERE source = ? AND source_ref = ? ORDER BY archive_id",
                (source, source_ref),
            )
        ]
    finally:
        conn.close()


def blob_digests(home: Any) -> dict[str, int]:
    """sha256 of every blob file in the reference store (primary and replicas) -> how many copies."""
    out: dict[str, int] = {}
    for p in (home.store_dir).rglob("*"):
        if p.is_file() and "blobs" in p.relative_to(home.store_dir).parts:
            d = hashlib.sha256(p.read_bytes()).hexdigest()
            out[d] = out.get(d, 0) + 1
    return out


@contextmanager
def home_env(home: Any) -> Iterator[None]:
    """The home's ERASURE_HOME, ERASURE_EVIDENCE and PREFECT_HOME exported for the block (as a user has them)."""
    keys = ("ERASURE_HOME", "ERASURE_EVIDENCE", "PREFECT_HOME")
    old = {k: os.environ.get(k) for k in keys}
    os.environ.update(
        ERASURE_HOME=str(home.root), ERASURE_EVIDENCE=str(home.evidence_root), PREFECT_HOME=str(home.root / "prefect")
    )
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def redaction_of(before: str | None, after: str | None) -> bool:
    """`after` is `before` with some spans replaced by "[redacted]" (or unchanged)."""
    if before == after:
        return True
    if before is None or after is None or "[redacted]" not in after:
        return False
    pattern = ".*?".join(re.escape(p) for p in after.split("[redacted]"))
    return re.fullmatch(pattern, before, re.S) is not None


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
