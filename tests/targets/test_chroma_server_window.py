"""A window of requests on a `chroma` target served by a real Chroma server (issue 37, item 6): the
server is stopped once for all the window's erasures and once for all its verifications, never once
per request and stage (a window of 5 stopped it 10 times), and every outage is in the step records of
every request it covered (the pack's steps.jsonl), not the first one only.

The store is built over HTTP (tests/chroma_server_fixtures.py's server and its start/stop scripts, which
append each call to `calls.log`): three subjects of the window and two bystanders, round robin. The
window runs through the real `erasure request run ID ID ID` (the erasure-window flow on the session's
Prefect test server)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from erasure.config import Home
from erasure.subject import Subject
from tests import oracle
from tests.chroma_fixtures import BYSTANDERS, SUBJECT, SUBJECT_KEY, hash_embedding
from tests.chroma_server_fixtures import COLLECTIONS, Server, chroma_server, view
from tests.cli_fixtures import erasure

pytest.importorskip("chromadb")

TARGET = "agent-vectors"
WINDOW = (
    SUBJECT,
    Subject(id="user-gra-0004", email="grace.hopper@example.org", name="Grace Hopper", phone="+1 202 555 0142"),
    Subject(id="user-ala-0005", email="alan.turing@example.org", name="Alan Turing", phone="+44 161 496 0777"),
)
RIDS = tuple(f"req-chroma-win-000{i}" for i in range(1, len(WINDOW) + 1))


def _document(owner: str, i: int, collection: str) -> str:
    for s in WINDOW:
        if s.id == owner:
            word = f"{str(s.name).split()[0].lower()}{collection}{i}"
            return f"{s.name} wrote {collection} entry {i}: {word} note, reach them at {s.email} or {s.phone}"
    return f"{owner} logged {collection} item {i} walrus{collection}{i} harbour at noon"


def _build(srv: Server, per_collection: int = 50) -> dict[str, list[str]]:
    """The store through HttpClient; returns collection -> the bystanders' record ids."""
    client = srv.client()
    people = (*(s.id for s in WINDOW), *BYSTANDERS)
    out: dict[str, list[str]] = {}
    for name, hnsw in COLLECTIONS.items():
        col = client.get_or_create_collection(name, embedding_function=hash_embedding(), configuration={"hnsw": hnsw})
        ids = [f"{people[i % len(people)]}/{name}-{i}" for i in range(per_collection)]
        owners = [people[i % len(people)] for i in range(per_collection)]
        docs = [_document(o, i, name) for i, o in enumerate(owners)]
        metas = [{SUBJECT_KEY: o, "n": i} for i, o in enumerate(owners)]
        for s in range(0, per_collection, 20):
            col.add(ids=ids[s : s + 20], documents=docs[s : s + 20], metadatas=metas[s : s + 20])
        out[name] = [rid for rid, o in zip(ids, owners, strict=True) if o in BYSTANDERS]
    return out


def _records_of(srv: Server, subject: Subject) -> int:
    client = srv.client()
    return sum(
        len(client.get_collection(n, embedding_function=hash_embedding()).get(where={SUBJECT_KEY: subject.id})["ids"])
        for n in COLLECTIONS
    )


def _prepare(home: Home, tmp_path: Path, srv: Server, **extra: Any) -> None:
    from proof.keys import generate_keypair

    keys: dict[str, Any] = {
        "name": TARGET,
        "kind": "chroma",
        "path": str(srv.db),
        "subject_key": SUBJECT_KEY,
        "url": srv.url,
        "stop": [str(srv.stop_script)],
        "start": [str(srv.start_script)],
        **extra,
    }
    (home.root / "targets.toml").write_text(
        "[[targets]]\n" + "\n".join(f"{k} = {json.dumps(v)}" for k, v in keys.items()) + "\n"
    )
    generate_keypair("engine", home.keys_dir)
    for rid, subject in zip(RIDS, WINDOW, strict=True):
        envelope = {
            "request_id": rid,
            "tenant_id": "default",
            "subject": subject.model_dump(exclude_none=True),
            "legal_basis": "GDPR",
            "received_at": (datetime.now(UTC) - timedelta(days=1)).isoformat(),
            "requester_identity_proof_ref": "idv/chroma-window",
            "reason": "Art.17 request",
        }
        req = tmp_path / f"{rid}.json"
        req.write_text(json.dumps(envelope))
        assert erasure("request", "submit", str(req), "--home", str(home.root)).code == 0


