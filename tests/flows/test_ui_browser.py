"""A real browser on the compliance team's console: Debian's chromium (`make browser` installs it),
driven by Playwright, against the UI served exactly as `make serve` serves it (`python -m cli.serve`,
here on a free port with its home in a temp dir). Screenshots go to evidence/ui/.

The console's home also holds a small store with one request, erased by deployment on the console's
worker after `erasure server automation` created the DPO's automation (its webhook: a local HTTP
server here): the browser opens that finished run and sees its tier table and summary artifacts, and
the automation among the Automations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from cli.prefect_auth import home_secret
from erasure.config import PROJECT_ROOT, Home
from tests.cascade_fixtures import SUBJECT, SUBJECT_PHRASE, build_store, submit
from tests.flows.test_deployments import Console, envelope, give_back, start_console, stop_console, vault
from tests.proof_fixtures import TIERS

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SHOTS = PROJECT_ROOT / "evidence" / "ui"
TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """The console with three open requests; `erasure serve` runs sla-monitor once at start-up."""
    tmp = tmp_path_factory.mktemp("ui")
    h = Home.resolve(tmp / "home", tmp / "evidence").ensure()
    from proof.keys import generate_keypair

    vault(h, envelope("ui-late", "CCPA", 50))
    vault(h, envelope("ui-risk", "CCPA", 41))
    vault(h, envelope("ui-ok", "GDPR", 1))
    build_store(h, tmp)
    generate_keypair("engine", h.keys_dir)
    c = start_console(h, tmp / "serve.out", sla_now=True)
    try:
        yield c
    finally:
        stop_console(c)


VIEWPORT_WIDTH = 1280
"""Issue 35: the console must serve a 1280 px screen (the SLA table was cut at 1400)."""


@contextmanager
def chromium_page(h: Home, height: int = 1000) -> Iterator[Any]:
    """A page of Debian's chromium (headless, a fresh profile) logged in to the home's Prefect UI."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), "Debian's chromium is missing: run `make browser`"
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        ctx = pw.chromium.launch_persistent_context(
            profile,
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": VIEWPORT_WIDTH, "height": height},
        )
        ctx.set_default_timeout(TIMEOUT_MS)
        # The home's server requires its credential; Prefect's UI keeps the one typed on its login page
        # in localStorage["prefect-password"] (base64): give it as the operator would have typed it.
        secret = json.dumps(home_secret(h))
        ctx.add_init_script(f"window.localStorage.setItem('prefect-password', btoa({secret}))")
        try:
            yield ctx.new_page()
        finally:
            ctx.close()


@pytest.fixture(scope="module")
def page(console: Console) -> Iterator[Any]:
    with chromium_page(console.home) as p:
        yield p


def ui(console: Console) -> str:
    return console.api.removesuffix("/api")


def api(console: Console) -> httpx.Client:
    """The console's REST API with its credential (issue 23: the home's server requires it), through
    Prefect's own client (it retries a busy server's 503 as the CLI does)."""
    from cli.prefect_auth import api_client, home_secret

    return api_client(console.api, home_secret(console.home))


def deployment_id(console: Console, name: str) -> str:
    with api(console) as c:
        r = c.get(f"/deployments/name/{name}/{name}")
    r.raise_for_status()
    return str(r.json()["id"])


def flow_runs_of(console: Console, name: str) -> int:
    body = {"deployments": {"id": {"any_": [deployment_id(console, name)]}}}
    with api(console) as c:
        return int(c.post("/flow_runs/count", json=body).json())


def test_erasure_request_form_has_our_fields(console: Console, page: Any) -> None:
    from playwright.sync_api import expect

    page.goto(f"{ui(console)}/deployments", wait_until="networkidle")
    link = page.get_by_role("link", name="erasure-request", exact=True).first
    expect(link).to_be_visible()
    href = link.get_attribute("href")
    assert href and href.endswith(deployment_id(console, "erasure-request"))
    page.goto(f"{ui(console)}{href}/run", wait_until="networkidle")
    expect(page.get_by_text("Parameters", exact=True)).to_be_visible()
    expect(page.get_by_text("request_id", exact=True)).to_be_visible()
    boxes = page.locator("textarea")
    expect(boxes).to_have_count(1)  # the request id, and nothing that could carry an identifier
    boxes.first.fill("req-ann-1")
    expect(page.get_by_text("erasure-local").first).to_be_visible()
    page.screenshot(path=str(SHOTS / "erasure-request-form.png"), full_page=True)


