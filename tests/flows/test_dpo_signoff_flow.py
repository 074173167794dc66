"""The DPO's sign-off inside the `erasure-request` run, on a real Prefect server with a worker (the
console `make serve` starts): a run started by deployment, with a DPO key pinned, writes the pack and
suspends with a form; the DPO's answer resumes it (an unsigned reject changes nothing: it asks
again). Attested: the run completes, the request is
notified, the pack verifies offline with both keys. Rejected: the run ends `Rejected`, the request is
`rejected`, nothing is sent. The form's description shows the signing request and no identifier.
(The same form through a real browser: tests/flows/test_ui_browser.py.)"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from erasure.config import Home
from erasure.engine_db import Engine
from erasure.subject import Subject
from flows import signoff as dpo_signoff
from proof.keys import generate_keypair
from service import signoff
from tests.cascade_fixtures import BYSTANDER, SUBJECT, build_store, submit
from tests.cli_fixtures import erasure
from tests.flows.test_deployments import Console, start_console, stop_console, wait_final
from tests.proof.test_dpo_signed_reject import rejection
from tests.proof.test_dpo_signoff import kit_verify, signer

SUSPEND_TIMEOUT = 300.0
DEPLOYMENT = "erasure-request"
UI_REQUESTS = {
    "req-sign-ui-1": Subject(id="subj-ui-4410", email="mira.tanaka@example.jp", name="Mira Tanaka"),
    "req-sign-ui-2": Subject(id="subj-ui-4411", email="olek.zaw@example.pl", name="Olek Zawada"),
}


@pytest.fixture(scope="module")
def signing_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Console, Path]]:
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    from cli.prefect_auth import home_secret

    tmp = tmp_path_factory.mktemp("signoff")
    h = Home.resolve(tmp / "home", tmp / "evidence").ensure()
    build_store(h, tmp)
    submit(h, "req-sign-1")
    submit(h, "req-sign-2", subject=BYSTANDER)
    for rid, who in UI_REQUESTS.items():
        submit(h, rid, subject=who)
    generate_keypair("engine", h.keys_dir)
    machine = tmp / "dpo-machine"
    generate_keypair("dpo", machine)
    shutil.copyfile(machine / "dpo.pub.pem", h.keys_dir / "dpo.pub.pem")  # pinned; the private key stays there
    assert erasure("export", "--dpo-kit", "--to", str(machine / "kit"), "--home", str(h.root)).code == 0
    c = start_console(h, tmp / "serve.out")
    try:
        with temporary_settings({PREFECT_API_URL: c.api, PREFECT_API_AUTH_STRING: home_secret(h)}):
            yield c, machine
    finally:
        stop_console(c)


def _asks(client: Any, run: Any) -> bool:
    """The run is paused and its sign-off form can be read. The form's description is a run input of its
    own, readable a moment after the paused state on a loaded machine (a 404 in a full run at load 14)."""
    from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError
    from prefect.input.run_input import keyset_from_paused_state

    if run.state is None or not run.state.is_paused():
        return False
    try:
        client.read_flow_run_input(flow_run_id=run.id, key=keyset_from_paused_state(run.state)["description"])
    except (ObjectNotFound, PrefectHTTPStatusError):
        return False
    return True


def _wait_paused(client: Any, run_id: Any) -> Any:
    deadline = time.monotonic() + SUSPEND_TIMEOUT
    while True:
        run = client.read_flow_run(run_id)
        if _asks(client, run):
            return run
        assert run.state is None or not run.state.is_final(), (run.state.name, run.state.message)
        assert time.monotonic() < deadline, run.state
        time.sleep(1.0)


def _wait_repaused(client: Any, run_id: Any, before: Any) -> Any:
    """The run paused again, under a new pause key (it asks the DPO again)."""
    deadline = time.monotonic() + SUSPEND_TIMEOUT
    while True:
        run = client.read_flow_run(run_id)
        if run.state.state_details.pause_key != before.state.state_details.pause_key and _asks(client, run):
            return run
        assert not run.state.is_final(), (run.state.name, run.state.message)
        assert time.monotonic() < deadline, run.state
        time.sleep(1.0)


def _pack_sha(h: Home, rid: str) -> str:
    return hashlib.sha256((h.evidence_dir(rid) / "proof.tar.gz").read_bytes()).hexdigest()


def _erase_by_deployment(request_ids: Iterable[str]) -> dict[str, Any]:
    """Start `erasure-request` by deployment for each request (the worker runs them); their run ids."""
    from prefect.client.schemas.objects import FlowRun
    from prefect.deployments import run_deployment

    return {
        rid: cast(
            FlowRun, run_deployment("erasure-request/erasure-request", parameters={"request_id": rid}, timeout=0)
        ).id
        for rid in request_ids
    }


def _state(h: Home, rid: str) -> str:
    with Engine.open(h.engine_db) as engine:
        state = dpo_signoff.request_state(engine, rid)
    return state.value if state else "unknown"


def test_the_run_waits_for_the_dpo_and_their_answer_finishes_it(signing_console: tuple[Console, Path]) -> None:
    from prefect.client.orchestration import get_client
    from prefect.flow_runs import resume_flow_run
    from prefect.input.run_input import keyset_from_paused_state

    c, machine = signing_console
    h = c.home
    ids = _erase_by_deployment(["req-sign-1", "req-sign-2"])
    with get_client(sync_client=True) as client:
        paused = {rid: _wait_paused(client, run_id) for rid, run_id in ids.items()}
        for rid, run in paused.items():
            assert _state(h, rid) == "awaiting attestation"
            keyset = keyset_from_paused_state(run.state)
            text = client.read_flow_run_input(flow_run_id=run.id, key=keyset["description"])
            assert signoff.signing_request(h, rid) in text and "erasure-dpo-sign.pyz" in text
            subject = SUBJECT if rid == "req-sign-1" else BYSTANDER
            assert not any(str(v) in text for v in subject.identifiers()), "an identifier in the form"

        line = signer(machine, signoff.signing_request(h, "req-sign-1"))
        assert line.returncode == 0, line.stderr
        resume_flow_run(ids["req-sign-1"], run_input={"decision": "attest", "envelope": line.stdout.strip()})
        # Issue 34 finding 5: an unsigned reject (the API credential alone) changes nothing; the run asks again.
        resume_flow_run(ids["req-sign-2"], run_input={"decision": "reject"})
        again = _wait_repaused(client, ids["req-sign-2"], paused["req-sign-2"])
        text = client.read_flow_run_input(
            flow_run_id=again.id, key=keyset_from_paused_state(again.state)["description"]
        )
        assert "was refused, nothing changed" in text and _state(h, "req-sign-2") == "awaiting attestation"
        signed = rejection(machine / "dpo.pem", "req-sign-2", _pack_sha(h, "req-sign-2"))
        resume_flow_run(ids["req-sign-2"], run_input={"decision": "reject", "envelope": signed})
        done = wait_final(client, ids)

    attested, rejected = done["req-sign-1"].state, done["req-sign-2"].state
    assert attested.is_completed(), (attested.name, attested.message)
    assert _state(h, "req-sign-1") == "notified" and (h.outbox_dir / "req-sign-1.eml").exists()
    verified = kit_verify(h, machine, "req-sign-1")
    assert verified.returncode == 0 and verified.stdout.startswith("OK"), verified.stdout + verified.stderr
    assert rejected.name == "Rejected", (rejected.name, rejected.message)
    assert _state(h, "req-sign-2") == "rejected" and not (h.outbox_dir / "req-sign-2.eml").exists()


@pytest.mark.browser
def test_the_dpo_answers_in_the_prefect_ui(signing_console: tuple[Console, Path]) -> None:
    """The real UI in chromium: the suspended run's Resume form shows the description; the envelope
    the standalone signer printed is pasted and submitted (the run completes, the pack verifies), and
    the other run is rejected with the DPO's signed rejection pasted into the form (it ends Rejected)."""
    from playwright.sync_api import expect
    from prefect.client.orchestration import get_client

    from tests.flows.test_ui_browser import SHOTS, TIMEOUT_MS, chromium_page

    c, machine = signing_console
    h = c.home
    ids = _erase_by_deployment(UI_REQUESTS)
    with get_client(sync_client=True) as client:
        for run_id in ids.values():
            _wait_paused(client, run_id)
    line = signer(machine, signoff.signing_request(h, "req-sign-ui-1"))
    assert line.returncode == 0, line.stderr
    ui = c.api.removesuffix("/api")
    with chromium_page(h, height=1200) as page:
        page.goto(f"{ui}/runs/flow-run/{ids['req-sign-ui-1']}", wait_until="networkidle")
        page.get_by_role("button", name="Resume").first.click()
        form = page.get_by_role("dialog")
        expect(form.get_by_text("DPO sign-off").first).to_be_visible()
        expect(form.get_by_text("erasure-dpo-sign.pyz").first).to_be_visible()
        form.locator("textarea").first.fill(line.stdout.strip())
        page.screenshot(path=str(SHOTS / "dpo-sign-off-form.png"), full_page=True)
        form.get_by_role("button", name="Submit").click()
        expect(form).to_be_hidden(timeout=TIMEOUT_MS)  # the resume call takes seconds on a busy machine

        page.goto(f"{ui}/runs/flow-run/{ids['req-sign-ui-2']}", wait_until="networkidle")
        page.get_by_role("button", name="Resume").first.click()
        form = page.get_by_role("dialog")
        selects = form.locator("button.p-select-button__control")
        selects.nth(0).press(" ")  # the design system's select opens from the keyboard
        page.get_by_role("option", name="reject", exact=True).click()
        form.locator("textarea").first.fill(
            rejection(machine / "dpo.pem", "req-sign-ui-2", _pack_sha(h, "req-sign-ui-2"))
        )
        page.screenshot(path=str(SHOTS / "dpo-sign-off-reject.png"), full_page=True)
        form.get_by_role("button", name="Submit").click()
        expect(form).to_be_hidden(timeout=TIMEOUT_MS)  # the resume call takes seconds on a busy machine
    with get_client(sync_client=True) as client:
        done = wait_final(client, ids)
    attested, rejected = done["req-sign-ui-1"].state, done["req-sign-ui-2"].state
    assert attested.is_completed(), (attested.name, attested.message)
    assert _state(h, "req-sign-ui-1") == "notified"
    assert kit_verify(h, machine, "req-sign-ui-1").returncode == 0
    assert rejected.name == "Rejected" and _state(h, "req-sign-ui-2") == "rejected"
