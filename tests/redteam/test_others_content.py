"""A hit inside someone else's content has a way out (docs/matching.md 7.2, issue 33 family 6).

A bystander's attachment that names the subject cannot be rewritten by the erasure (it is theirs). Before,
the probes called it residue and the request ended in exit 7 on every rerun, for ever. Now it is
attributed to its owner: the request ends `erasedWithExceptions` with a `mention_in_others_content`
exception labelled by the blob's opaque key, never all clear, and the bystander's file is unchanged. The
subject's own attachment with the same words is still erased (residue is still residue).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.redteam_fixtures import (
    cli_home_fixture,  # noqa: F401 (the `cli_home` fixture)
    ingest,
    init_store,
    ok,
    run,
    submit,
)

JANE = {"id": "usr-oc-4471", "email": "jane.oc@mail.example", "name": "Jane Ocampo", "phone": "+44 20 7946 0311"}
BOB = {"id": "usr-bob-0042", "email": "bob.marsh@example.net", "name": "Bob Marsh", "phone": "+1 555 0100"}


def _blob_files(home: Any) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (home.store_dir / "blobs").rglob("*")
        if p.is_file() and not p.is_symlink()
    }


@pytest.mark.parametrize(
    "attachment",
    [
        pytest.param(lambda: f"Minutes. Present: Bob Marsh, {JANE['name']}.\n".encode(), id="text-name"),
        pytest.param(lambda: f"<p>cc: <a href='mailto:{JANE['email']}'>her</a></p>".encode(), id="html-email"),
    ],
)
def test_a_bystanders_attachment_naming_the_subject_is_declared_not_residue_for_ever(
    cli_home: Any, tmp_path: Path, attachment: Any
) -> None:
    init_store(cli_home)
    theirs = tmp_path / "minutes.txt"
    theirs.write_bytes(attachment())
    mine = tmp_path / "mine.txt"
    mine.write_bytes(f"My notes, {JANE['name']} ({JANE['email']}).\n".encode())
    ingest(
        cli_home,
        tmp_path,
        [
            {
                "source": "chat",
                "source_ref": "c-1",
                "subject": JANE,
                "content": "Hello there.",
                "attachments": [str(mine)],
            },
            {
                "source": "chat",
                "source_ref": "c-2",
                "subject": BOB,
                "content": "Here are the minutes.",
                "attachments": [str(theirs)],
            },
        ],
    )
    before = _blob_files(cli_home)
    theirs_digest = hashlib.sha256(theirs.read_bytes()).hexdigest()
    assert theirs_digest in before.values()
    submit(cli_home, tmp_path, "req-oc-1", JANE)
    for attempt in (1, 2):  # a rerun ends the same way: never exit 7 for ever
        res = run(cli_home, "req-oc-1")
        assert res.code == 0, (attempt, res.out[-3000:], res.err[-3000:])
        doc = json.loads((cli_home.evidence_dir("req-oc-1") / "verification.json").read_text())
        kinds = {(e["kind"], e["tier"]) for e in doc["exceptions"]}
        assert ("mention_in_others_content", "uploads") in kinds, doc["exceptions"]
        assert [o["kind"] for o in doc["others_content"]] == ["attachment"]
        for ident in JANE.values():
            assert ident.lower() not in json.dumps(doc).lower()  # labels only
    after = _blob_files(cli_home)
    assert theirs_digest in after.values()  # the bystander's file is theirs, byte for byte
    assert hashlib.sha256(mine.read_bytes()).hexdigest() not in after.values()  # the subject's own is gone
    ok(res)


def test_a_conversation_key_another_person_shares_that_names_the_subject_is_declared(
    cli_home: Any, tmp_path: Path
) -> None:
    """The key of a conversation the subject shared with a bystander is named after her: her items go,
    the bystander's keep their key (the erasure may not rewrite another person's key). Declared as a
    `shared-key` in `others_content`, never residue, and the same on a rerun."""
    init_store(cli_home)
    key = f"support call with {JANE['name']}"
    ingest(
        cli_home,
        tmp_path,
        [
            {"source": "chat", "source_ref": key, "subject": JANE, "content": "My kiln is broken."},
            {"source": "chat", "source_ref": key, "subject": BOB, "content": "I can repair the kiln on Monday."},
        ],
    )
    submit(cli_home, tmp_path, "req-oc-2", JANE)
    for attempt in (1, 2):
        res = run(cli_home, "req-oc-2")
        assert res.code == 0, (attempt, res.out[-3000:], res.err[-3000:])
        doc = json.loads((cli_home.evidence_dir("req-oc-2") / "verification.json").read_text())
        assert ("mention_in_others_content", "episodic") in {(e["kind"], e["tier"]) for e in doc["exceptions"]}
        assert [o["kind"] for o in doc["others_content"]] == ["shared-key"]
        assert JANE["name"].lower() not in json.dumps(doc).lower()
