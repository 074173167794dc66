"""`erasure mcp`: a Model Context Protocol server, so that an agent told "forget me" files the erasure
request itself, in two steps (docs/mcp.md). A thin shell over `service.agent_requests`.

- stdio (the default): for an agent host on the same machine, which starts this command itself;
- `--http HOST:PORT`: streamable HTTP at `/mcp`, behind the console's credential (the home's
  `keys/prefect-api.auth`, sent as `Authorization: Bearer <credential>`), as the request desk is.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from pydantic import Field  # the tools' annotations are read at run time, in this module's globals

from cli.shell import HomeOpt, home_of
from erasure.config import Home

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.types import ASGIApp, Receive, Scope, Send

INSTRUCTIONS = (
    "Erasure of a person's data from this platform's agent memory (GDPR Art.17, CCPA deletion). When the "
    "person you are helping asks to be forgotten: call preview_erasure with their identifiers, tell them "
    "what it found (counts only), and once they confirm and their identity is verified, call "
    "request_erasure with the token. erasure_status tells how the request stands."
)

Basis = Literal["GDPR", "CCPA", "POPIA", "KE_DPA"]


def _starter(h: Home) -> Any:
    """Start the `erasure-request` run of a request id on the home's Prefect server (or the one named by
    `--api-url` / PREFECT_API_URL); `ErasureError` when there is none (the request stays vaulted)."""

    def start(request_id: str) -> str:
        from cli import prefect_api, prefect_auth
        from cli.desk import start_run

        api_url = prefect_api.require_api(h)
        return start_run(api_url, os.environ.get(prefect_auth.CLIENT_VAR, ""), request_id)

    return start


def build_server(h: Home) -> MCPServer:
    """The MCP server of home `h`: its three tools, each one call of the service layer on an engine of
    its own; an `ErasureError` reaches the agent as a tool error of one line."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from cli.prefect_auth import home_secret
    from erasure.engine_db import Engine
    from erasure.errors import ErasureError
    from service import agent_requests

    server = MCPServer("erasure", instructions=INSTRUCTIONS)
    secret = home_secret(h)

    @server.tool()
    def preview_erasure(
        subject_id: Annotated[str, Field(description="The platform's id of the person (required).")],
        email: Annotated[str | None, Field(description="Their email address, if known.")] = None,
        name: Annotated[str | None, Field(description="Their full name, if known.")] = None,
        phone: Annotated[str | None, Field(description="Their phone number, if known.")] = None,
    ) -> dict[str, Any]:
        """Step one of an erasure: what erasing this person would remove, erasing nothing.

        Returns, per memory target and tier, how many of the person's items an erasure would remove, how
        many mentions of them in other people's items it would report rather than remove, and the holds
        that would block it; counts only. Refused (an error of one line) when an identifier given also
        belongs to another person, or a litigation hold covers the person. Returns a confirmation token
        valid for a few minutes: pass it to request_erasure once the person confirms."""
        try:
            with Engine.session(h.engine_db) as engine:
                fields = {"id": subject_id, "email": email, "name": name, "phone": phone}
                return agent_requests.preview(engine, h, secret, fields)
        except ErasureError as exc:
            raise ToolError(str(exc)) from None

    @server.tool()
    def request_erasure(
        token: Annotated[str, Field(description="The confirmation token preview_erasure returned.")],
        requester_identity_proof_ref: Annotated[
            str, Field(description="Your reference to how the person's identity was verified (no identifiers).")
        ],
        legal_basis: Annotated[Basis, Field(description="The law the person asks under; it sets the deadline.")],
    ) -> dict[str, Any]:
        """Step two: file the erasure request the token previewed and start it.

        The request is filed with its legal deadline and its run starts by request id. Refused (one line)
        when the token is expired, already used, not this server's, or what it previewed is no longer
        true: then preview again. Returns the request id and its deadline."""
        try:
            with Engine.session(h.engine_db) as engine:
                return agent_requests.confirm(
                    engine, h, secret, token, requester_identity_proof_ref, legal_basis, start=_starter(h)
                )
        except ErasureError as exc:
            raise ToolError(str(exc)) from None

    @server.tool()
    def erasure_status(
        request_id: Annotated[str, Field(description="The id request_erasure returned.")],
    ) -> dict[str, Any]:
        """How an erasure request filed here stands: its state, its legal deadline, and the name of its
        signed proof pack once sealed."""
        try:
            with Engine.session(h.engine_db) as engine:
                return agent_requests.status(engine, h, request_id)
        except ErasureError as exc:
            raise ToolError(str(exc)) from None

    return server


class BearerGate:
    """ASGI middleware: every request must carry `Authorization: Bearer <credential>` (401 otherwise)."""

    def __init__(self, app: ASGIApp, secret: str) -> None:
        self.app = app
        self.expected = f"Bearer {secret}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        import hmac

        from starlette.responses import JSONResponse

        if scope["type"] == "http":
            given = dict(scope.get("headers", [])).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = {"error": "this server needs the console's credential: Authorization: Bearer <credential>"}
                await JSONResponse(body, status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def http_app(h: Home, host: str) -> ASGIApp:
    """The streamable HTTP app at `/mcp`, behind the home's credential."""
    from cli.prefect_auth import home_secret

    app = build_server(h).streamable_http_app(host=host)
    return BearerGate(app, home_secret(h))


def _host_port(value: str) -> tuple[str, int]:
    from erasure.errors import InputError

    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError("--http: expected HOST:PORT, e.g. 127.0.0.1:8765")
    return host.strip("[]"), int(port)


def mcp(
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            show_default=False,
            help="Serve streamable HTTP at http://HOST:PORT/mcp, behind the console's credential "
            "(Authorization: Bearer <credential>), instead of stdio.",
        ),
    ] = None,
    home: HomeOpt = None,
) -> None:
    """Serve the erasure tools to agents over the Model Context Protocol (stdio, or --http).

    Tools: preview_erasure (counts and a short-lived confirmation token; nothing is filed),
    request_erasure (files the previewed request with its legal deadline and starts its run by id),
    erasure_status (state, deadline, and the pack's name once sealed). See docs/mcp.md."""
    import logging

    h = home_of(home)
    logging.getLogger("mcp").setLevel(logging.WARNING)  # never a tool's arguments in a log
    if http is None:
        build_server(h).run("stdio")
        return
    import uvicorn

    host, port = _host_port(http)
    uvicorn.run(http_app(h, host), host=host, port=port, log_level="warning")
