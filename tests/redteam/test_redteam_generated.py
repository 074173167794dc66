"""A generated red team of "the certificate tells the truth about every spelling", checked by the oracle.

Each hypothesis example (derandomised) builds one reference store through the real CLI and plants
SCENARIOS scenarios in it, each drawn as: identifier kind (id, email, name, phone) x spelling x encoding
(raw, JSON escapes, percent, HTML entities, quoted-printable, base64) x container (the item's text, or an
attachment: plain, gzip, zip, UTF-16, PDF FlateDecode) x tier (with or without a fine-tune example) x
owner (the subject's own item, a bystander's item that mentions them, a namesake's own item). Every
scenario has its own subject; all of them are erased at once as one erasure window (`erasure request
run ID ID ...`), so one flow run covers a whole example. The rule, per subject, by the oracle
(tests/oracle.py): a request that ends all clear leaves nothing of its subject in any decoded view of
any file of the home; bystanders' items are unchanged except recorded redactions ("[redacted]" where
the subject was); namesakes' items and attachments are unchanged byte for byte.

Target kind: the reference store only. A home whose targets.toml names framework stores runs a window's
requests one by one (README), which does not fit hundreds of scenarios in a few minutes; the framework
kinds are covered case by case in tests/redteam/test_issue22_cases.py (cases 6, 7, 10).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import re
import tempfile
import urllib.parse
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from erasure.config import Home
from tests.cli_fixtures import erasure
from tests.oracle import Scan, scan_home
from tests.oracle_person import Person
from tests.redteam_fixtures import HONEST_KINDS, archive_content, blob_digests, home_env, ok, pack_files, redaction_of

SCENARIOS = 50
EXAMPLES = int(os.environ.get("REDTEAM_EXAMPLES", "1"))
"""Windows of SCENARIOS generated scenarios: six (300 scenarios) in `make test` and `make redteam`, one
when the file is run alone (every kind of scenario is drawn in the first window)."""

FIRST = ["Maren", "Tobias", "Ilse", "Oskar", "Greta", "Lukas", "Frieda", "Anselm", "Wiebke", "Jorinde"]
LAST = ["Weiß", "Müller", "Großmann", "Kranich", "Östberg", "Falkenrath", "Lindqvist", "Brüning", "Quast", "Hesselbach"]
BOB = {"id": "usr-bob-0042", "email": "bob.marsh@example.net", "name": "Bob Marsh", "phone": "+1 555 0100"}
CARA = {"id": "usr-cara-0077", "email": "cara.nunes@example.com", "name": "Cara Nunes", "phone": "+351 912 345 678"}


def subject_of(i: int) -> dict[str, str]:
    return {
        "id": f"usr-g-{i:03d}",
        "email": f"person{i:03d}.x@mail.example",
        "name": f"{FIRST[i % 10]} {LAST[i // 10 % 10]}",
        "phone": f"+44 20 7946 {i:04d}",
    }


def own_words(i: int) -> Person:
    """The words of subject i's own item ("my order 7 of walnut shelves"), as the oracle looks for an
    id: where a namesake keeps the name by right, these say whether the subject's own item is gone."""
    return Person(id=f"my order {i} of walnut shelves")


def namesake_of(i: int) -> dict[str, str]:
    s = subject_of(i)
    return {
        "id": f"usr-ns-{i:03d}",
        "email": f"other{i:03d}@post.example",
        "name": s["name"],
        "phone": f"+44 161 496 {i:04d}",
    }


# --- spellings, encodings, containers -------------------------------------------------------------


def _translit(name: str) -> str:
    return name.replace("ß", "ss").replace("ü", "ue").replace("ö", "oe").replace("Ö", "Oe")


def spell(kind: str, how: int, s: dict[str, str]) -> str:
    first, last = s["name"].split(" ", 1)
    digits = re.sub(r"\D", "", s["phone"])
    options = {
        "id": [
            s["id"],
            s["id"].upper(),
            s["id"].replace("-", "_"),
            "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s["id"]),
        ],
        "email": [s["email"], s["email"].upper(), s["email"].replace("@", "+orders@")],
        "name": [
            s["name"],
            f"{last}, {first}",
            f"{first}\t{last}",
            f"{first}\n{last}",
            f"{first} {last[:2]}\u00ad{last[2:]}",
            _translit(s["name"]),
            s["name"].upper(),
        ],
        "phone": [
            s["phone"],
            "00" + digits,
            "+44\u201120\u20117946\u2011" + digits[-4:],
            f"(020) 7946 {digits[-4:]}",
            "+" + digits,
        ],
    }[kind]
    return options[how % len(options)]


