"""Issue 23 item 14 (first half): `seal()` marked a request sealed before its outbox refused the
notification, so the request was sealed and its requester never notified (and a second `attest` was
refused: "not awaiting attestation"). Now the request is sealed only together with its notification;
a refused outbox leaves it awaiting attestation with a clear error, and once the outbox is fixed the
same `erasure attest` seals and notifies it.

Real store, real cascade and pack, the real `erasure` entry point; the outbox refused the way the
notifier refuses it (a symlink where its folder should be)."""

from __future__ import annotations

from pathlib import Path

import pytest

from erasure.config import Home
from erasure.engine import open_engine
from tests.cascade_fixtures import SUBJECT
from tests.cli_fixtures import erasure
from tests.proof.test_attest_export import REQ, _state, awaiting  # noqa: F401 (the fixture)


def _events(h: Home) -> list[str]:
    engine = open_engine(h.engine_db)
    try:
        return [str(r[0]) for r in engine.execute("SELECT event FROM engine_events WHERE request_id = ?", (REQ,))]
    finally:
        engine.close()


@pytest.fixture
def symlinked_outbox(awaiting: Home, tmp_path: Path) -> Home:  # noqa: F811 (the fixture)
    """The attack: the outbox folder replaced by a symlink to somewhere else (the notifier refuses
    to write through it)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if awaiting.outbox_dir.exists():
        awaiting.outbox_dir.rmdir()
    awaiting.outbox_dir.parent.mkdir(parents=True, exist_ok=True)
    awaiting.outbox_dir.symlink_to(elsewhere, target_is_directory=True)
    return awaiting


def test_a_refused_outbox_leaves_the_request_unsealed_with_a_clear_error(symlinked_outbox: Home) -> None:
    h = symlinked_outbox
    dpo = str(h.keys_dir / "dpo.pem")
    res = erasure("attest", REQ, "--dpo-key", dpo, "--yes", "--home", str(h.root))
    assert res.code == 3, res
    assert "outbox" in res.err and "symlink" in res.err, res.err
    assert _state(h) == "awaiting attestation"  # not sealed without its notification
    assert "pack.attested" not in _events(h)
    assert not any((h.outbox_dir.resolve()).iterdir())
    for needle in SUBJECT.identifiers():
        assert needle not in res.out + res.err

    # The outbox fixed, the same command seals and notifies.
    h.outbox_dir.unlink()
    again = erasure("attest", REQ, "--dpo-key", dpo, "--yes", "--home", str(h.root))
    assert again.code == 0, again
    assert _state(h) == "notified"
    assert (h.outbox_dir / f"{REQ}.eml").is_file()
    events = _events(h)
    assert events.count("pack.attested") == 1 and events.count("requester.notified") == 1


def test_sealing_and_notifying_are_recorded_together(awaiting: Home) -> None:  # noqa: F811 (the fixture)
    res = erasure("attest", REQ, "--dpo-key", str(awaiting.keys_dir / "dpo.pem"), "--yes", "--home", str(awaiting.root))
    assert res.code == 0, res
    assert _state(awaiting) == "notified"
    engine = open_engine(awaiting.engine_db)
    try:
        states = [
            str(r[0])
            for r in engine.execute(
                "SELECT json_extract(detail, '$.state') FROM engine_events"
                " WHERE request_id = ? AND event = 'request.state'"
                " ORDER BY rowid",
                (REQ,),
            )
        ]
    finally:
        engine.close()
    assert states[-2:] == ["sealed", "notified"]
