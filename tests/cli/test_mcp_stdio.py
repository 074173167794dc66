"""`erasure mcp` over stdio, driven by the `mcp` SDK's own client as an agent host drives it, in a fresh
home with a demo store and no Prefect server: the preview shows counts and none of the identifiers; the
confirm files the request with its legal deadline (the run cannot start: said, not hidden); the status
reads it back. A replayed, expired or forged token, a preview no longer true, an ambiguous subject and
a held one are each refused with one line, and nothing is filed. Every call is in the engine's event
log, which holds no identifier. (Through to a sealed pack with a server: tests/flows/test_mcp_sealed.py.)"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from erasure.config import Home
from erasure.engine import open_engine
from erasure.subject import Subject
from tests.cli_fixtures import erasure
from tests.mcp_fixtures import Answer, call, demo_home, stdio_session


def _preview_args(s: Subject, *fields: str) -> dict[str, Any]:
    args: dict[str, Any] = {"subject_id": s.id}
    for f in fields:
        args[f] = getattr(s, f)
    return args


def _confirm_args(token: str) -> dict[str, Any]:
    return {"token": token, "requester_identity_proof_ref": "idv-case-31", "legal_basis": "GDPR"}


def _requests(h: Home) -> list[str]:
    conn = open_engine(h.engine_db)
    try:
        return [str(r[0]) for r in conn.execute("SELECT request_id FROM requests")]
    finally:
        conn.close()


def _events(h: Home) -> list[tuple[str | None, str, str]]:
    conn = open_engine(h.engine_db)
    try:
        return [
            (r[0], str(r[1]), str(r[2])) for r in conn.execute("SELECT request_id, event, detail FROM engine_events")
        ]
    finally:
        conn.close()


def _one_line(a: Answer, *words: str) -> None:
    assert a.error is not None, a.data
    assert "\n" not in a.error.strip() and "Traceback" not in a.error, a.error
    for w in words:
        assert w in a.error, a.error


def _ingest(h: Home, tmp: Path, subject: dict[str, str], content: str) -> None:
    f = tmp / f"more-{time.monotonic_ns()}.jsonl"
    line = {
        "source": "support-chat",
        "source_ref": f"conv-{time.monotonic_ns()}",
        "subject": subject,
        "content": content,
    }
    f.write_text(json.dumps(line) + "\n")
    res = erasure("ingest", str(f), "--home", str(h.root))
    assert res.code == 0, res.err


def test_preview_then_confirm_files_the_request_and_the_status_reads_it(tmp_path: Path) -> None:
    h, subjects = demo_home(tmp_path)
    s = subjects[0]

    async def agent() -> tuple[Answer, Answer, Answer, Answer]:
        async with stdio_session(h, errlog=tmp_path / "mcp.err") as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == {"preview_erasure", "request_erasure", "erasure_status"}
            assert all(t.description for t in tools.values())
            preview = await call(session, "preview_erasure", _preview_args(s, "email"))
            filed = await call(session, "request_erasure", _confirm_args(str(preview.data.get("token"))))
            replay = await call(session, "request_erasure", _confirm_args(str(preview.data.get("token"))))
            status = await call(session, "erasure_status", {"request_id": filed.data.get("request_id", "x")})
            return preview, filed, replay, status

    preview, filed, replay, status = asyncio.run(agent())
    assert preview.error is None, preview.error
    counts = preview.data["targets"]["reference"]["items"]
    assert set(counts) >= {"working", "episodic", "semantic", "vectors", "audit_log"}
    assert counts["episodic"] > 0 and preview.data["holds_blocking"] == 0
    assert preview.data["identifiers_given"] == ["email", "id"]
    # Counts and labels only: none of this person's identifiers (sent or not), nor anyone else's.
    for who in subjects:
        for value in who.identifiers():
            assert value not in preview.text and value.lower() not in preview.text.lower(), value
            assert value not in preview.data["token"]

    assert filed.error is None, filed.error
    rid = filed.data["request_id"]
    assert rid.startswith("agent-") and filed.data["legal_basis"] == "GDPR" and filed.data["deadline"]
    assert filed.data["run_started"] is False and "Prefect server" in filed.data["note"]
    assert _requests(h) == [rid]

    _one_line(replay, "already used", rid)
    assert _requests(h) == [rid]
    assert status.error is None and status.data["state"] == "submitted" and status.data["pack"] is None
    assert status.data["deadline"] == filed.data["deadline"]

    # Audited like intake, in the engine's event log, with no identifier.
    events = _events(h)
    names = [e for _r, e, _d in events]
    for e in ("agent.previewed", "request.submitted", "agent.confirmed", "agent.confirm_refused", "agent.status"):
        assert e in names, names
    log = json.dumps(events) + (tmp_path / "mcp.err").read_text()  # the event log, and the server's stderr
    for value in s.identifiers():
        assert value not in log, value


def test_an_expired_token_is_refused(tmp_path: Path) -> None:
    """The token's life is `ERASURE_AGENT_TOKEN_TTL` seconds (injectable: no test sleeps ten minutes)."""
    h, subjects = demo_home(tmp_path)
    s = subjects[1]

    async def expired() -> Answer:
        async with stdio_session(h, errlog=tmp_path / "mcp.err", ERASURE_AGENT_TOKEN_TTL="1") as session:
            preview = await call(session, "preview_erasure", _preview_args(s, "email", "name"))
            assert preview.error is None, preview.error
            await asyncio.sleep(1.5)
            return await call(session, "request_erasure", _confirm_args(preview.data["token"]))

    _one_line(asyncio.run(expired()), "expired", "preview again")
    assert _requests(h) == []


