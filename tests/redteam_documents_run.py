"""Run a window of issue-33 scenarios through the real `erasure` CLI and judge every request by the rule.

`run_window(tmp, scenarios)` builds a reference store (`erasure store init`, `erasure ingest` of every
scenario's items with their attachments, then the files a scenario drops into the store folder), checks
that the oracle (tests/oracle33, nothing of the product) finds every planted piece that names its subject
and none that does not, submits one request per scenario and erases them all as one window (`erasure
request run ID ID ...`), reruns once the requests that ended with residue (exit 7), and judges each:

- **false all clear**: the request ends all clear (status `erased`, all_clear) while the oracle still
  finds its subject in a view of a file of the home or the evidence;
- **never ends**: exit 7 (residue) on the run and again on the rerun;
- **bystander changed**: a bystander's planted item is no longer its words with at most "[redacted]"
  spans (byte for byte where the plant is exact: a longer address, an invoice number, everyday words, a
  glued name, a foreign number), or a bystander's attachment is gone from the blob store;
- **other end**: any other outcome (a crash, exit 10 "others' data lost", no pack).

The problems come back as `Problem`s, each with its category, scenario and a short reason.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.cli_fixtures import CliResult, erasure
from tests.oracle33.match import fold
from tests.oracle33.scan import scan_bytes33, scan_home33, scan_text33
from tests.oracle_views import text_decodings
from tests.redteam_documents_plants import Plant, Scenario
from tests.redteam_fixtures import archive_content, blob_digests, home_env, ok, pack_files, redaction_of

CATEGORIES = ("oracle", "false all clear", "never ends", "bystander changed", "other end")


@dataclass(frozen=True)
class Problem:
    """One broken rule: its category (one of CATEGORIES), the scenario and why."""

    category: str
    scenario: Scenario
    reason: str

    def __str__(self) -> str:
        sc = self.scenario
        return f"[{self.category}] {sc.request_id} family {sc.family} {sc.attack} ({sc.locale}): {self.reason}"


@dataclass
class WindowReport:
    """What one window did: its problems, each request's final outcome and status, and timings."""

    problems: list[Problem] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)
    statuses: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    exits: list[int] = field(default_factory=list)


def outcomes_of(res: CliResult, request_ids: list[str]) -> dict[str, str]:
    """Each request's outcome from `erasure request run ... --json` (one id or a window); "crash" when
    the output says nothing of it."""
    try:
        doc = json.loads(res.out)
    except ValueError:
        doc = {}
    if isinstance(doc, dict) and "requests" in doc:
        got = {rid: str((r or {}).get("outcome")) for rid, r in doc["requests"].items()}
    elif isinstance(doc, dict) and "outcome" in doc:
        got = {str(doc.get("request_id", request_ids[0])): str(doc["outcome"])}
    else:
        got = {}
    return {rid: got.get(rid, "crash") for rid in request_ids}


def probe(plant: Plant, sc: Scenario) -> bool:
    """The oracle finds the subject in the planted piece itself."""
    known = sc.known()
    if plant.attachment:
        scan = scan_bytes33(plant.attachment[1], [sc.subject], known)
    elif plant.store_file:
        scan = scan_bytes33(plant.store_file[1], [sc.subject], known)
    else:
        assert plant.item is not None
        scan = scan_text33(plant.item["content"] + "\n" + plant.item["source_ref"], [sc.subject])
    return bool(scan.of(sc.subject.id).hits)


def _envelope(sc: Scenario) -> dict[str, Any]:
    return {
        "request_id": sc.request_id,
        "tenant_id": "default",
        "subject": sc.envelope_subject(),
        "legal_basis": "GDPR",
        "received_at": "2026-11-30T09:30:00+00:00",
        "requester_identity_proof_ref": "idv/issue33",
        "reason": "Art.17 request via the privacy portal",
    }


def run_window(tmp: Path, scenarios: list[Scenario]) -> WindowReport:
    """Build, plant, check the oracle, erase as one window (rerun once on exit 7), judge."""
    from erasure.config import Home

    home = Home.resolve(tmp / "home", tmp / "evidence").ensure()
    with home_env(home):
        return _window(home, tmp, scenarios)


