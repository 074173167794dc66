"""Issue 33's generated red team: 500+ scenarios of every family, judged by an oracle of its own.

One hypothesis example (derandomised) draws every window: a window holds the attacks of one group
(GROUPS: message-text attacks together, each file format on its own, because a file the product does not
read honestly makes every request of its window not all clear and would hide another attack's false all
clear), going round the group's attacks from a drawn offset, with
names from 20 Faker locales (Latin, Cyrillic, Greek, Arabic, Persian, Hebrew, Chinese, Japanese, Korean,
Devanagari, Thai, Vietnamese) and drawn seeds and variants. Every scenario plants one subject and
bystanders through `erasure ingest`; each window is erased at once (`erasure request run ID ID ...`), and
every request is judged by tests/redteam_documents_run.py: no false all clear, no request that ends in
exit 7 twice in a row, no bystander's words changed beyond recorded redactions (byte for byte for
everyday words, glued names and other people's longer addresses, numbers and foreign phones).

Size: REDTEAM_DOCS_SCENARIOS (default 500, as `make redteam` runs it; 400 in `make test`) in windows of
at most REDTEAM_DOCS_WINDOW (default 50), a group's share cut into windows of even size (the oracle's
reading of a window grows faster than its size: 11 s for 30 scenarios, 60 s for 100, measured);
`REDTEAM_DOCS_SCENARIOS=60 REDTEAM_DOCS_WINDOW=30` while
developing (every attack still runs). REDTEAM_DOCS_REPORT=PATH writes the table, the problems and the
timings of each shard as JSON (PATH.K.json).

Shards: the windows are shared out among SHARDS test files (tests/redteam/test_redteam_documents*.py; the
largest window first, to the shard with the fewest scenarios so far), so that `make test`'s workers
(`--dist loadfile`: a file is one unit of work) run them side by side instead of one worker running the
whole red team while the rest of the suite has ended. Every shard draws every window in the same order
(cheap: names and seeds) and runs its own: the scenarios are the same whatever the shards.
"""

from __future__ import annotations

import json
import math
import os
import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.redteam_documents_plants import FAMILIES, LOCALES, Scenario
from tests.redteam_documents_run import CATEGORIES, Problem, WindowReport, run_window
from tests.redteam_documents_scenarios import Window, build

SCENARIOS = int(os.environ.get("REDTEAM_DOCS_SCENARIOS", "500"))
WINDOW = int(os.environ.get("REDTEAM_DOCS_WINDOW", "50"))
ATTACKS = tuple(FAMILIES)
ATTACHABLE = ("html-tags", "html-table", "xml-fields")
"""Attacks planted in a message's text for even variants and as an attachment for odd ones."""
FILES = ("pdf-kerned", "rtf-escapes", "docx-runs", *(f"{a}+file" for a in ATTACHABLE))
GROUPS: dict[str, tuple[str, ...]] = {
    "families 1-3 in message text": tuple(a for a in ATTACKS if FAMILIES[a] <= 3 and a not in FILES[:3]),
    "families 5-6: others' words, requests that must end": tuple(a for a in ATTACKS if FAMILIES[a] >= 5),
    **{f"family 1 file: {a}": (a,) for a in FILES},
    **{f"family 4 file: {a}": (a,) for a in ATTACKS if FAMILIES[a] == 4},
}
"""The attacks a window holds. A file the product does not read honestly makes EVERY request of its window
not all clear (`unscanned_content`), which would hide the false all clear of any other attack in that
window (measured: none of 200 scenarios of families 1-3 could show one while they shared windows with
their attachments). So message-text attacks share windows, and each file format has windows of its own."""
SHARES = {"families 1-3 in message text": 0.4, "families 5-6: others' words, requests that must end": 0.3}
"""Of SCENARIOS; the file formats share the remaining 0.3 equally."""


