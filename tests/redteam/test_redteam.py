"""A generated red team: the cases of "No false all clear" composed at random, one rule checked each time.

Each example builds a small real store, then composes: how the request spells the subject's id (letter
case, full-width forms), a bystander's item that mentions the subject (which identifiers, which
spelling and letter case of the phone), a namesake who shares the subject's name and household phone,
a second id of the subject with the same email (confirmed by the team), another subject erased at the
same time, and a crash after k steps followed by a rerun. The erasure runs as the flow runs it
(fingerprint, cascade, byte hygiene, probes) under the store's lock, without Prefect so that many
examples fit in the suite's time. The rule: the probes say all clear, and then no spelling of any
identifier of the subject is in any byte of the home outside the vault and the keys, and every
bystander's items and links are unchanged.
"""

from __future__ import annotations

import re
import tempfile
import threading
import unicodedata
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from erasure import request_records
from erasure.config import Home
from erasure.engine import open_engine
from erasure.subject import Subject
from erasure.tiers import CASCADE_ORDER
from memory.ingest import ingest
from memory.items import MemoryItem
from memory.schema import create
from probes.fingerprint import take_fingerprint
from probes.run import run_probes
from service.locks import store_lock
from tasks.runner import prepare, run_cascade, run_step
from tests import budget
from tests.cascade_fixtures import BYSTANDER, SUBJECT, build_store, submit

pytestmark = pytest.mark.redteam  # a generated red team

NAMESAKE = Subject(id="user-namesake-31", email="aq.other@example.com", name=SUBJECT.name, phone=SUBJECT.phone)
OTHER = Subject(id="user-cy-5150", email="cy.vance@example.net", name="Cyrus Vance-Oduya", phone="+1 555 0199")


def _spell_id(sid: str, how: str) -> str:
    if how == "upper":
        return sid.upper()
    if how == "title":
        return sid.title()
    if how == "fullwidth":  # NFKC folds full-width forms back to ASCII
        return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in sid)
    return sid


def _phone(phone: str, how: str) -> str:
    digits = re.sub(r"\D", "", phone)
    return {
        "compact": "+" + digits,
        "national": "0" + digits[2:],
        "spaced": phone,
        "dashed": "-".join([digits[:2], digits[2:4], digits[4:8], digits[8:]]),
    }[how]


def spellings(subject: Subject) -> list[bytes]:
    digits = re.sub(r"\D", "", subject.phone or "")
    out = [subject.id, subject.email or "", subject.name or "", digits, "0" + digits[2:] if digits else ""]
    return [s.lower().encode() for s in out if s]


def home_hits(home: Home, subject: Subject) -> list[str]:
    hits = []
    for root in (home.root, home.evidence_root):
        for p in root.rglob("*"):
            rel = p.relative_to(root)
            if p.is_file() and not p.is_symlink() and rel.parts[0] not in ("engine", "keys", "prefect"):
                raw = p.read_bytes()
                # Also as a reader sees the text: NFKC folds full-width and other compatibility forms.
                folded = unicodedata.normalize("NFKC", raw.decode("utf-8", "replace")).encode("utf-8")
                if any(s in data for s in spellings(subject) for data in (raw.lower(), folded.lower())):
                    hits.append(str(rel))
    return hits


def people_state(home: Home, ids: list[str]) -> dict[str, tuple[int, ...]]:
    conn = create(home.store_dir)
    try:
        return {
            sid: (
                cast(
                    tuple[Any, ...],
                    conn.execute("SELECT count(*) FROM raw_archive WHERE subject_id = ?", (sid,)).fetchone(),
                )[0],
                cast(
                    tuple[Any, ...], conn.execute("SELECT count(*) FROM frames WHERE subject_id = ?", (sid,)).fetchone()
                )[0],
                cast(
                    tuple[Any, ...],
                    conn.execute(
                        "SELECT count(*) FROM kg_entity_frames l JOIN frames f ON f.frame_id = l.frame_id"
                        " WHERE f.subject_id = ?",
                        (sid,),
                    ).fetchone(),
                )[0],
                cast(
                    tuple[Any, ...],
                    conn.execute(
                        "SELECT count(*) FROM kg_relations r JOIN frames f ON f.frame_id = r.frame_id"
                        " WHERE f.subject_id = ?",
                        (sid,),
                    ).fetchone(),
                )[0],
            )
            for sid in ids
        }
    finally:
        conn.close()


def erase(home: Home, request_id: str, subject: Subject, crash_after: int | None) -> bool:
    """What the flow does, under the store's lock; a crash after k steps is a run that stops there."""
    with store_lock(home):
        fp = take_fingerprint(home.store_dir, subject)
        if crash_after is not None:
            prepare(request_id, home)
            for tier in CASCADE_ORDER[:crash_after]:
                run_step(request_id, tier, home)
        run_cascade(request_id, home)
        return run_probes(home.store_dir, subject, fp).all_clear