def _window(home: Any, tmp: Path, scenarios: list[Scenario]) -> WindowReport:
    report = WindowReport()
    t0 = time.monotonic()
    h = str(home.root)
    files = tmp / "in" / "files"
    files.mkdir(parents=True)
    ok(erasure("store", "init", "--home", h))
    ok(erasure("keys", "generate", "--role", "engine", "--home", h))
    # the oracle sees each planted piece that names its subject, and no other
    for sc in scenarios:
        for p in sc.plants:
            if probe(p, sc) != p.names_subject:
                what = "misses the subject in" if p.names_subject else "finds the subject in a piece that does not name"
                report.problems.append(Problem("oracle", sc, f"the oracle {what} {p.item or p.store_file}"))
    items: list[dict[str, Any]] = []
    for sc in scenarios:
        for k, p in enumerate(sc.plants):
            if p.item is None:
                continue
            it = dict(p.item)
            if p.attachment:
                path = files / f"{sc.i:03d}-{k}-{p.attachment[0]}"
                path.write_bytes(p.attachment[1])
                it["attachments"] = [str(path)]
            items.append(it)
    src = tmp / "in" / "items.jsonl"
    src.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in items), encoding="utf-8")
    ingested = json.loads(ok(erasure("ingest", str(src), "--home", h, "--json")).out)
    assert ingested.get("skipped_suppressed", 0) == 0 and ingested.get("held_erased_identity", 0) == 0, ingested
    for sc in scenarios:
        for p in sc.plants:
            if p.store_file:
                (home.store_dir / p.store_file[0]).write_bytes(p.store_file[1])
    report.seconds["build"] = time.monotonic() - t0
    people = [sc.subject for sc in scenarios]
    known: dict[str, str] = {}
    for sc in scenarios:
        known.update(sc.known())
    t1 = time.monotonic()
    before = scan_home33(home.root, home.evidence_root, people, known)
    report.seconds["oracle before"] = time.monotonic() - t1
    for sc in scenarios:
        if not before.of(sc.subject.id):
            report.problems.append(Problem("oracle", sc, "the oracle finds nothing of the subject in the home"))
    watched = [
        (sc, p)
        for sc in scenarios
        for p in sc.plants
        if p.item is not None and p.item["subject"]["id"] != sc.subject.id
    ]
    archived = {id(p): archive_content(home, p.item["source"], p.item["source_ref"]) for _, p in watched if p.item}
    blobs_before = set(blob_digests(home))
    inputs = tmp / "in"
    for sc in scenarios:
        env = inputs / f"{sc.request_id}.json"
        env.write_text(json.dumps(_envelope(sc), ensure_ascii=False), encoding="utf-8")
        ok(erasure("request", "submit", str(env), "--home", h))
    rids = [sc.request_id for sc in scenarios]
    t2 = time.monotonic()
    res = erasure("request", "run", *rids, "--home", h, "--json")
    report.exits.append(res.code)
    first = outcomes_of(res, rids)
    final = dict(first)
    again = [rid for rid, o in first.items() if o == "residue"]
    if again:
        res2 = erasure("request", "run", *again, "--home", h, "--json")
        report.exits.append(res2.code)
        final.update(outcomes_of(res2, again))
    report.seconds["erase"] = time.monotonic() - t2
    t3 = time.monotonic()
    after = scan_home33(home.root, home.evidence_root, people, known)
    report.seconds["oracle after"] = time.monotonic() - t3
    report.outcomes = final
    blobs_after = set(blob_digests(home))
    for sc in scenarios:
        report.problems += _judge(home, sc, first[sc.request_id], final[sc.request_id], after.of(sc.subject.id), report)
    for sc, p in watched:
        assert p.item is not None
        now = archive_content(home, p.item["source"], p.item["source_ref"])
        was = archived[id(p)]
        if p.exact and now != was:
            report.problems.append(Problem("bystander changed", sc, f"byte for byte expected: {was} -> {now}"))
        elif not p.exact and (
            len(now) != len(was)
            or not all(a[0] == b[0] and redaction_of(b[1], a[1]) for a, b in zip(now, was, strict=False))
        ):
            report.problems.append(Problem("bystander changed", sc, f"beyond redaction: {was} -> {now}"))
        if p.attachment:
            digest = hashlib.sha256(p.attachment[1]).hexdigest()
            if digest in blobs_before and digest not in blobs_after:
                report.problems.append(Problem("bystander changed", sc, f"attachment {p.attachment[0]} gone"))
    return report


