"""The inbox reads and removes regular files only (issue 23, item 5): a symlink (or a hard link) in
`<home>/inbox/` to another user's file must not make intake overwrite that file with zeros, nor keep
an encrypted copy of its bytes. Anything that is not a regular file of its own (one link) is refused
and left alone, with one line that names no file.

The intake is the real `intake` flow on the session's Prefect test server. The victim is another OS
user's file (owned by `nobody` when the tests run as root) outside the home."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from erasure import inbox
from erasure.config import Home

NOBODY = 65534
VICTIM_BYTES = b'{"note": "another user\'s file, 48 bytes long."}'
REFUSED_LINE = "refused and left alone"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    folder = tmp_path / "other-user"
    folder.mkdir()
    path = folder / "notes.json"
    path.write_bytes(VICTIM_BYTES)
    if os.geteuid() == 0:
        os.chown(folder, NOBODY, NOBODY)
        os.chown(path, NOBODY, NOBODY)
    return path


def symlink_from_the_portal(h: Home, victim: Path) -> Path:
    link = h.inbox_dir / "request-from-portal.json"
    link.symlink_to(victim)
    return link


def hard_link_from_the_portal(h: Home, victim: Path) -> Path:
    link = h.inbox_dir / "request-from-portal.json"
    os.link(victim, link)
    return link


def symlink_among_the_rejected(h: Home, victim: Path) -> Path:
    """A plaintext rejected envelope of an older version, as seal_legacy finds them, that is a link."""
    (h.inbox_dir / inbox.REJECTED_DIR).mkdir(parents=True, exist_ok=True)
    link = h.inbox_dir / inbox.REJECTED_DIR / "old-envelope.json"
    link.symlink_to(victim)
    return link


ATTACKS: dict[str, Callable[[Home, Path], Path]] = {
    "symlink from the portal": symlink_from_the_portal,
    "hard link from the portal": hard_link_from_the_portal,
    "symlink among the rejected": symlink_among_the_rejected,
}


def _sealed_payloads(h: Home) -> list[bytes]:
    d = inbox.rejected_dir(h)
    return [inbox.read_rejected(h, p) for p in sorted(d.glob(f"*{inbox.SEALED_SUFFIX}"))] if d.is_dir() else []


def _good_envelope() -> dict[str, object]:
    return {
        "request_id": "req-inbox-0001",
        "tenant_id": "default",
        "subject": {"id": "subj-inbox-0001", "email": "lin.okafor@example.org"},
        "legal_basis": "GDPR",
        "received_at": (datetime.now(UTC) - timedelta(days=1)).isoformat(),
        "requester_identity_proof_ref": "idv/inbox",
        "reason": "Art.17 request",
    }


class Lines(logging.Handler):
    """The lines `erasure.inbox` logs (attached to its logger: Prefect's logging set-up on its first
    flow run replaces the root logger's handlers, pytest's capture among them)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_link_in_the_inbox_is_refused_and_left_alone(
    home: Home, victim: Path, prefect_harness: None, attack: str
) -> None:
    from flows.operations import intake

    home.inbox_dir.mkdir(parents=True, exist_ok=True)
    link = ATTACKS[attack](home, victim)
    (home.inbox_dir / "a-good-one.json").write_text(json.dumps(_good_envelope()))
    st = os.lstat(link)
    before = hashlib.sha256(victim.read_bytes()).hexdigest(), os.stat(victim).st_mtime_ns

    logger, lines = logging.getLogger(inbox.__name__), Lines()
    logger.addHandler(lines)
    try:
        out = intake()
    finally:
        logger.removeHandler(lines)

    assert (
        victim.read_bytes() == VICTIM_BYTES
        and (hashlib.sha256(victim.read_bytes()).hexdigest(), os.stat(victim).st_mtime_ns) == before
    )
    assert os.path.lexists(link) and os.lstat(link).st_ino == st.st_ino, "the entry was not left alone"
    assert all(VICTIM_BYTES not in p for p in _sealed_payloads(home)), "the target's bytes were kept"
    assert out["rejected"] == 0 and out["refused"] == 1, out
    assert out["vaulted"] == ["req-inbox-0001"], out  # the regular file beside it is taken as before
    refused = [m for m in lines.lines if REFUSED_LINE in m]
    assert len(refused) == 1 and refused[0].startswith("inbox:") and "\n" not in refused[0], lines.lines
    assert all(link.name not in m and str(victim) not in m for m in lines.lines), lines.lines


def test_shred_refuses_what_is_not_a_regular_file_of_its_own(tmp_path: Path, victim: Path) -> None:
    """The remover alone, for every entry it could meet: links, a folder, a fifo."""
    (tmp_path / "sym.json").symlink_to(victim)
    os.link(victim, tmp_path / "hard.json")
    (tmp_path / "dir.json").mkdir()
    os.mkfifo(tmp_path / "fifo.json")
    for name in ("sym.json", "hard.json", "dir.json", "fifo.json"):
        assert inbox.shred(tmp_path / name) is False, name
        assert os.path.lexists(tmp_path / name), name
        assert inbox.read_entry(tmp_path / name) is None, name
    assert victim.read_bytes() == VICTIM_BYTES
    (tmp_path / "plain.json").write_bytes(b"x" * 10)
    assert inbox.read_entry(tmp_path / "plain.json") == b"x" * 10
    assert inbox.shred(tmp_path / "plain.json") is True and not (tmp_path / "plain.json").exists()
