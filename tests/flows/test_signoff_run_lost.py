"""A suspended sign-off run that is cancelled or deleted (issue 34, finding 12), on a real Prefect server
with a worker: the request stays `awaiting attestation` (nothing in the engine follows the run's fate),
and a new run of the deployment picks it up: it suspends with the DPO's form again, and the DPO's
answer there seals the pack and notifies the requester."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from erasure.config import Home
from erasure.subject import Subject
from proof.keys import generate_keypair
from service import signoff
from tests.cascade_fixtures import build_store, submit
from tests.cli_fixtures import erasure
from tests.flows.test_deployments import Console, start_console, stop_console, wait_final
from tests.flows.test_dpo_signoff_flow import _erase_by_deployment, _state, _wait_paused
from tests.proof.test_dpo_signoff import signer

LOST = {
    "req-lost-cancel": Subject(id="subj-lost-1", email="ines.duarte@example.pt", name="Ines Duarte"),
    "req-lost-delete": Subject(id="subj-lost-2", email="teo.berg@example.se", name="Teo Berg"),
}


@pytest.fixture(scope="module")
def lost_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Console, Path]]:
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    from cli.prefect_auth import home_secret

    tmp = tmp_path_factory.mktemp("lost")
    h = Home.resolve(tmp / "home", tmp / "evidence").ensure()
    build_store(h, tmp)
    for rid, who in LOST.items():
        submit(h, rid, subject=who)
    generate_keypair("engine", h.keys_dir)
    machine = tmp / "dpo-machine"
    generate_keypair("dpo", machine)
    shutil.copyfile(machine / "dpo.pub.pem", h.keys_dir / "dpo.pub.pem")
    assert erasure("export", "--dpo-kit", "--to", str(machine / "kit"), "--home", str(h.root)).code == 0
    c = start_console(h, tmp / "serve.out")
    try:
        with temporary_settings({PREFECT_API_URL: c.api, PREFECT_API_AUTH_STRING: home_secret(h)}):
            yield c, machine
    finally:
        stop_console(c)


@pytest.mark.parametrize("rid", sorted(LOST))
def test_a_cancelled_or_deleted_suspended_sign_off_run_leaves_the_request_for_a_new_run(
    lost_console: tuple[Console, Path], rid: str
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.flow_runs import resume_flow_run
    from prefect.states import Cancelled

    c, machine = lost_console
    h = c.home
    first = _erase_by_deployment([rid])[rid]
    with get_client(sync_client=True) as client:
        _wait_paused(client, first)
        assert _state(h, rid) == "awaiting attestation"
        if rid.endswith("cancel"):
            client.set_flow_run_state(first, Cancelled(message="cancelled by an operator"), force=True)
            assert wait_final(client, {rid: first})[rid].state.is_cancelled()
        else:
            client.delete_flow_run(first)
        assert _state(h, rid) == "awaiting attestation"  # the run's fate changes nothing in the engine

        again = _erase_by_deployment([rid])[rid]
        _wait_paused(client, again)  # the new run went straight to the DPO's form
        assert _state(h, rid) == "awaiting attestation"
        line = signer(machine, signoff.signing_request(h, rid))
        assert line.returncode == 0, line.stderr
        resume_flow_run(again, run_input={"decision": "attest", "envelope": line.stdout.strip()})
        done = wait_final(client, {rid: again})[rid].state
    assert done.is_completed(), (done.name, done.message)
    assert _state(h, rid) == "notified" and (h.outbox_dir / f"{rid}.eml").exists()
