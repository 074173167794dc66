"""Issue 33 by hand: one case per family bullet, each named after its attack, erased through the real
`erasure` CLI in the window of its group (the generated red team's GROUPS: message-text attacks together,
each file format in a window of its own, so that a file the product declares unread cannot hide another
case's false all clear), each case judged on its own by the issue-33 oracle (tests/oracle33) and its rule
(tests/redteam_documents_run.py): no false all clear, no exit 7 on the run and the rerun, bystanders'
words unchanged but for recorded redactions (byte for byte where the plant is another person's own
words). The generated red team (tests/redteam/test_redteam_documents.py) draws the same attacks by the hundred.
"""

from __future__ import annotations

import pytest

from tests.redteam_documents_plants import FAMILIES
from tests.redteam_documents_run import WindowReport, probe, run_window
from tests.redteam_documents_scenarios import Window, build
from tests.redteam_documents_shards import ATTACHABLE, GROUPS

CASES: list[tuple[str, str, int, str]] = [
    # (attack, Faker locale, variant, what the bystander's item or the attachment holds)
    ("html-tags", "de_DE", 0, "<b>Given</b> <i>Family</i> in a bystander's chat message"),
    ("html-table", "fr_FR", 1, "an HTML attachment: given and family in two cells of one table row"),
    ("xml-fields", "pl_PL", 1, "an XML attachment: <givenName> and <familyName> elements"),
    ("json-fields", "ru_RU", 1, "a pasted tool result: given_name / family_name fields, \\u escapes"),
    ("middle-name", "es_ES", 1, "Given M. Family: an initial between the two"),
    ("pdf-kerned", "fr_FR", 1, "a PDF attachment: the name in a TJ array of kerned 1-3 letter pieces"),
    ("rtf-escapes", "el_GR", 0, "an RTF attachment: Greek letters as \\uN? escapes, a bold group inside"),
    ("docx-runs", "cs_CZ", 0, "a DOCX attachment: the paragraph's runs cut inside the names"),
    ("idn-email", "en_US", 0, "request: kunde@bücher-…; text: the punycode domain"),
    ("idn-email", "en_US", 1, "request: the punycode domain; text: kunde@bücher-…"),
    ("other-digits", "ar_AA", 0, "the phone in Eastern-Arabic digits"),
    ("other-digits", "fa_IR", 3, "the national number in Persian digits"),
    ("cjk-space", "zh_CN", 0, "request 王 伟 with a space, text without"),
    ("cjk-space", "ja_JP", 1, "request without a space, text with one"),
    ("apostrophe", "en_US", 0, "request O'Brien, text O’Brien (typographic)"),
    ("apostrophe", "en_US", 1, "request O'Brien, text OBrien (dropped)"),
    ("email-digest", "de_DE", 0, "a Gravatar URL with the md5 of the address"),
    ("email-digest", "de_DE", 2, "an ad-audience CSV with the sha256 of the address"),
    ("at-dot", "en_US", 0, "name at domain dot example"),
    ("zstd", "uk_UA", 0, "a zstd attachment"),
    ("lz4", "he_IL", 0, "an lz4 attachment"),
    ("brotli", "hi_IN", 0, "a brotli attachment (no magic number)"),
    ("7z", "ko_KR", 0, "a 7z attachment"),
    ("bmp", "th_TH", 0, "a BMP picture of the address"),
    ("image-metadata", "ru_RU", 0, "a blank PNG whose Author text chunk holds the subject's name"),
    ("image-metadata", "en_US", 1, "a blank JPEG whose EXIF Artist holds the subject's address"),
    ("high-entropy", "tr_TR", 0, "3 KB of high-entropy bytes holding the contact sheet enciphered"),
    ("sqlite-freed", "vi_VN", 0, "a second SQLite file in the store folder: the address in freed pages, split"),
    ("longer-email", "en_US", 0, "a bystander's mary-lee@… and lee@….au beside subject lee@…"),
    ("invoice-number", "en_US", 0, "invoice INV-<id>05 beside a numeric subject id"),
    ("everyday-words", "en_US", 0, "subject April May; a bystander writes 'April. May we…'"),
    ("glued-name", "en_US", 0, "subject Li Na; a bystander writes 'Lina from accounts'"),
    ("no-trunk-zero", "en_US", 0, "20 7946 … without the trunk 0; someone's +1 207 946 … beside it"),
    ("curly-apostrophe", "en_US", 0, "request O’Brien (curly), text O'Brien"),
    ("cjk-in-text", "zh_CN", 0, "a Chinese name inside a Chinese sentence, no spaces"),
    ("bystander-attachment", "de_DE", 0, "a bystander's attachment naming the subject"),
    ("escaped-url", "en_US", 0, "a percent-encoded phone in a bystander's link: tel=%2B44%2020%207946%20…"),
    ("escaped-url", "ru_RU", 2, "a Cyrillic name in HTML references without their ';'"),
    ("conversation-key", "en_US", 0, "a bystander's conversation key dm/<their email>/<subject email>"),
    ("conversation-key", "en_US", 1, "a bystander's conversation key sms/<their email>/+44…: the subject's number"),
]


