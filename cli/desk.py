"""The request desk: a small server-rendered page beside the Prefect UI for what must never enter Prefect
(issue 35). `erasure server start` and `erasure serve` start it (`python -m cli.desk`) on the next port.

- Behind the same credential as the Prefect UI: the login page takes the home's credential
  (keys/prefect-api.auth) and sets a session cookie (an HMAC of it; HttpOnly, SameSite=Strict, so no
  other site can post a form here).
- A new request: the envelope's fields, validated by the same model as `erasure request submit`
  (`service.intake.submit_envelope`); the identifiers go to the vault only, and the `erasure-request`
  run is started with the request id alone.
- The request list with state, deadline and who acts next; the pack, the regulator's export as one zip
  (`service.export.export_zip`), and the DPO's signing request as a file.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from cli import prefect_auth
from erasure.clocks import LegalBasis
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.errors import ErasureError
from erasure.states import RequestState
from service import intake, signoff
from service.export import check_request_id, export_zip
from service.pack_files import PACK_NAME

COOKIE = "erasure_desk"
MAX_FORM_BYTES = 64 * 1024
TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).with_name("desk_templates")), autoescape=select_autoescape(["html"])
)
#: Who acts next on a request in this state, and what they do.
NEXT_STEP: dict[RequestState, str] = {
    RequestState.submitted: "operator: the run starts from the desk or `erasure request run`",
    RequestState.paused: "compliance team: the clock is paused while the identity is verified",
    RequestState.running: "nobody: the run is under way",
    RequestState.blocked: "legal: a litigation hold covers the subject",
    RequestState.failed: "operator: a step failed; run it again",
    RequestState.exception: "operator: something was left (see the run's summary), then run again",
    RequestState.awaiting_attestation: "DPO: sign off in the run's form (Prefect UI) or `erasure attest`",
    RequestState.rejected: "operator and DPO: the DPO refused the pack; see their reason, then run again",
    RequestState.sealed: "nobody: sealed; the requester is told once all clear",
    RequestState.notified: "nobody: done",
    RequestState.reopened: "operator: a re-verification found the subject again; run it again",
}


def stop_desk(h: Home, timeout: float = 10.0) -> bool:
    """Stop the desk `server start` started (its pid file, checked to be the desk); True if it ran."""
    import contextlib
    import os
    import signal
    import time

    path = intake.desk_file(h)
    try:
        pid = int(json.loads(path.read_text())["pid"])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError, KeyError, TypeError):
        cmdline, pid = b"", 0
    running = b"cli.desk" in cmdline
    if running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return running


def write_desk_file(h: Home, url: str, pid: int) -> None:
    path = intake.desk_file(h)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"url": url, "pid": pid}) + "\n")


def how_to_log_in(h: Home, ui_url: str, desk: str) -> list[str]:
    """What `server start` and `serve` print: where the UI and the desk are, and how to log in."""
    return [
        f"request desk (new requests, packs, exports) at {desk}",
        f"the credential for both is in {prefect_auth.auth_path(h)} (0600): copy it with"
        f" `cat {prefect_auth.auth_path(h)}` and paste it into the login box of the UI and of the desk",
        f"open {ui_url}/artifacts/key/erasure-sla for the SLA table (an sla-monitor run was started now)",
    ]


def _session(secret: str, purpose: bytes = b"session") -> str:
    return hmac.new(secret.encode(), b"erasure-desk-v1-" + purpose, hashlib.sha256).hexdigest()


def _page(name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
    return HTMLResponse(TEMPLATES.get_template(name).render(**ctx), status_code=status)


async def _form(request: Request) -> dict[str, str]:
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        return {}
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}


def _fmt(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def create_app(h: Home, api_url: str) -> Starlette:
    """The desk's ASGI app for home `h`, starting runs on the Prefect API at `api_url`."""
    secret = prefect_auth.home_secret(h)
    ui_url = api_url.removesuffix("/api")

    def authed(request: Request) -> bool:
        return hmac.compare_digest(request.cookies.get(COOKIE, ""), _session(secret))

    def need_login(request: Request) -> Response | None:
        if authed(request):
            return None
        return RedirectResponse("/login", status_code=303)

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return _page("login.html", auth_file=str(prefect_auth.auth_path(h)))
        given = (await _form(request)).get("credential", "").strip()
        if not hmac.compare_digest(given.encode(), secret.encode()):
            return _page(
                "login.html",
                401,
                auth_file=str(prefect_auth.auth_path(h)),
                error="That is not this console's credential.",
            )
        resp = RedirectResponse("/", status_code=303)
        resp.set_cookie(COOKIE, _session(secret), httponly=True, samesite="strict", path="/")
        return resp

    async def index(request: Request) -> Response:
        if (r := need_login(request)) is not None:
            return r
        with Engine.session(h.engine_db) as engine:  # each page is an entry point of its own
            listed = intake.list_requests(engine)
        rows = [
            {
                "id": row.request_id,
                "basis": row.legal_basis.value,
                "state": row.state.value,
                "deadline": _fmt(row.deadline),
                "days_left": (row.deadline - datetime.now(UTC)).days,
                "next": NEXT_STEP.get(row.state, ""),
                "pack": (h.evidence_dir(row.request_id) / PACK_NAME).is_file(),
                "sealed": row.state in (RequestState.sealed, RequestState.notified),
                "awaiting": row.state is RequestState.awaiting_attestation,
            }
            for row in listed
        ]
        return _page("list.html", rows=rows, ui_url=ui_url, notice=request.query_params.get("filed"))

    async def new(request: Request) -> Response:
        if (r := need_login(request)) is not None:
            return r
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M")
        blank = {"tenant_id": "default", "legal_basis": "GDPR", "received_at": now}
        if request.method == "GET":
            return _page("new.html", f=blank, bases=[b.value for b in LegalBasis])
        f = await _form(request)
        if f.get("csrf") != _session(secret, b"form"):
            return _page(
                "new.html", 403, f=f, bases=[b.value for b in LegalBasis], error="The form expired: reload it."
            )
        subject = {k: f.get(f"subject_{k}", "").strip() for k in ("id", "email", "name", "phone")}
        received = f.get("received_at", "").strip()
        doc = {
            "request_id": f.get("request_id", "").strip(),
            "tenant_id": f.get("tenant_id", "").strip(),
            "legal_basis": f.get("legal_basis", ""),
            "subject": {k: v for k, v in subject.items() if v},
            "received_at": received + (":00Z" if len(received) == 16 else ""),
            "requester_identity_proof_ref": f.get("requester_identity_proof_ref", "").strip(),
            "reason": f.get("reason", "").strip(),
        }
        try:
            with Engine.session(h.engine_db) as engine:  # each form is an entry point of its own
                done = intake.submit_envelope(engine, json.dumps(doc).encode())
            run_id = start_run(api_url, secret, done.request_id)
        except ErasureError as exc:
            return _page("new.html", 400, f=f, bases=[b.value for b in LegalBasis], error=str(exc))
        resp = RedirectResponse(f"/?filed={done.request_id}:{run_id}", status_code=303)
        return resp

    def _download(request: Request, rid: str, kind: str) -> Response:
        if (r := need_login(request)) is not None:
            return r
        try:
            check_request_id(rid)
            if kind == "pack":
                body, name, ctype = signoff.pack_path(h, rid).read_bytes(), f"{rid}-{PACK_NAME}", "application/gzip"
            elif kind == "export":
                body, name, ctype = export_zip(h, rid), f"{rid}-export.zip", "application/zip"
            else:
                body = (signoff.signing_request(h, rid) + "\n").encode()
                name, ctype = f"{rid}-signing-request.txt", "text/plain; charset=utf-8"
        except ErasureError as exc:
            return _page("error.html", 409, error=str(exc))
        return Response(body, media_type=ctype, headers={"Content-Disposition": f'attachment; filename="{name}"'})

    async def pack(request: Request) -> Response:
        return _download(request, request.path_params["rid"], "pack")

    async def export(request: Request) -> Response:
        return _download(request, request.path_params["rid"], "export")

    async def signing(request: Request) -> Response:
        return _download(request, request.path_params["rid"], "signing")

    TEMPLATES.globals["csrf"] = _session(secret, b"form")
    return Starlette(
        routes=[
            Route("/", index),
            Route("/login", login, methods=["GET", "POST"]),
            Route("/new", new, methods=["GET", "POST"]),
            Route("/requests/{rid}/proof.tar.gz", pack),
            Route("/requests/{rid}/export.zip", export),
            Route("/requests/{rid}/signing-request.txt", signing),
        ]
    )


