"""`langgraph-postgres`: a bystander's item that names the subject in a spelling the rule reads, but no
literal search finds, is a mention on both sides (tests/targets/test_mentions_by_the_rule.py for the other
kinds, where the rule's families are drawn).

Before, the eraser counted mentions by an `ILIKE` over the literal spellings, and the probe made a literal
spelling found in other people's text a shared identifier: an address written with soft hyphens, or a note
pasted as base64, was no mention to either, and the views found it in the cluster's files after every
erasure (exit 7 on every run). Here the eraser reads every bystander's item by the rule (through its
prefilter), the probe by the views' reader, and the request ends with the mention reported and no residue.
The oracle (`tests.oracle33`) says the planted texts name the subject."""

from __future__ import annotations

import base64

import pytest

from probes.model import BYTES
from probes.targets import run
from tests.langgraph_postgres_fixtures import BYSTANDERS, SUBJECT, agent, build_memory, make_target
from tests.pg_cluster import cluster
from tests.targets.test_mentions_by_the_rule import oracle_names
from tests.targets.test_target_langgraph_postgres import SETTINGS, _bindir

assert SUBJECT.email
FORMS = {
    "email-soft-hyphens": "Ask " + "\u00ad".join(SUBJECT.email) + " about the invoice",
    "email-pasted-base64": "note: data:text/plain;base64,"
    + base64.b64encode(f"card: {SUBJECT.email}".encode()).decode(),
}


@pytest.mark.slow
@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_bystanders_item_naming_the_subject_by_the_rule_is_a_mention_on_both_sides(form: str) -> None:
    from tasks.targets.langgraph_postgres import ERASER

    text = FORMS[form]
    assert oracle_names(SUBJECT, text)
    with cluster(_bindir("pg15"), *SETTINGS, wal_segsize_mb=1) as c:
        with agent(c, "agent", indexed=False) as a:
            build_memory(a, "agent", copies=1, turns=1, threads_per_person=1)
            a.store.put(("users", BYSTANDERS[0].id, "memories"), "note", {"text": text, "kind": "fact"})
        target = make_target(c, "agent")
        fp = run.take(target, SUBJECT)
        reported = ERASER.mentions(target, SUBJECT)
        ERASER.erase(target, SUBJECT)
        results = run.probe(target, SUBJECT, fp)
    residue = {r.method: r.residue for r in results if r.tier == BYTES and r.residue}
    assert residue == {}, f"{form}: residue after the erasure, for ever"
    assert reported == fp.mentions == 1, (reported, fp.mentions)