def test_hold_form_describes_its_fields_and_refuses_an_email(console: Console, page: Any) -> None:
    from playwright.sync_api import expect

    page.goto(
        f"{ui(console)}/deployments/deployment/{deployment_id(console, 'hold-place')}/run", wait_until="networkidle"
    )
    for label, words in (
        ("request_id", "as given by"),
        ("reason (Optional)", "Why the hold is placed"),
        ("reference", "Case or ticket reference"),
        ("actor", "recorded in the audit log"),
    ):
        expect(page.get_by_text(label, exact=True)).to_be_visible()
        expect(page.get_by_text(words)).to_be_visible()
    expect(page.get_by_role("button", name="litigation")).to_be_visible()  # a reason code, not free text
    boxes = page.locator("textarea")
    expect(boxes).to_have_count(3)
    boxes.nth(0).fill("someone@example.org")
    boxes.nth(1).fill("case-17")
    boxes.nth(2).fill("legal-team")
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_text("does not match").first).to_be_visible()
    page.screenshot(path=str(SHOTS / "hold-place-refuses-an-email.png"), full_page=True)
    assert flow_runs_of(console, "hold-place") == 0


def test_replay_form_takes_a_target_name_and_refuses_an_email(console: Console, page: Any) -> None:
    """The restore replay from the UI: one field, the target's name, described; an email is refused by
    the form before any run exists."""
    from playwright.sync_api import expect

    page.goto(
        f"{ui(console)}/deployments/deployment/{deployment_id(console, 'erasure-replay')}/run", wait_until="networkidle"
    )
    expect(page.get_by_text("target (Optional)", exact=True)).to_be_visible()
    expect(page.get_by_text("as targets.toml spells it")).to_be_visible()
    boxes = page.locator("textarea")
    expect(boxes).to_have_count(1)
    boxes.first.fill("someone@example.org")
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_text("does not match").first).to_be_visible()
    page.screenshot(path=str(SHOTS / "erasure-replay-refuses-an-email.png"), full_page=True)
    assert flow_runs_of(console, "erasure-replay") == 0


def test_sla_artifact_table_in_the_ui(console: Console, page: Any) -> None:
    from playwright.sync_api import expect

    deadline = time.monotonic() + 120
    while True:  # the start-up sla-monitor run, executed by the worker
        arts = (
            api(console)
            .post(
                "/artifacts/filter",
                json={"artifacts": {"key": {"any_": ["erasure-sla"]}}},
                timeout=10,
            )
            .json()
        )
        if arts:
            break
        assert time.monotonic() < deadline, "no erasure-sla artifact: did the sla-monitor run?"
        time.sleep(1.0)
    assert {r["request_id"] for r in json.loads(arts[0]["data"])} == {"ui-late", "ui-risk", "ui-ok"}
    page.goto(f"{ui(console)}/artifacts/key/erasure-sla", wait_until="networkidle")
    expect(page.get_by_text("3 open, 1 breached, 1 at risk").first).to_be_visible()
    page.get_by_role("link", name=arts[0]["id"][:8]).first.click()
    page.wait_for_url(f"**/artifacts/artifact/{arts[0]['id']}")
    table = page.locator("table").first
    expect(table).to_be_visible()
    headers = [h.strip() for h in table.locator("th").all_inner_texts()]
    assert {
        "request_id",
        "law",
        "state",
        "deadline",
        "days_left",
        "status",
        "needs",
    } <= set(headers)
    cells = {}
    for rid in ("ui-late", "ui-risk", "ui-ok"):
        texts = [t.strip() for t in table.locator("tr", has_text=rid).locator("td").all_inner_texts()]
        cells[rid] = dict(zip(headers, texts, strict=True))
    assert cells["ui-late"]["law"] == "CCPA" and cells["ui-late"]["days_left"] == "-5"
    assert (cells["ui-late"]["status"], cells["ui-late"]["needs"]) == ("BREACHED", "operator + DPO")
    assert (cells["ui-risk"]["days_left"], cells["ui-risk"]["status"]) == ("4", "at risk")
    assert (cells["ui-ok"]["status"], cells["ui-ok"]["needs"]) == ("ok", "")
    # Every column on the screen: the table ends inside the 1280 px window and is not scrolled sideways.
    right, scroll, room = table.evaluate(
        "t => [t.getBoundingClientRect().right, t.scrollWidth, t.parentElement.clientWidth]"
    )
    assert right <= VIEWPORT_WIDTH and scroll <= room + 1, (right, scroll, room)
    page.screenshot(path=str(SHOTS / "sla-artifact-table.png"), full_page=True)


