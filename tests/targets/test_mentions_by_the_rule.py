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
import gzip
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from erasure.subject import Subject
from erasure.targets import Target
from probes.model import BYTES
from probes.targets import run
from tasks.targets.eraser import TargetEraser
from tests import budget
from tests import chroma_fixtures as ch
from tests import graphiti_fixtures as gr
from tests import langgraph_sqlite_fixtures as lg
from tests import mem0_fixtures as m0
from tests.oracle33.match import Person33
from tests.oracle33.scan import scan_text33

# Each kind's memory is a fixture the test asks for by name (`request.getfixturevalue`), which the tiers'
# reading of fixture closures does not see: the framework tier by hand.
pytestmark = pytest.mark.framework

EASTERN = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")


def forms(subject: Subject) -> dict[str, str]:
    """The subject named in each of the rule's families (and a text that names nobody)."""
    assert subject.email and subject.name and subject.phone
    local, _, domain = subject.email.partition("@")
    given, family = subject.name.split()
    return {
        "nobody": "the parcel came on Tuesday",
        "email-soft-hyphens": "\u00ad".join(subject.email),
        "email-zero-width": f"{local}\u200b@{domain}",
        "email-entities": subject.email.replace(".", "&#46;").replace("@", "&#64;"),
        "email-percent": f"mailto:{local}%40{domain}",
        "email-pasted-base64": "data:text/plain;base64," + base64.b64encode(f"card: {subject.email}".encode()).decode(),
        "name-json-escaped": json.dumps(subject.name, ensure_ascii=True)[1:-1].replace("a", "\\u0061"),
        "name-diacritics": f"{given.replace('a', 'á', 1)} {family[0]}\u0301{family[1:]}",
        "name-upper-in-tags": f"<b>{given.upper()}</b> <i>{family.upper()}</i>",
        "phone-eastern-arabic": subject.phone.translate(EASTERN),
        "phone-pasted-base64": base64.b64encode(f"call {subject.phone} after six".encode()).decode(),
    }


FORMS = sorted(forms(lg.SUBJECT))


def oracle_names(subject: Subject, text: str) -> bool:
    """Whether the red team's oracle reads the subject in `text`."""
    assert subject.name
    given, family = subject.name.split()
    person = Person33(
        id=subject.id, email=subject.email, given=given, family=family, phone=subject.phone, name=subject.name
    )
    return bool(scan_text33(text, [person]).hits)


@dataclass
class Kind:
    """A store kind's memory, built once: a copy of it with one bystander record written in (its target)."""

    subject: Subject
    eraser: TargetEraser
    planted: Callable[[Path, str], Target]
    mentions: int
    """Records of other people that name the subject in the memory as built."""


@pytest.fixture(scope="module")
def langgraph_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Kind:
    from tasks.targets.langgraph_sqlite import ERASER

    base = lg.build_memory(tmp_path_factory.mktemp("lg") / "base", mentions=False)

    def planted(dest: Path, text: str) -> Target:
        shutil.copytree(base.root, dest)
        with lg.open_store(dest / base.store_path.name) as store:
            store.put(("users", lg.BYSTANDERS[0].id, "memories"), "note", {"text": text, "kind": "fact"})
        return lg.make_target(dest, base.store_path.name, base.checkpoints_path.name)

    return Kind(lg.SUBJECT, ERASER, planted, 0)


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Kind:
    from tasks.targets.chroma import ERASER

    base = ch.build_memory(tmp_path_factory.mktemp("ch") / "base" / "chroma", per_collection=60)

    def planted(dest: Path, text: str) -> Target:
        shutil.copytree(base.path, dest / "chroma")
        c = ch.reopen(dest / "chroma")
        try:
            c.get_collection("facts", embedding_function=ch.hash_embedding()).add(
                ids=["bystander-note"], documents=[text], metadatas=[{ch.SUBJECT_KEY: ch.BYSTANDERS[0], "n": 0}]
            )
        finally:
            c.close()
        target: Target = ch.target_for(dest / "chroma")
        return target

    return Kind(ch.SUBJECT, ERASER, planted, 1)  # the fixture's MENTION_TEXT


