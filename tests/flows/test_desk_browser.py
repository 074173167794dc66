"""The whole path of one request by people who never open a terminal (issue 35), in Debian's chromium:
the compliance officer files it at the request desk (a bad email first: refused with a clear error),
watches its run in the Prefect UI; the DPO downloads the signing request from the desk, signs with the
kit's signer, pastes a wrong envelope first (another request's: refused naming why, the run still
waiting), then the right one; the officer downloads the regulator's export as one zip. Screenshots go
to evidence/ui/."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.prefect_auth import api_client, home_secret
from erasure.config import Home
from erasure.engine_db import Engine
from proof.keys import generate_keypair
from proof.verify.signer import load_signing_key, read_signing_request, sign_request
from tests.cascade_fixtures import SUBJECT, SUBJECT_PHRASE, build_store
from tests.cli_fixtures import erasure
from tests.flows.test_deployments import Console, start_console, stop_console
from tests.flows.test_ui_browser import SHOTS, TIMEOUT_MS, chromium_page

pytestmark = pytest.mark.browser
RID = "req-desk-1"
DEBIAN_PYTHON = Path("/usr/bin/python3")


@pytest.fixture(scope="module")
def desk_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Console, Path, str]]:
    tmp = tmp_path_factory.mktemp("desk")
    h = Home.resolve(tmp / "home", tmp / "evidence").ensure()
    build_store(h, tmp)
    generate_keypair("engine", h.keys_dir)
    machine = tmp / "dpo-machine"
    generate_keypair("dpo", machine)
    shutil.copyfile(machine / "dpo.pub.pem", h.keys_dir / "dpo.pub.pem")
    assert erasure("export", "--dpo-kit", "--to", str(machine / "kit"), "--home", str(h.root)).code == 0
    c = start_console(h, tmp / "serve.out", sla_now=False)
    try:
        deadline = time.monotonic() + 60
        while not (m := re.search(r"request desk .* at (http://\S+)", c.out.read_text())):
            assert time.monotonic() < deadline, c.out.read_text()
            time.sleep(0.3)
        text = c.out.read_text()
        assert str(h.keys_dir / "prefect-api.auth") in text and "paste it" in text
        yield c, machine, m.group(1)
    finally:
        stop_console(c)


def _sign(machine: Path, request: str) -> str:
    """The kit's signer as the DPO runs it: Debian's own python3 (cryptography 38 on Debian 12)."""
    cmd = [str(machine / "kit" / "erasure-dpo-sign.pyz"), "--key", str(machine / "dpo.pem"), "--yes", request]
    done = subprocess.run([str(DEBIAN_PYTHON), *cmd], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _run_of(c: Console, run_id: str) -> dict[str, Any]:
    with api_client(c.api, home_secret(c.home), timeout=10) as api:
        r = api.get(f"/flow_runs/{run_id}")
    r.raise_for_status()
    return dict(r.json())


def _wait_paused(c: Console, run_id: str, not_key: str | None = None) -> dict[str, Any]:
    deadline = time.monotonic() + 300
    while True:
        run = _run_of(c, run_id)
        st = run["state"]
        if st["type"] == "PAUSED" and st["state_details"].get("pause_key") != not_key:
            return run
        assert st["type"] not in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"), st
        assert time.monotonic() < deadline, st
        time.sleep(1.0)


def _resume_in_ui(page: Any, ui: str, run_id: str, envelope: str, shot: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{ui}/runs/flow-run/{run_id}", wait_until="networkidle")
    page.get_by_role("button", name="Resume").first.click()
    form = page.get_by_role("dialog")
    expect(form.get_by_text("DPO sign-off").first).to_be_visible()
    form.locator("textarea").first.fill(envelope)
    page.screenshot(path=str(SHOTS / shot), full_page=True)
    form.get_by_role("button", name="Submit").click()
    expect(form).to_be_hidden(timeout=TIMEOUT_MS)


def test_a_request_from_the_desk_to_the_regulators_export(desk_console: tuple[Console, Path, str]) -> None:
    from playwright.sync_api import expect

    c, machine, desk = desk_console
    h = c.home
    ui = c.api.removesuffix("/api")
    with chromium_page(h, height=1100) as page:
        # The compliance officer logs in to the desk with the console's credential.
        page.goto(desk, wait_until="networkidle")
        expect(page.get_by_text("Paste this console's credential")).to_be_visible()
        page.get_by_label("Credential").fill("not-the-credential")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("alert")).to_contain_text("not this console's credential")
        page.get_by_label("Credential").fill(home_secret(h))
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("heading", name="Requests")).to_be_visible()

        # Files the request: a bad email first, refused naming the field.
        page.get_by_role("link", name="File a new request").click()
        page.get_by_label("Request id").fill(RID)
        page.get_by_label("Subject id").fill(SUBJECT.id)
        page.get_by_label("Email", exact=True).fill("annabel.quist-at-example.org")
        page.get_by_label("Name", exact=True).fill(str(SUBJECT.name))
        page.get_by_label("Phone", exact=False).fill(str(SUBJECT.phone))
        page.get_by_label("Identity proof reference").fill("idv-case-77")
        page.get_by_label("Reason").fill("data subject request via privacy portal")
        page.get_by_role("button", name="File the request").click()
        expect(page.get_by_role("alert")).to_contain_text("subject.email")
        page.screenshot(path=str(SHOTS / "desk-intake-refuses-a-bad-email.png"), full_page=True)
        assert not any(r["request_id"] == RID for r in _list_requests(h))
        page.get_by_label("Email", exact=True).fill(str(SUBJECT.email))
        page.get_by_role("button", name="File the request").click()
        notice = page.get_by_role("status")
        expect(notice).to_contain_text(f"Request {RID} filed")
        row = page.locator(f"tr[data-request='{RID}']")
        expect(row).to_contain_text("GDPR")
        page.screenshot(path=str(SHOTS / "desk-request-filed.png"), full_page=True)

        # Watches it in the Prefect UI: the run has the request id as its only parameter.
        link = notice.get_by_role("link", name="watch it in the Prefect UI")
        run_id = str(link.get_attribute("href")).rsplit("/", 1)[-1]
        link.click()
        page.wait_for_url("**/runs/flow-run/**")
        run = _wait_paused(c, run_id)
        assert run["parameters"] == {"request_id": RID}
        page.reload(wait_until="networkidle")
        expect(page.get_by_text(f"erasure-{RID}").first).to_be_visible()
        page.screenshot(path=str(SHOTS / "desk-run-in-prefect-ui.png"), full_page=True)

        # The DPO takes the signing request as a file from the desk.
        page.goto(desk, wait_until="networkidle")
        expect(row).to_contain_text("DPO")
        with page.expect_download() as dl:
            row.get_by_role("link", name="signing request (file)").click()
        request = Path(dl.value.path()).read_text().strip()
        assert read_signing_request(request)["request_id"] == RID

        # A wrong envelope first: signed by the DPO's key, but for another request (the kit's signer itself
        # refuses a request whose engine statement names another: made here with its signing function).
        other = read_signing_request(request)
        other["request_id"] = "req-desk-other"
        dpo_key = load_signing_key((machine / "dpo.pem").read_bytes(), None)
        wrong = sign_request(dpo_key, other).decode()
        _resume_in_ui(page, ui, run["id"], wrong, "desk-dpo-wrong-envelope.png")
        again = _wait_paused(c, run_id, not_key=run["state"]["state_details"]["pause_key"])
        assert _state(h) == "awaiting attestation"
        page.goto(f"{ui}/runs/flow-run/{run['id']}", wait_until="networkidle")
        page.get_by_role("button", name="Resume").first.click()
        expect(page.get_by_role("dialog").get_by_text("made for request req-desk-other").first).to_be_visible()
        page.screenshot(path=str(SHOTS / "desk-dpo-refused-names-why.png"), full_page=True)
        page.keyboard.press("Escape")

        # Then the right one.
        _resume_in_ui(page, ui, again["id"], _sign(machine, request), "desk-dpo-right-envelope.png")
        deadline = time.monotonic() + 300
        while (st := _run_of(c, run_id)["state"])["type"] != "COMPLETED":
            assert st["type"] not in ("FAILED", "CRASHED", "CANCELLED") and time.monotonic() < deadline, st
            time.sleep(1.0)
        assert _state(h) == "notified"

        # The officer downloads the regulator's export as one zip.
        page.goto(desk, wait_until="networkidle")
        page.screenshot(path=str(SHOTS / "desk-request-sealed.png"), full_page=True)
        with page.expect_download() as dl:
            row.get_by_role("link", name="export for the regulator (zip)").click()
        names = zipfile.ZipFile(io.BytesIO(Path(dl.value.path()).read_bytes())).namelist()
    assert {
        f"{RID}-export/{RID}-proof.tar.gz",
        f"{RID}-export/VERIFY.md",
        f"{RID}-export/erasure-verify.pyz",
        f"{RID}-export/engine.pub.pem",
        f"{RID}-export/dpo.pub.pem",
    } <= set(names), names
    # Nothing of the subject reached Prefect's database.
    db = (h.prefect_home / "prefect.db").read_bytes()
    for needle in [*SUBJECT.identifiers(), SUBJECT_PHRASE]:
        assert needle.encode() not in db, needle


def _list_requests(h: Home) -> list[dict[str, Any]]:
    from service.intake import list_requests

    with Engine.open(h.engine_db) as engine:
        return [{"request_id": r.request_id} for r in list_requests(engine)]


def _state(h: Home) -> str:
    from flows.signoff import request_state

    with Engine.open(h.engine_db) as engine:
        st = request_state(engine, RID)
    return st.value if st else "unknown"