scenarios = st.fixed_dictionaries(
    {
        "id_spelling": st.sampled_from(["same", "upper", "title", "fullwidth"]),
        "mention": st.sets(st.sampled_from(["name", "email", "phone", "id"]), max_size=3),
        "mention_case": st.sampled_from(["lower", "upper", "as-is", "fullwidth"]),
        "phone_spelling": st.sampled_from(["compact", "national", "spaced", "dashed"]),
        "namesake": st.booleans(),
        "alias": st.booleans(),
        "concurrent": st.booleans(),
        "crash_after": st.none() | st.integers(min_value=0, max_value=len(CASCADE_ORDER) - 1),
    }
)


@settings(max_examples=budget.examples(15), deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(s=scenarios)
@example(
    s={
        "id_spelling": "upper",
        "mention": {"name", "email", "phone", "id"},
        "mention_case": "upper",
        "phone_spelling": "compact",
        "namesake": True,
        "alias": True,
        "concurrent": True,
        "crash_after": 4,
    }
)
@example(
    s={
        "id_spelling": "same",
        "mention": {"name", "email", "phone"},
        "mention_case": "fullwidth",
        "phone_spelling": "spaced",
        "namesake": False,
        "alias": False,
        "concurrent": False,
        "crash_after": None,
    }
)
@example(  # a full-width address beside a namesake: read as the (ambiguous) name only, kept, all clear
    s={
        "id_spelling": "same",
        "mention": {"email"},
        "mention_case": "fullwidth",
        "phone_spelling": "compact",
        "namesake": True,
        "alias": False,
        "concurrent": False,
        "crash_after": None,
    }
)
def test_all_clear_means_nothing_of_the_subject_in_any_byte(s: dict[str, object]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home = Home.resolve(root / "home", root / "evidence").ensure()
        build_store(home, root)
        extra: list[dict[str, object]] = []
        words = {
            "name": SUBJECT.name,
            "email": SUBJECT.email,
            "id": SUBJECT.id,
            "phone": _phone(SUBJECT.phone or "", str(s["phone_spelling"])),
        }
        if s["mention"]:
            said = ", ".join(str(words[k]) for k in sorted(s["mention"]))  # type: ignore[call-overload]
            said = (
                said.upper()
                if s["mention_case"] == "upper"
                else said.lower()
                if s["mention_case"] == "lower"
                else _spell_id(said, "fullwidth")
                if s["mention_case"] == "fullwidth"
                else said
            )
            extra.append(
                {
                    "source": "chat",
                    "source_ref": "conv-rt-1",
                    "subject": BYSTANDER.model_dump(),
                    "content": f"My colleague {said} asked about the refund for the broken router.",
                }
            )
        if s["namesake"]:
            extra.append(
                {
                    "source": "chat",
                    "source_ref": "conv-rt-2",
                    "subject": NAMESAKE.model_dump(),
                    "content": "Please move my pharmacy appointment to Friday afternoon.",
                }
            )
        if s["alias"]:
            extra.append(
                {
                    "source": "email",
                    "source_ref": "msg-rt-3",
                    "subject": SUBJECT.model_copy(update={"id": "ann-second-77"}).model_dump(),
                    "content": "Writing from my other account about the travel insurance invoice.",
                }
            )
        if s["concurrent"]:
            extra.append(
                {
                    "source": "chat",
                    "source_ref": "conv-rt-4",
                    "subject": OTHER.model_dump(),
                    "content": "Cancel the hiking trip booking and refund the deposit, thanks.",
                }
            )
        if extra:
            conn = create(home.store_dir)
            ingest(conn, home.store_dir, [MemoryItem.model_validate(i) for i in extra])
            conn.close()
        watched = [BYSTANDER.id] + ([NAMESAKE.id] if s["namesake"] else [])
        before = people_state(home, watched)

        asked = SUBJECT.model_copy(
            update={"id": unicodedata.normalize("NFC", _spell_id(SUBJECT.id, str(s["id_spelling"])))}
        )
        submit(home, "req-rt-1", subject=asked)
        if s["alias"]:
            engine = open_engine(home.engine_db)
            request_records.confirm_aliases(engine, "req-rt-1", 1)
            engine.close()
        results: dict[str, bool] = {}
        threads = []
        if s["concurrent"]:
            submit(home, "req-rt-2", subject=OTHER)
            threads.append(
                threading.Thread(target=lambda: results.__setitem__("other", erase(home, "req-rt-2", OTHER, None)))
            )
            threads[-1].start()
        results["subject"] = erase(home, "req-rt-1", asked, s["crash_after"])  # type: ignore[arg-type]
        for t in threads:
            t.join(timeout=600)

        assert results["subject"] is True, s
        # A namesake's own name and household phone are theirs: what must be gone is everything else.
        gone = Subject(id=SUBJECT.id, email=SUBJECT.email) if s["namesake"] else SUBJECT
        assert home_hits(home, gone) == [], s
        if s["alias"]:
            assert home_hits(home, gone.model_copy(update={"id": "ann-second-77"})) == [], s
        assert people_state(home, watched) == before, s
        if s["concurrent"]:
            assert results["other"] is True, s