@pytest.fixture(scope="module")
def mem0() -> Kind:
    from tasks.targets.mem0 import ERASER

    def planted(dest: Path, text: str) -> Target:
        built = m0.built_copy(dest)
        m = m0.open_memory(dest)
        try:
            m.add([{"role": "user", "content": text}], user_id=m0.BYSTANDERS[0].id, infer=False)
        finally:
            m0.close_memory(m)
        return built.target()

    return Kind(m0.SUBJECT, ERASER, planted, 0)


@pytest.fixture(scope="module")
def graphiti(tmp_path_factory: pytest.TempPathFactory) -> Kind:
    from graphiti_core.nodes import EpisodeType, EpisodicNode

    from tasks.targets.graphiti import ERASER

    cache = tmp_path_factory.mktemp("gr-cache")

    def planted(dest: Path, text: str) -> Target:
        built = gr.built_copy(dest, cache)

        async def episode(driver: Any) -> None:
            when = datetime(2024, 5, 1, tzinfo=UTC)
            await EpisodicNode(
                name="chat",
                group_id=gr.group_of(gr.BYSTANDERS[0]),
                source=EpisodeType.message,
                source_description="support chat",
                content=text,
                valid_at=when,
                created_at=when,
            ).save(driver)

        gr.with_driver(built.db, episode)
        target: Target = built.target()
        return target

    return Kind(gr.SUBJECT, ERASER, planted, 2)  # the fixture's bystander episode and community summary


KINDS = ["langgraph_sqlite", "chroma", "mem0", "graphiti"]


@pytest.mark.parametrize("kind_name", KINDS)
@settings(
    max_examples=budget.examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(form=st.sampled_from(FORMS), before=st.sampled_from(["note: ", "", "Ask "]))
@example(form="email-soft-hyphens", before="Ask ")
@example(form="email-pasted-base64", before="note: ")
@example(form="nobody", before="")
def test_a_bystanders_record_naming_the_subject_is_a_mention_on_both_sides(
    request: pytest.FixtureRequest, kind_name: str, tmp_path: Path, form: str, before: str
) -> None:
    kind: Kind = request.getfixturevalue(kind_name)
    text = f"{before}{forms(kind.subject)[form]} about the invoice"
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    try:
        target = kind.planted(folder / "m", text)
        fp = run.take(target, kind.subject)
        reported = kind.eraser.mentions(target, kind.subject)
        kind.eraser.erase(target, kind.subject)
        results = run.probe(target, kind.subject, fp)
    finally:
        shutil.rmtree(folder)
    residue = {r.method: r.residue for r in results if r.tier == BYTES and r.residue}
    assert residue == {}, f"{form}: residue after the erasure, for ever"
    assert fp.mentions == reported, f"{form}: the probe counts {fp.mentions}, the eraser reports {reported}"
    if oracle_names(kind.subject, text):
        assert reported > kind.mentions, f"{form}: names the subject (oracle) but is not reported"


def test_a_mention_the_eraser_reads_less_of_is_declared_by_the_verification(
    langgraph_sqlite: Kind, tmp_path: Path
) -> None:
    """A bystander's note holding the subject's card compressed, then base64: the probe's reader opens the
    gzip stream, the erasing side's matcher reads text, escapes and base64 of text. The mentions the probe
    explains are declared by the verification itself (`others_content`), so the pack says them whatever
    the eraser reported."""
    kind = langgraph_sqlite
    assert kind.subject.email
    text = "see " + base64.b64encode(gzip.compress(f"card: {kind.subject.email}".encode())).decode()
    target = kind.planted(tmp_path / "m", text)
    fp = run.take(target, kind.subject)
    reported = kind.eraser.mentions(target, kind.subject)
    kind.eraser.erase(target, kind.subject)
    verification = run.verify(target, kind.subject, fp)
    assert not [r for r in verification.probes if r.residue], "residue after the erasure"
    assert fp.mentions == 1 and reported <= fp.mentions
    assert [(o.kind, o.label, o.hits) for o in verification.others_content] == [("mentions", "target:support-agent", 1)]


def test_the_targets_declared_mentions_reach_the_requests_verification() -> None:
    from probes.model import OthersContent, Verification
    from service.verification import Probed

    declared = OthersContent(tier=BYTES, kind="mentions", label="target:t", hits=2)
    got = Probed(1, None, [[Verification(probes=[], unscanned=[], others_content=[declared])]]).finish()
    assert got[0].others_content == [declared]