def _beyond_rule_3_3(sc: Scenario, left: Any, home_root: Path | None = None) -> Any:
    """`left` without two readings of the oracle that are not the subject. The raw bytes of a compressed
    pack read in a raw text decoding (two-letter names turn up in them by chance; the members, read decompressed,
    still count). And a bystander's everyday sentence read as the name across lower-case words ("the
    path rose up the hill" for Rose Hill): the oracle reads case-folded text with any three words between
    the two names, while docs/matching.md 3.3 allows only middle names, initials and capitalised words
    there, so that sentence does not name the subject and an all clear is right. Adjacent words ("a
    sandy shore") and a sentence end between them ("April. May we") stay finds: the rule reports them."""
    # The raw bytes of a compressed pack read in any text decoding (UTF-8, latin-1, UTF-16/32...) are
    # noise: two-letter names ("Li Na", "Li Ma") turn up in them by chance. The pack's members are read
    # decompressed by the oracle's other views (`gzip@0>...`), which count.
    raw_pack = [h for h in left.hits if h.view.split(">")[0].startswith(_RAW_DECODINGS) and h.file.endswith(".tar.gz")]
    left = type(left)([h for h in left.hits if h not in raw_pack], left.unread)
    # So are a database's random bytes (vectors, salts, Merkle hashes) for a name of two two-letter parts
    # ("Al Ma": seen in CI in store/memory.db, read as latin-1). Such a hit counts where the name is in a
    # run of text.
    if home_root is not None and _short_name(sc):
        cache: dict[tuple[str, str], bool] = {}
        noise = [h for h in left.hits if _raw_noise(h, sc, home_root, cache)]
        left = type(left)([h for h in left.hits if h not in noise], left.unread)
    if sc.attack != "everyday-words":
        return left
    sentences = [
        " ".join(re.findall(r"\w+", str(p.item["content"]).casefold())) for p in sc.plants if p.item and p.exact
    ]
    given, family = (sc.subject.given or "").casefold(), (sc.subject.family or "").casefold()

    def across_lower_words(text: str) -> bool:
        words = text.split()
        between = words[1:-1]
        return (
            len(words) > 2
            and {words[0], words[-1]} == {given, family}
            and any(text in sentence for sentence in sentences)
            and all(len(w) > 1 for w in between)
        )

    return type(left)([h for h in left.hits if not (h.kind == "name" and across_lower_words(h.text))], left.unread)


def _short_name(sc: Scenario) -> bool:
    """Both parts of the subject's name are at most two letters (folded)."""
    parts = [fold(x) for x in (sc.subject.given or "", sc.subject.family or "")]
    return all(p and all(len(t) <= 2 for t in p) for p in parts)


_TEXT_RUN = re.compile(r"[^\x00-\x08\x0b-\x1f\x7f-\x9f\ufffd]{5,}")
"""A run of text as short as "Al Ma": no control character, no byte that is not UTF-8."""


_RAW_DECODINGS = ("utf-8", "latin-1", "nul-stripped", "utf-16", "utf-32")
_BETWEEN_RUNS = "\n~ qqqq qqqq qqqq qqqq ~\n"
"""Between two runs: more tokens than the oracle allows between a given and a family name."""


def _raw_noise(hit: Any, sc: Scenario, home_root: Path, cache: dict[tuple[str, str], bool]) -> bool:
    """`hit` is a name read in a decoding of a file's raw bytes (UTF-8, latin-1, NUL-stripped, UTF-16/32)
    or of a database value's bytes, or in a view unescaped from one, and the oracle, reading each of that
    decoding's runs of text alone with all its views, finds no name there (a value written as text sits in
    such a run, freed or not, escaped or not; latin-1 is read for its runs as UTF-8, as the stores write)."""
    steps = hit.view.split(">")
    root = steps[0]
    # A database value's bytes read raw (`sqlite:audit_merkle>latin-1`: a Merkle node's random bytes) are
    # judged as the file's raw bytes are: a value written as text sits in a run of the file's text too.
    if root.startswith("sqlite:") and len(steps) > 1 and steps[1].startswith(_RAW_DECODINGS):
        root = steps[1]
    if hit.kind != "name" or not root.startswith(_RAW_DECODINGS) or hit.file.startswith("evidence/"):
        return False
    key = (hit.file, "utf-8" if root == "latin-1" else root)
    if key not in cache:
        path = home_root / hit.file
        text = dict(text_decodings(path.read_bytes())).get(key[1]) if path.is_file() else None
        if text is None:
            cache[key] = False
        else:
            runs = _BETWEEN_RUNS.join(_TEXT_RUN.findall(text))
            cache[key] = not any(h.kind == "name" for h in scan_text33(runs, [sc.subject]).hits)
    return cache[key]


def _judge(home: Any, sc: Scenario, first: str, final: str, left: Any, report: WindowReport) -> list[Problem]:
    files = pack_files(home, sc.request_id)
    manifest = json.loads(files["manifest.json"]) if "manifest.json" in files else {}
    ver_path = home.evidence_dir(sc.request_id) / "verification.json"
    ver = json.loads(ver_path.read_text()) if ver_path.exists() else {}
    kinds = sorted({str(e.get("kind")) for e in ver.get("exceptions", [])})
    status = str(manifest.get("status"))
    report.statuses[sc.request_id] = status
    clear = final == "all_clear" and status == "erased" and manifest.get("all_clear") is True
    out: list[Problem] = []
    left = _beyond_rule_3_3(sc, left, home.root)
    if clear and left:
        out.append(Problem("false all clear", sc, f"ALL CLEAR while the oracle finds: {left.summary(3)}"))
    elif first == "residue" and final == "residue":
        out.append(Problem("never ends", sc, f"exit 7 on the run and on the rerun (exceptions {kinds})"))
    elif final not in ("all_clear", "residue"):
        out.append(Problem("other end", sc, f"outcome {final}, status {status}, exceptions {kinds}"))
    return out