def plan() -> list[tuple[str, int]]:
    """(group, size) of each window: SCENARIOS shared out by SHARES, in windows of at most WINDOW."""
    rest = (1 - sum(SHARES.values())) / (len(GROUPS) - len(SHARES))
    out: list[tuple[str, int]] = []
    for group, attacks in GROUPS.items():
        n = max(len(attacks), math.ceil(SCENARIOS * SHARES.get(group, rest)))  # never fewer than SCENARIOS
        count = math.ceil(n / WINDOW)
        out += [(group, n // count + (k < n % count)) for k in range(count)]
    return out


WINDOWS = plan()
SHARDS = 4
"""One test file per shard: tests/redteam/test_redteam_documents.py runs shard 0, ..._shard1.py to
..._shard3.py the others."""


WINDOW_COST = 8
"""What a window costs besides its scenarios, in scenarios: its store, keys, flow run and the oracle's
reading of its home (measured: a file window of 9 scenarios about 15 s, a text window 0.8 s a scenario)."""


def shard_of() -> list[int]:
    """The shard of each window of WINDOWS: the largest window first, to the shard with the least work
    so far (longest processing time first; a window's work is its size and WINDOW_COST)."""
    load = [0] * SHARDS
    out = [0] * len(WINDOWS)
    for i in sorted(range(len(WINDOWS)), key=lambda i: -WINDOWS[i][1]):
        k = load.index(min(load))
        out[i] = k
        load[k] += WINDOWS[i][1] + WINDOW_COST
    return out


SHARD_OF = shard_of()


@st.composite
def windows(draw: st.DrawFn, group: str, size: int) -> list[Scenario]:
    """One window of `size` scenarios of `group`: attacks round the group's list from a drawn offset
    (every attack of the group in every window at least as long as the list); locale, seed and variant of
    each from a generator seeded by one drawn number (so that even hypothesis's first, simplest example
    spreads over the locales). `X+file` is attack X planted as an attachment (an odd variant); X alone in
    a message-text group, in the text (an even one)."""
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    attacks = GROUPS[group]
    start = rng.randrange(len(attacks))
    w = Window()
    out = []
    for i in range(size):
        attack, variant = attacks[(start + i) % len(attacks)], rng.randrange(8)
        if attack.endswith("+file"):
            attack, variant = attack.removesuffix("+file"), variant | 1
        elif attack in ATTACHABLE:
            variant &= ~1
        out.append(build(i, attack, rng.choice(LOCALES), rng.randrange(10**6), variant, w))
    return out


@pytest.fixture
def harness_url(prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> str:
    """The session's Prefect test server, exported as PREFECT_API_URL (as a user's long-lived server)."""
    from prefect.settings import PREFECT_API_URL

    url = str(PREFECT_API_URL.value())
    monkeypatch.setenv("PREFECT_API_URL", url)
    return url


def table(problems: list[Problem], ran: list[Scenario]) -> str:
    """Problems per family and attack, by category, with how many scenarios of each ran."""
    per = Counter((p.scenario.family, p.scenario.attack, p.category) for p in problems)
    runs = Counter((s.family, s.attack) for s in ran)
    lines = [f"{'family':6} {'attack':22} {'ran':>4} " + " ".join(f"{c:>17}" for c in CATEGORIES)]
    for (fam, attack), n in sorted(runs.items()):
        lines.append(f"{fam:<6} {attack:22} {n:>4} " + " ".join(f"{per[(fam, attack, c)]:>17}" for c in CATEGORIES))
    return "\n".join(lines)


def run_shard(shard: int) -> None:
    """Run the windows of one shard of SCENARIOS generated scenarios in windows of WINDOW (derandomised;
    every window runs, no shrinking: each costs an erasure window) and assert that none had a problem,
    reported at the end as a table. Needs the session's Prefect server (`harness_url`)."""
    mine = [i for i, k in enumerate(SHARD_OF) if k == shard]
    problems: list[Problem] = []
    ran: list[Scenario] = []
    reports: list[WindowReport] = []
    t0 = time.monotonic()

    @settings(
        derandomize=True,
        max_examples=1,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def all_windows(data: st.DataObject) -> None:
        for i, (group, size) in enumerate(WINDOWS):
            scenarios = data.draw(windows(group, size), label=f"{group} x {size}")
            if i not in mine:
                continue
            with tempfile.TemporaryDirectory(prefix="redteam-docs-") as tmp:
                rep = run_window(Path(tmp), scenarios)
            reports.append(rep)
            problems.extend(rep.problems)
            ran.extend(scenarios)

    all_windows()
    seconds = time.monotonic() - t0
    summary = table(problems, ran)
    if path := os.environ.get("REDTEAM_DOCS_REPORT"):
        Path(f"{path}.{shard}.json").write_text(
            json.dumps(
                {
                    "scenarios": len(ran),
                    "seconds": seconds,
                    "windows": [
                        {"group": g, "size": n, "seconds": r.seconds, "exits": r.exits}
                        for (g, n), r in zip([WINDOWS[i] for i in mine], reports, strict=False)
                    ],
                    "statuses": Counter(s for r in reports for s in r.statuses.values()),
                    "outcomes": Counter(o for r in reports for o in r.outcomes.values()),
                    "table": summary,
                    "problems": [str(p) for p in problems],
                },
                indent=1,
                ensure_ascii=False,
            )
        )
    oracle = [p for p in problems if p.category == "oracle"]
    assert not oracle, "the oracle is blind or trigger-happy:\n" + "\n".join(map(str, oracle[:30]))
    assert not problems, (
        f"{len(problems)} problems in {len(ran)} scenarios ({seconds:.0f} s):\n{summary}\n"
        + "\n".join(map(str, problems[:60]))
    )
    wanted = sum(WINDOWS[i][1] for i in mine)
    assert len(ran) == wanted, f"{len(ran)} scenarios ran, {wanted} planned for shard {shard}"
    attacks = {a.removesuffix("+file") for i in mine for a in GROUPS[WINDOWS[i][0]]}
    assert {s.attack for s in ran} == attacks, "an attack of issue 33 was not drawn"
    locales = {s.locale for s in ran}  # 12 or more at CI's size (136 a shard); fewer in a developer's few
    assert len(locales) >= min(12, len(ran) // 4), f"names from {len(locales)} Faker locales only"


def shard_test(shard: int) -> Callable[[str], None]:
    """The test of one shard, for its own file (`test_issue33_... = shard_test(k)`, with the `harness_url`
    fixture imported beside it): a file is one unit of work for `make test`'s workers."""

    @pytest.mark.slow
    @pytest.mark.redteam_generated
    @pytest.mark.timeout(len(WINDOWS) * 900)
    def test_issue33_scenarios_never_certify_leave_stuck_or_rewrite_a_bystander(harness_url: str) -> None:
        run_shard(shard)

    test_issue33_scenarios_never_certify_leave_stuck_or_rewrite_a_bystander.__doc__ = (
        f"Shard {shard}'s windows: no false all clear, no request stuck, no bystander's words changed."
    )
    return test_issue33_scenarios_never_certify_leave_stuck_or_rewrite_a_bystander