def encode(text: str, how: str) -> str:
    if how == "json":
        return json.dumps({"tool_result": text}).replace("@", "\\u0040").replace(" ", "\\u0020")
    if how == "percent":
        return "https://crm.example/q?who=" + urllib.parse.quote(text, safe="")
    if how == "html":
        return "".join(c if c.isalnum() else f"&#{ord(c)};" for c in text)
    if how == "qp":
        return "".join(c if c.isalnum() and c.isascii() else "".join(f"={b:02X}" for b in c.encode()) for c in text)
    if how == "base64":
        return "log payload=" + base64.b64encode(text.encode()).decode()
    return text


def container_bytes(text: str, how: str) -> tuple[str, bytes]:
    data = text.encode("utf-8")
    if how == "gzip":
        return "note.txt.gz", gzip.compress(data)
    if how == "zip":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("note.txt", data)
        return "note.zip", buf.getvalue()
    if how == "utf16":
        return "note-utf16.txt", text.encode("utf-16")
    if how == "pdf":
        stream = zlib.compress(b"BT (" + data + b") Tj ET")
        return "note.pdf", (
            b"%PDF-1.4\n1 0 obj\n<< /Length "
            + str(len(stream)).encode()
            + b" /Filter /FlateDecode >>\nstream\n"
            + stream
            + b"\nendstream\nendobj\n%%EOF\n"
        )
    return "note.txt", data


@dataclass(frozen=True)
class Scenario:
    kind: str
    spelling: int
    encoding: str
    container: str  # "content" or an attachment container
    training: bool
    owner: str  # own | bystander | namesake


scenarios = st.builds(
    Scenario,
    kind=st.sampled_from(["id", "email", "name", "phone"]),
    spelling=st.integers(0, 6),
    encoding=st.sampled_from(["raw", "json", "percent", "html", "qp", "base64"]),
    container=st.sampled_from(["content", "content", "plain", "gzip", "zip", "utf16", "pdf"]),
    training=st.booleans(),
    owner=st.sampled_from(["own", "bystander", "bystander", "namesake"]),
)