def _served_steps(home: Home, rid: str) -> list[dict[str, Any]]:
    lines = (home.evidence_dir(rid) / "steps.jsonl").read_text().splitlines()
    return [s for s in map(json.loads, lines) if s.get("target") == TARGET and s["status"] != "skipped"]


def test_a_window_of_three_stops_the_server_twice_and_every_request_records_both_outages(
    home: Home, tmp_path: Path, prefect_harness: None
) -> None:
    with chroma_server(tmp_path / "srv") as srv:
        bystanders = _build(srv)
        before = view(srv.client(), bystanders)
        assert all(_records_of(srv, s) > 0 for s in WINDOW)
        _prepare(home, tmp_path, srv)

        res = erasure("request", "run", *RIDS, "--home", str(home.root), "--json")

        report = json.loads(res.out)["requests"] if res.out.strip() else {}
        assert res.code == 0, json.dumps(report)[-3000:] + res.err[-3000:]
        assert {rid: r["outcome"] for rid, r in report.items()} == dict.fromkeys(RIDS, "all_clear")
        # One stop for the three erasures, one for the three verifications (a window of one per request
        # stopped it twice each: 6 stops).
        calls = srv.calls()
        assert calls.count("stop") <= 2 and calls.count("start") - 1 <= 2, calls
        assert calls == ["start", "stop", "start", "stop", "start"]
        assert srv.up()

        for rid in RIDS:
            steps = _served_steps(home, rid)
            assert {s["step"] for s in steps} == {"episodic", "vectors", "derivatives"}
            for s in steps:
                d = s["detail"]
                assert s["status"] == "erased" and s["after_count"] == 0
                assert [o["during"] for o in d["outages"]] == ["erasure", "verification"], d
                assert d["server_stops"] == 2 and d["server_restarted"] == 1
                for o in d["outages"]:
                    assert o["restarted"] == 1 and o["requests"] == len(RIDS)
                    assert sorted(o["request_ids"]) == sorted(RIDS)
                    assert 0 < o["seconds"] < 120 and o["stopped_at"] < o["started_at"]
                assert d["unavailable_seconds"] == pytest.approx(sum(o["seconds"] for o in d["outages"]), abs=0.02)
            # The same two outages in every request's records: one stretch each, shared by the window.
            assert {(o["stopped_at"], o["started_at"]) for o in steps[0]["detail"]["outages"]} == {
                (o["stopped_at"], o["started_at"]) for o in _served_steps(home, RIDS[0])[0]["detail"]["outages"]
            }
            doc = json.loads((home.evidence_dir(rid) / "verification.json").read_text())
            assert doc["all_clear"] is True and not doc["lost_bystander_tiers"]

        # Nothing of any subject of the window in any file (the independent oracle), nor through the server;
        # the bystanders read back identical.
        for subject in WINDOW:
            scan = oracle.scan_tree(srv.db, subject)
            assert not scan, scan.summary()
            assert _records_of(srv, subject) == 0
        assert view(srv.client(), bystanders) == before