class _Webhook(BaseHTTPRequestHandler):
    """The DPO's webhook: records every POST body."""

    received: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:  # the http.server API's name
        self.received.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def dpo_webhook() -> Iterator[tuple[str, list[bytes]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Webhook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/dpo", _Webhook.received
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def finished_run(console: Console, dpo_webhook: tuple[str, list[bytes]]) -> str:
    """`erasure server automation` on the console, then `req-ann-1` erased by deployment on its worker."""
    env = {
        **os.environ,
        "ERASURE_HOME": str(console.home.root),
        "ERASURE_EVIDENCE": str(console.home.evidence_root),
        "PREFECT_API_URL": console.api,
        "PREFECT_API_AUTH_STRING": home_secret(console.home),
    }
    res = subprocess.run(
        [sys.executable, "-m", "cli.main", "server", "automation", "--webhook", dpo_webhook[0], "--json"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    submit(console.home, "req-ann-1")
    give_back(console.home)
    dep = deployment_id(console, "erasure-request")
    r = api(console).post(
        f"/deployments/{dep}/create_flow_run",
        json={"parameters": {"request_id": "req-ann-1"}},
        timeout=30,
    )
    r.raise_for_status()
    run_id = str(r.json()["id"])
    deadline = time.monotonic() + 300
    while True:
        run = api(console).get(f"/flow_runs/{run_id}").json()
        if run["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            break
        assert time.monotonic() < deadline, run["state"]
        time.sleep(1.0)
    assert run["state"]["type"] == "COMPLETED", run["state"]
    return run_id


def test_a_finished_run_shows_its_tier_table_and_summary(console: Console, page: Any, finished_run: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{ui(console)}/runs/flow-run/{finished_run}", wait_until="networkidle")
    page.get_by_text("Artifacts", exact=True).first.click()  # the run's tabs
    cards = page.locator("a[href^='/artifacts/artifact/']")
    table_card = cards.filter(has_text="TABLE").filter(has_text="erasure-run-req-ann-1")
    summary_card = cards.filter(has_text="MARKDOWN").filter(has_text="erasure-run-req-ann-1-summary")
    expect(table_card).to_have_count(1)
    expect(summary_card).to_have_count(1)
    page.screenshot(path=str(SHOTS / "erasure-run-artifacts.png"), full_page=True)
    table_card.click()
    page.wait_for_url("**/artifacts/artifact/**")
    table = page.locator("table").first
    expect(table).to_be_visible()
    headers = [h.strip() for h in table.locator("th").all_inner_texts()]
    assert {"tier", "status", "before", "after", "residue"} <= set(headers), headers
    for tier in TIERS:
        expect(table.locator("tr", has_text=tier).first).to_be_visible()
    row = dict(
        zip(
            headers,
            [t.strip() for t in table.locator("tr", has_text="episodic").first.locator("td").all_inner_texts()],
            strict=True,
        )
    )
    assert row["status"] == "erased" and int(row["before"]) > 0 and row["after"] == "0" and row["residue"] == "0"
    page.screenshot(path=str(SHOTS / "erasure-run-tier-table.png"), full_page=True)
    page.go_back(wait_until="networkidle")
    page.get_by_text("Artifacts", exact=True).first.click()
    cards.filter(has_text="MARKDOWN").filter(has_text="erasure-run-req-ann-1-summary").click()
    page.wait_for_url("**/artifacts/artifact/**")
    expect(page.get_by_text("What the DPO must do next").first).to_be_visible()
    expect(page.get_by_text("all clear").first).to_be_visible()
    expect(page.get_by_text("erasure attest req-ann-1", exact=False).first).to_be_visible()
    body = page.locator("body").inner_text()
    for needle in [*SUBJECT.identifiers(), SUBJECT_PHRASE]:
        assert needle not in body
    page.screenshot(path=str(SHOTS / "erasure-run-summary.png"), full_page=True)


def test_the_dpo_automation_is_listed_and_notifies(
    console: Console, page: Any, finished_run: str, dpo_webhook: tuple[str, list[bytes]]
) -> None:
    from playwright.sync_api import expect

    page.goto(f"{ui(console)}/automations", wait_until="networkidle")
    expect(page.get_by_text("erasure-notify-dpo").first).to_be_visible()
    page.screenshot(path=str(SHOTS / "automations.png"), full_page=True)
    deadline = time.monotonic() + 120
    while not any(b"req-ann-1" in b for b in dpo_webhook[1]):  # the server's automation services act in seconds
        assert time.monotonic() < deadline, dpo_webhook[1]
        time.sleep(1.0)
    note = json.loads(next(b for b in dpo_webhook[1] if b"req-ann-1" in b))
    assert "awaiting attestation" in note["subject"] and "erasure attest req-ann-1" in note["body"]
    for needle in [*SUBJECT.identifiers(), SUBJECT_PHRASE]:
        assert needle not in json.dumps(note)
