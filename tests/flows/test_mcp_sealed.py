"""An agent files an erasure through `erasure mcp` and it ends in a sealed pack (issue 38): the console
(`erasure serve`: a Prefect server, the deployments, a worker) runs beside a fresh home with a demo
store; the agent host starts `erasure --api-url URL mcp` over stdio and speaks to it with the `mcp`
SDK's client: preview, confirm (the run starts by request id), then, once the DPO signed in the run's
form, status names the sealed pack. The run's only parameter is the request id, and none of the
subject's identifiers is anywhere in Prefect's database."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from uuid import UUID

from erasure.config import Home
from proof.keys import generate_keypair
from service import signoff
from tests.cli_fixtures import erasure
from tests.flows.test_deployments import start_console, stop_console, wait_final
from tests.flows.test_dpo_signoff_flow import _wait_paused
from tests.mcp_fixtures import Answer, call, demo_home, stdio_session
from tests.proof.test_dpo_signoff import kit_verify, signer


def _keys(h: Home, tmp: Path) -> Path:
    """The engine's key in the home; the DPO's on their own machine (public key pinned), and their kit."""
    generate_keypair("engine", h.keys_dir)
    machine = tmp / "dpo-machine"
    generate_keypair("dpo", machine)
    shutil.copyfile(machine / "dpo.pub.pem", h.keys_dir / "dpo.pub.pem")
    assert erasure("export", "--dpo-kit", "--to", str(machine / "kit"), "--home", str(h.root)).code == 0
    return machine


def test_an_agent_files_an_erasure_that_ends_in_a_sealed_pack(tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.flow_runs import resume_flow_run
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    from cli.prefect_auth import home_secret

    started = time.monotonic()
    h, subjects = demo_home(tmp_path)
    s = subjects[0]
    machine = _keys(h, tmp_path)
    c = start_console(h, tmp_path / "serve.out")
    try:

        async def agent(*tools: tuple[str, dict[str, object]]) -> list[Answer]:
            async with stdio_session(h, "--api-url", c.api, errlog=tmp_path / "mcp.err") as session:
                out: list[Answer] = []
                for name, args in tools:
                    if name == "request_erasure":
                        args = {**args, "token": out[-1].data["token"]}
                    out.append(await call(session, name, args))
                return out

        preview, filed = asyncio.run(
            agent(
                ("preview_erasure", {"subject_id": s.id, "email": s.email, "name": s.name}),
                ("request_erasure", {"requester_identity_proof_ref": "idv-case-88", "legal_basis": "CCPA"}),
            )
        )
        assert preview.error is None and filed.error is None, (preview.error, filed.error)
        assert filed.data["run_started"] is True, filed.data
        rid, run_id = str(filed.data["request_id"]), str(filed.data["run_id"])

        with (
            temporary_settings({PREFECT_API_URL: c.api, PREFECT_API_AUTH_STRING: home_secret(h)}),
            get_client(sync_client=True) as client,
        ):
            paused = _wait_paused(client, run_id)
            assert paused.parameters == {"request_id": rid}  # identifiers never enter Prefect
            line = signer(machine, signoff.signing_request(h, rid))
            assert line.returncode == 0, line.stderr
            resume_flow_run(UUID(run_id), run_input={"decision": "attest", "envelope": line.stdout.strip()})
            done = wait_final(client, {rid: run_id})
        assert done[rid].state.is_completed(), (done[rid].state.name, done[rid].state.message)

        (status,) = asyncio.run(agent(("erasure_status", {"request_id": rid})))
    finally:
        stop_console(c)
    assert status.error is None, status.error
    assert status.data["state"] == "notified" and status.data["pack"] == f"{rid}-proof.tar.gz", status.data
    assert status.data["deadline"] == filed.data["deadline"]
    verified = kit_verify(h, machine, rid)
    assert verified.returncode == 0 and verified.stdout.startswith("OK"), verified.stdout + verified.stderr
    # Nothing of the subject reached Prefect's database (parameters, logs, results, events, artifacts).
    db = (h.prefect_home / "prefect.db").read_bytes()
    for value in s.identifiers():
        assert value.encode() not in db, value
    print(f"agent request to sealed pack: {time.monotonic() - started:.1f} s")