def start_run(api_url: str, secret: str, request_id: str) -> str:
    """Start `erasure-request` for `request_id` (its only parameter); the run's id."""
    import httpx

    try:
        with prefect_auth.api_client(api_url, secret) as c:
            r = c.get("/deployments/name/erasure-request/erasure-request")
            r.raise_for_status()
            params = {"parameters": {"request_id": request_id}}  # the request id alone, never an identifier
            r = c.post(f"/deployments/{r.json()['id']}/create_flow_run", json=params)
            r.raise_for_status()
            return str(r.json()["id"])
    except httpx.HTTPError as exc:  # httpx's errors: the request is vaulted, only the run did not start
        raise ErasureRunNotStarted(
            f"request {request_id} is vaulted, but its run did not start ({type(exc).__name__}):"
            f" `erasure request run {request_id}`"
        ) from exc


class ErasureRunNotStarted(ErasureError):
    """The request was vaulted; its run could not be started."""


def desk_cmd(h: Home, host: str, port: int, api_url: str) -> list[str]:
    """The command that serves the desk (a child of `server start` / `serve`)."""
    import sys

    return [
        sys.executable,
        "-m",
        "cli.desk",
        "--home",
        str(h.root),
        "--host",
        host,
        "--port",
        str(port),
        "--api-url",
        api_url,
    ]


def desk_port(host: str, port: int) -> int:
    """The desk's port: the one after Prefect's, else any free one."""
    import socket

    for candidate in (port + 1, 0):
        with socket.socket() as s:
            try:
                s.bind((host, candidate))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise OSError("no free port for the request desk")


def main() -> None:
    import os

    import uvicorn

    p = argparse.ArgumentParser(prog="python -m cli.desk", description="The request desk (started by erasure serve).")
    p.add_argument("--home", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--api-url", required=True)
    a = p.parse_args()
    h = Home.resolve(a.home)
    write_desk_file(h, f"http://{a.host}:{a.port}", os.getpid())
    uvicorn.run(create_app(h, a.api_url), host=a.host, port=a.port, log_level="warning")


if __name__ == "__main__":
    main()