def test_a_server_that_does_not_come_back_after_the_window_fails_every_request_of_it(
    home: Home, tmp_path: Path, prefect_harness: None
) -> None:
    with chroma_server(tmp_path / "srv") as srv:
        _build(srv, per_collection=30)
        _prepare(home, tmp_path, srv, start=["/bin/false"])

        res = erasure("request", "run", *RIDS, "--home", str(home.root), "--json")

        assert res.code != 0, res.out[-2000:]
        report = json.loads(res.out)["requests"]
        assert {rid: r["outcome"] for rid, r in report.items()} == dict.fromkeys(RIDS, "failed"), report
        for r in report.values():
            assert "did not start again" in r["detail"] and "the server is down" in r["detail"], r
        assert not any(s.id in res.out + res.err for s in WINDOW)
        assert not srv.up() and srv.calls() == ["start", "stop"]  # stopped once for the whole window
        for rid in RIDS:
            steps = _served_steps(home, rid)
            assert steps and all(s["status"] == "failed" and s["after_count"] == 0 for s in steps), steps
            for s in steps:
                (outage,) = s["detail"]["outages"]
                assert s["detail"]["server_down"] == 1 and outage["restarted"] == 0 and outage["started_at"] is None
                assert outage["requests"] == len(RIDS)
            ver = home.evidence_dir(rid) / "verification.json"
            assert not ver.exists() or json.loads(ver.read_text())["all_clear"] is not True


def test_a_windows_bystander_baselines_leave_out_its_other_subjects_and_only_them(tmp_path: Path) -> None:
    """Two subjects of one window on a chroma store (the PersistentClient folder; no server needed): their
    bystander baselines, taken together before either erasure, count the third person's records only
    (counted apart, from what was written), so each verification after both erasures finds nothing lost;
    the raw baselines would say the other subject's erased records were bystanders lost."""
    from probes.targets import run as target_probes
    from service.verification import window_baselines
    from tasks.targets.chroma import ERASER
    from tests.chroma_fixtures import build_memory, target_for

    mem = build_memory(tmp_path / "chroma", per_collection=60, batch=60)
    target = target_for(mem.path)
    subjects = [SUBJECT, Subject(id=BYSTANDERS[0])]
    raw = [target_probes.take(target, s) for s in subjects]
    fixed = window_baselines(target, raw)
    third = sum(1 for r in mem.records if r.metadata.get(SUBJECT_KEY) == BYSTANDERS[1])
    assert third > 0 and [fp.bystanders["records"] for fp in fixed] == [third, third]
    assert all(fp.bystanders["records"] > third for fp in raw)
    assert [fp.bystanders["collections"] for fp in fixed] == [fp.bystanders["collections"] for fp in raw]

    for s in subjects:
        assert not any(o.after for o in ERASER.erase(target, s).values())
    for s, fp, before in zip(subjects, fixed, raw, strict=True):
        got = target_probes.verify(target, s, fp)
        assert not [p for p in got.probes if p.residue or p.lost_bystanders()], got.probes
        assert any(p.lost_bystanders() for p in target_probes.verify(target, s, before).probes)


def test_one_scan_for_a_windows_subjects_finds_what_each_subjects_own_scan_finds(tmp_path: Path) -> None:
    """The verification reads the target's files once for all the window's subjects (the outage lasts one
    scan, not one per subject): each subject's byte probes and residue files are those of a scan of its
    needles alone. One subject erased, one not: the hits stay with their own subject."""
    from probes.targets import run as target_probes
    from tasks.targets.chroma import ERASER
    from tests.chroma_fixtures import build_memory, target_for

    mem = build_memory(tmp_path / "chroma", per_collection=40, batch=40)
    target = target_for(mem.path)
    subjects = [SUBJECT, Subject(id=BYSTANDERS[0]), Subject(id=BYSTANDERS[1])]
    fps = [target_probes.take(target, s) for s in subjects]
    ERASER.erase(target, SUBJECT)

    together, _window = target_probes.verify_window(target, list(zip(subjects, fps, strict=True)))
    for s, fp, got in zip(subjects, fps, together, strict=True):
        alone = target_probes.verify(target, s, fp)
        assert [p for p in got.probes if p.tier == "bytes"] == [p for p in alone.probes if p.tier == "bytes"]
        assert got.residue_files == alone.residue_files and got.unscanned == alone.unscanned
    hits = [sum(p.residue for p in v.probes if p.tier == "bytes" and p.method.startswith("scan:")) for v in together]
    assert hits[0] == 0 and hits[1] > 0 and hits[2] > 0