def test_a_forged_and_a_stale_token_are_refused(tmp_path: Path) -> None:
    h, subjects = demo_home(tmp_path)
    s = subjects[1]

    async def forged_and_stale() -> tuple[Answer, Answer, Answer]:
        async with stdio_session(h, errlog=tmp_path / "mcp.err") as session:
            preview = await call(session, "preview_erasure", _preview_args(s, "email"))
            token = preview.data["token"]
            body, mac = token.split(".")
            forged = await call(session, "request_erasure", _confirm_args(f"{body}.{'0' * len(mac)}"))
            nonsense = await call(session, "request_erasure", _confirm_args("not-a-token"))
            # The memories change after the preview: a new item of the person.
            _ingest(h, tmp_path, {"id": s.id}, "One more note about the late parcel.")
            stale = await call(session, "request_erasure", _confirm_args(token))
            return forged, nonsense, stale

    forged, nonsense, stale = asyncio.run(forged_and_stale())
    _one_line(forged, "not one this server issued")
    _one_line(nonsense, "not one this server issued")
    _one_line(stale, "no longer true", "preview again")
    assert _requests(h) == []


def test_an_ambiguous_subject_and_a_held_subject_are_refused(tmp_path: Path) -> None:
    h, subjects = demo_home(tmp_path)
    shared, held = subjects[1], subjects[2]
    # Two people under one key: another subject id of the store filed with the same email.
    assert shared.email is not None
    _ingest(h, tmp_path, {"id": "subj-9001", "email": shared.email}, "Please change my delivery address.")
    placed = erasure("hold", "place", "--subject-id", held.id, "--reason", "litigation 2026-77", "--home", str(h.root))
    assert placed.code == 0, placed.err

    async def agent() -> tuple[Answer, Answer, Answer, Answer]:
        async with stdio_session(h, errlog=tmp_path / "mcp.err") as session:
            ambiguous = await call(session, "preview_erasure", _preview_args(shared, "email"))
            on_hold = await call(session, "preview_erasure", _preview_args(held, "email", "phone"))
            nobody = await call(session, "preview_erasure", {"subject_id": " "})
            # A hold placed after the preview refuses the confirm.
            free = subjects[0]
            preview = await call(session, "preview_erasure", _preview_args(free))
            res = erasure("hold", "place", "--subject-id", free.id, "--reason", "audit 2026-9", "--home", str(h.root))
            assert res.code == 0, res.err
            late = await call(session, "request_erasure", _confirm_args(preview.data["token"]))
            _one_line(nobody, "subject.id")
            return ambiguous, on_hold, preview, late

    ambiguous, on_hold, preview, late = asyncio.run(agent())
    _one_line(ambiguous, "refused", "another person", "nothing was filed")
    _one_line(on_hold, "refused", "1 active litigation hold", "nothing was filed")
    assert preview.error is None, preview.error
    _one_line(late, "litigation hold")
    for a in (ambiguous, on_hold, late):
        for who in subjects:
            assert not any(v in str(a.error) for v in who.identifiers())
    assert _requests(h) == []
    refused = [json.loads(d)["why"] for _r, e, d in _events(h) if e.endswith("_refused")]
    assert refused == ["SubjectAmbiguous", "SubjectHeld", "SubjectHeld"], refused