def plant(i: int, sc: Scenario, files: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The planted item of scenario i, and who owns it."""
    s = subject_of(i)
    kind = "name" if sc.owner == "namesake" else sc.kind
    text = f"Note {i}: {encode(spell(kind, sc.spelling, s), sc.encoding)} asked about the walnut order {i}."
    owner = {"own": s, "bystander": (BOB, CARA)[i % 2], "namesake": namesake_of(i)}[sc.owner]
    content = text if sc.container == "content" else f"Attached note {i} about the walnut order."
    it: dict[str, Any] = {
        "source": "chat",
        "source_ref": f"plant-{i:03d}",
        "subject": owner,
        "content": content,
        "training": sc.training,
    }
    if sc.container != "content":
        name, data = container_bytes(text, sc.container)
        path = files / f"{i:03d}-{name}"
        path.write_bytes(data)
        it["attachments"] = [str(path)]
    return it, owner


@pytest.fixture
def harness_url(prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> str:
    from prefect.settings import PREFECT_API_URL

    url = str(PREFECT_API_URL.value())
    monkeypatch.setenv("PREFECT_API_URL", url)
    return url


@pytest.mark.slow
@pytest.mark.redteam_generated
@pytest.mark.timeout(EXAMPLES * 600)  # one window of 50 an example: under 2 min seen on a loaded 2-CPU machine
def test_generated_scenarios_never_certify_a_subject_the_oracle_still_finds(harness_url: str) -> None:
    """EXAMPLES x SCENARIOS generated scenarios (derandomised): every example runs (no stop at the first
    failing one, no shrinking: each costs a window), and the problems of all are reported at the end."""
    problems: list[str] = []
    ran: list[int] = []

    @settings(
        derandomize=True,
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(plan=st.lists(scenarios, min_size=SCENARIOS, max_size=SCENARIOS))
    def one_window(plan: list[Scenario]) -> None:
        with tempfile.TemporaryDirectory(prefix="redteam-gen-") as tmp:
            problems.extend(run_example(Path(tmp), plan, check=False, namesake_clear=True))
        ran.append(len(plan))

    one_window()
    assert sum(ran) >= EXAMPLES * SCENARIOS, ran
    assert not problems, f"{len(problems)} of {sum(ran)} scenarios broke the rule:\n" + "\n".join(problems[:60])


def run_example(tmp: Path, plan: list[Scenario], *, check: bool = True, namesake_clear: bool = False) -> list[str]:
    """Build, plant, erase as one window, check; the problems found (asserted when `check`).
    `namesake_clear`: a namesake scenario must end all clear, not only honestly (see KNOWN)."""
    home = Home.resolve(tmp / "home", tmp / "evidence").ensure()
    with home_env(home):
        problems = _example(home, tmp, plan, namesake_clear)
    assert not check or not problems, f"{len(problems)} of {len(plan)} scenarios broke the rule:\n" + "\n".join(
        problems[:30]
    )
    return problems


def _example(home: Home, tmp: Path, plan: list[Scenario], namesake_clear: bool) -> list[str]:
    h = str(home.root)
    inputs = tmp / "in"
    files = inputs / "files"
    files.mkdir(parents=True)
    ok(erasure("store", "init", "--home", h))
    ok(erasure("keys", "generate", "--role", "engine", "--home", h))
    items: list[dict[str, Any]] = [
        {"source": "chat", "source_ref": "base-bob", "subject": BOB, "content": "Bob keeps bees near the depot."},
        {"source": "chat", "source_ref": "base-cara", "subject": CARA, "content": "Cara renews the atlas loan."},
    ]
    owners: dict[int, dict[str, str]] = {}
    for i, sc in enumerate(plan):
        s = subject_of(i)
        items.append(
            {
                "source": "chat",
                "source_ref": f"own-{i:03d}",
                "subject": s,
                "content": f"Hello, this is {s['name']}: my order {i} of walnut shelves is late.",
            }
        )
        it, owner = plant(i, sc, files)
        items.append(it)
        owners[i] = owner
    path = inputs / "items.jsonl"
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in items), encoding="utf-8")
    ok(erasure("ingest", str(path), "--home", h, "--json"))
    people = [Person(**subject_of(i)) for i in range(len(plan))]
    markers = [own_words(i) for i in range(len(plan))]
    before = scan_home(home.root, home.evidence_root, *people, *markers)
    blind = [
        i
        for i, sc in enumerate(plan)
        if not before.of(markers[i].id) or (sc.owner != "namesake" and not before.of(people[i].id))
    ]
    if blind:
        return [f"the oracle misses planted scenario {i} before the erasure: {plan[i]}" for i in blind]
    others = [i for i, sc in enumerate(plan) if sc.owner != "own"]
    archived = {i: archive_content(home, "chat", f"plant-{i:03d}") for i in others}
    shas_before = set(blob_digests(home))
    rids = [f"req-g-{i:03d}" for i in range(len(plan))]
    for i, rid in enumerate(rids):
        env = {
            "request_id": rid,
            "tenant_id": "default",
            "subject": subject_of(i),
            "legal_basis": "GDPR",
            "received_at": "2026-11-30T09:30:00+00:00",
            "requester_identity_proof_ref": "idv/gen",
            "reason": "Art.17 request via the privacy portal",
        }
        p = inputs / f"{rid}.json"
        p.write_text(json.dumps(env, ensure_ascii=False), encoding="utf-8")
        ok(erasure("request", "submit", str(p), "--home", h))
    res = erasure("request", "run", *rids, "--home", h, "--json")
    after = scan_home(home.root, home.evidence_root, *people, *markers)
    problems: list[str] = []
    for i, rid in enumerate(rids):
        files_ = pack_files(home, rid)
        manifest = json.loads(files_["manifest.json"]) if "manifest.json" in files_ else {}
        ver_path = home.evidence_dir(rid) / "verification.json"
        ver = json.loads(ver_path.read_text()) if ver_path.exists() else {}
        kinds = {str(e.get("kind")) for e in ver.get("exceptions", [])}
        clear = manifest.get("all_clear") is True and manifest.get("status") == "erased"
        left = after.of(people[i].id)
        if plan[i].owner == "namesake":  # the namesake keeps the name, in their own item, by right
            left = Scan([h for h in left.hits if h.kind != "name"], left.unread)
        left.hits += after.of(markers[i].id).hits
        if clear and left:
            problems.append(f"{rid} {plan[i]}: ALL CLEAR while the oracle finds: {left.summary(3)}")
        elif not clear and plan[i].owner == "namesake" and namesake_clear:
            problems.append(
                f"{rid} {plan[i]}: not all clear although the name left is a namesake's own: status "
                f"{manifest.get('status')}, exceptions {sorted(kinds)}, unscanned "
                f"{[(u.get('reason'), u.get('folder')) for u in ver.get('unscanned_content', [])][:3]}"
            )
        elif not clear and res.code == 0 and not kinds & HONEST_KINDS:
            problems.append(
                f"{rid} {plan[i]}: exit 0 without all clear and without a specific exception: "
                f"status {manifest.get('status')}, exceptions {sorted(kinds)}"
            )
    for i in others:
        now = archive_content(home, "chat", f"plant-{i:03d}")
        was = archived[i]
        if plan[i].owner == "namesake":
            if now != was:
                problems.append(f"plant-{i:03d} {plan[i]}: the namesake's item changed: {was} -> {now}")
        elif len(now) != len(was) or not all(
            a[0] == b[0] and redaction_of(b[1], a[1]) for a, b in zip(now, was, strict=True)
        ):
            problems.append(f"plant-{i:03d} {plan[i]}: the bystander's item changed beyond redaction: {was} -> {now}")
    shas_after = set(blob_digests(home))
    for i in others:
        if plan[i].owner == "namesake" and plan[i].container != "content":
            att = next(files.glob(f"{i:03d}-*"))
            digest = hashlib.sha256(att.read_bytes()).hexdigest()
            if digest in shas_before and digest not in shas_after:
                problems.append(f"plant-{i:03d} {plan[i]}: the namesake's attachment changed")
    if res.code not in (0, 7):
        problems.append(f"the window exited {res.code}: {(res.out + res.err)[-800:]}")
    return problems


# --- failing examples found while building, kept as explicit cases --------------------------------

KNOWN = [
    [Scenario("phone", 1, "raw", "content", False, "bystander")],  # 0044 prefix in a bystander's text
    [Scenario("phone", 2, "raw", "content", False, "bystander")],  # non-breaking hyphens
    [Scenario("email", 0, "percent", "content", False, "bystander")],
    [Scenario("email", 0, "base64", "content", False, "bystander")],
    [Scenario("name", 1, "raw", "content", False, "bystander")],  # "Last, First"
    [Scenario("name", 0, "raw", "gzip", False, "bystander")],  # an attachment that is not plain text
    [Scenario("name", 0, "raw", "content", False, "namesake")],
    [Scenario("phone", 0, "base64", "utf16", True, "bystander")],  # base64 inside a UTF-16 attachment
    # A namesake "Maren Müller" (scenario 10): the subject's summary windows were cut inside the surname
    # ("ller discussed general matters ..."), a phrase the full-text index never holds, so the namesake's
    # identical sentence was not seen as theirs and the subject's request ended `residue` for ever.
    [*[Scenario("id", 0, "raw", "content", False, "own")] * 10, Scenario("name", 3, "qp", "plain", True, "namesake")],
    # A namesake "Greta Östberg" (scenario 44): SQLite's lower() left the capital Ö, so the namesake's
    # own name was not seen as theirs (tests/probes/test_unicode_case.py draws the class).
    [
        *[Scenario("id", 0, "raw", "content", False, "own")] * 44,
        Scenario("name", 5, "json", "content", False, "namesake"),
    ],
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "plan",
    KNOWN,
    ids=[f"{p[-1].kind}-{p[-1].spelling}-{p[-1].encoding}-{p[-1].container}-{p[-1].owner}" for p in KNOWN],
)
def test_known_failing_examples(harness_url: str, tmp_path: Path, plan: list[Scenario]) -> None:
    run_example(tmp_path, plan, namesake_clear=True)
