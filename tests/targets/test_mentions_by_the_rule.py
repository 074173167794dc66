"""A bystander's record that names the subject in any spelling the rule reads is a mention on both sides.

The eraser reads other people's records by the rule (docs/matching.md) and reports those that name the
subject, never erasing them; the probe counted them with a literal search. A record that wrote the
subject's address with soft hyphens, their phone in Eastern Arabic digits, or a note pasted as base64 was
reported by the eraser and left, yet was no mention to the probe: its views found the subject there after
every erasure, and the request ended in residue (exit 7) on every run. The generator writes one bystander
record naming the subject in a spelling of the rule's families (or not at all); the oracle
(`tests.oracle33`, written apart from both sides) says whether it names them. Then: the probe counts what
the eraser reports, the verification after the erasure finds no residue, and a record the oracle says
names the subject is reported (never silently passed over)."""

from __future__ import annotations

import base64
import dataclasses
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from probes.model import BYTES
from probes.targets import run
from tasks.targets.langgraph_sqlite import ERASER
from tests import budget
from tests.langgraph_sqlite_fixtures import BYSTANDERS, SUBJECT, Memory, build_memory, open_store
from tests.oracle33.match import Person33
from tests.oracle33.scan import scan_text33

EASTERN = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
assert SUBJECT.email and SUBJECT.name and SUBJECT.phone
LOCAL, _, DOMAIN = SUBJECT.email.partition("@")
GIVEN, FAMILY = SUBJECT.name.split()

FORMS = {
    "nobody": "the parcel came on Tuesday",
    "email-soft-hyphens": "\u00ad".join(SUBJECT.email),
    "email-zero-width": f"{LOCAL}\u200b@{DOMAIN}",
    "email-entities": SUBJECT.email.replace(".", "&#46;").replace("@", "&#64;"),
    "email-percent": f"mailto:{LOCAL}%40{DOMAIN}",
    "email-pasted-base64": "data:text/plain;base64," + base64.b64encode(f"card: {SUBJECT.email}".encode()).decode(),
    "name-json-escaped": json.dumps({"who": SUBJECT.name.replace("a", "\\u0061")})[1:-1].replace("\\\\", "\\"),
    "name-diacritics": f"{GIVEN.replace('a', 'á', 1)} {FAMILY.replace('O', 'Ó', 1)}",
    "name-upper-glued-tags": f"<b>{GIVEN.upper()}</b> <i>{FAMILY.upper()}</i>",
    "phone-eastern-arabic": SUBJECT.phone.translate(EASTERN),
    "phone-pasted-base64": base64.b64encode(f"call {SUBJECT.phone} after six".encode()).decode(),
}
ORACLE_PERSON = Person33(
    id=SUBJECT.id, email=SUBJECT.email, given=GIVEN, family=FAMILY, phone=SUBJECT.phone, name=SUBJECT.name
)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Memory:
    return build_memory(tmp_path_factory.mktemp("lg") / "base", mentions=False)


def _copy(mem: Memory, dest: Path) -> Memory:
    shutil.copytree(mem.root, dest)
    return dataclasses.replace(
        mem,
        root=dest,
        store_path=dest / mem.store_path.name,
        checkpoints_path=dest / mem.checkpoints_path.name,
        items={k: list(v) for k, v in mem.items.items()},
        threads={k: list(v) for k, v in mem.threads.items()},
    )


@settings(
    max_examples=budget.examples(24),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(form=st.sampled_from(sorted(FORMS)), before=st.sampled_from(["note: ", "", "Ask "]))
@example(form="email-soft-hyphens", before="Ask ")
@example(form="email-pasted-base64", before="note: ")
def test_a_bystanders_record_naming_the_subject_is_a_mention_on_both_sides(
    base: Memory, tmp_path: Path, form: str, before: str
) -> None:
    text = f"{before}{FORMS[form]} about the invoice"
    names = bool(scan_text33(text, [ORACLE_PERSON]).hits)
    mem = _copy(base, Path(tempfile.mkdtemp(dir=tmp_path)) / "m")
    with open_store(mem.store_path) as store:
        store.put(("users", BYSTANDERS[0].id, "memories"), "note", {"text": text, "kind": "fact"})
    fp = run.take(mem.target, SUBJECT)
    reported = ERASER.mentions(mem.target, SUBJECT)
    ERASER.erase(mem.target, SUBJECT)
    results = run.probe(mem.target, SUBJECT, fp)
    residue = {r.method: r.residue for r in results if r.tier == BYTES and r.residue}
    assert residue == {}, f"{form}: residue after the erasure, for ever"
    assert fp.mentions == reported, f"{form}: the probe counts {fp.mentions}, the eraser reports {reported}"
    if names:
        assert reported == 1, f"{form}: names the subject (oracle) but is not reported"
    shutil.rmtree(mem.root)