def test_every_attack_has_a_case() -> None:
    assert {c[0] for c in CASES} == set(FAMILIES)


@pytest.mark.parametrize("attack", list(FAMILIES))
def test_the_oracle_finds_each_planted_piece_that_names_the_subject_and_no_other(attack: str) -> None:
    """No CLI: each attack in four variants and two locales; the oracle (tests/oracle33) must find the
    subject in every piece that names them and in none that does not (a blind or trigger-happy oracle
    fails here before any product is judged)."""
    w = Window()
    for n, (locale, variant) in enumerate([("de_DE", 0), ("ru_RU", 1), ("zh_CN", 2), ("hi_IN", 3)]):
        sc = build(n, attack, locale, 1000 + n, variant, w)
        for plant in sc.plants:
            assert probe(plant, sc) == plant.names_subject, (attack, locale, variant, plant.item, plant.names_subject)


def group_of(attack: str, variant: int) -> str:
    """The generated red team's window group of a case: an attachable attack with an odd variant is
    planted as a file (tests/redteam_documents_plants.py), so it is that file's group."""
    if attack in ATTACHABLE and variant % 2:
        return f"family 1 file: {attack}+file"
    return next(g for g, attacks in GROUPS.items() if attack in attacks)


FIRST = 7
"""A window's first scenario number: a case alone in its window is the scenario it was as a window of one
(its ids, address and phone are built from this number)."""


@pytest.fixture(scope="module")
def judged(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[WindowReport, str]]:
    """Every case erased in its group's window, on the session's Prefect server: per case, the window's
    report and the case's request id."""
    from prefect.settings import PREFECT_API_URL

    windows: dict[str, list[int]] = {}
    for k, (attack, _locale, variant, _what) in enumerate(CASES):
        windows.setdefault(group_of(attack, variant), []).append(k)
    out: dict[int, tuple[WindowReport, str]] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PREFECT_API_URL", str(PREFECT_API_URL.value()))
        for group, cases in windows.items():
            w = Window()
            scenarios = [build(FIRST + n, CASES[k][0], CASES[k][1], 4242, CASES[k][2], w) for n, k in enumerate(cases)]
            report = run_window(tmp_path_factory.mktemp(group.split(":")[0].replace(" ", "-")), scenarios)
            out.update({k: (report, sc.request_id) for k, sc in zip(cases, scenarios, strict=True)})
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "attack", "variant", "what"), [(k, c[0], c[2], c[3]) for k, c in enumerate(CASES)],
    ids=[f"{c[0]}-{c[2]}" for c in CASES],
)  # fmt: skip
def test_attack(
    judged: dict[int, tuple[WindowReport, str]], case: int, attack: str, variant: int, what: str
) -> None:  # fmt: skip
    """One scenario of `attack` (`what`), erased in its group's window, judged by the rule."""
    report, rid = judged[case]
    mine = [p for p in report.problems if p.scenario.request_id == rid]
    assert not mine, f"{attack} ({what}), outcome {report.outcomes.get(rid)}, status {report.statuses.get(rid)}:\n" + (
        "\n".join(map(str, mine))
    )
    assert rid in report.outcomes, f"{rid} was not in its window: {sorted(report.outcomes)}"
