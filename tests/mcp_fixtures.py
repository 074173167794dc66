"""Driving `erasure mcp` as an agent host does: the command as a subprocess, spoken to over stdio (or
streamable HTTP) by the `mcp` SDK's own client. A home with a demo store (`erasure store init --demo`)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from erasure.config import PROJECT_ROOT, Home
from erasure.subject import Subject
from tests.cli_fixtures import erasure


@dataclass(frozen=True)
class Answer:
    """One tool call's answer: an error's one line, or the tool's structured result."""

    error: str | None
    data: dict[str, Any]
    text: str


def demo_home(tmp: Path) -> tuple[Home, list[Subject]]:
    """A fresh home with a small demo store; the demo's subjects."""
    h = Home.resolve(tmp / "home", tmp / "evidence").ensure()
    res = erasure("store", "init", "--demo", "--frames", "1000", "--subjects", "3", "--home", str(h.root), "--json")
    assert res.code == 0, res.err
    doc = json.loads(Path(json.loads(res.out)["subjects_file"]).read_text())
    return h, [Subject(**s) for s in doc["subjects"]]


def server_env(h: Home, **extra: str) -> dict[str, str]:
    """The environment an agent host gives `erasure mcp`: the home, and no Prefect of the test's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ERASURE_"))}
    env.update(
        ERASURE_HOME=str(h.root),
        ERASURE_EVIDENCE=str(h.evidence_root),
        DO_NOT_TRACK="1",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        **extra,
    )
    return env


def command(*args: str) -> list[str]:
    """`erasure [ARGS] mcp` as an agent host's configuration names it."""
    return [sys.executable, "-m", "cli.main", *args, "mcp"]


@asynccontextmanager
async def stdio_session(h: Home, *args: str, errlog: Path, **env: str) -> AsyncIterator[Any]:
    """An initialised client session with `erasure [ARGS] mcp` over stdio (its stderr to `errlog`)."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    cmd = command(*args)
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=server_env(h, **env), cwd=PROJECT_ROOT)
    with open(errlog, "a") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call(session: Any, tool: str, arguments: dict[str, Any]) -> Answer:
    """Call `tool`; its error line or its structured result."""
    res = await session.call_tool(tool, arguments)
    text = "\n".join(getattr(c, "text", "") for c in res.content)
    if res.is_error:
        return Answer(text, {}, text)
    return Answer(None, dict(res.structured_content or {}), text)


@contextmanager
def http_server(h: Home, log: Path) -> Iterator[str]:
    """`erasure mcp --http 127.0.0.1:PORT` as a subprocess; its endpoint URL, once it answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [*command(), "--http", f"127.0.0.1:{port}"],
            cwd=PROJECT_ROOT,
            env=server_env(h),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@asynccontextmanager
async def http_session(url: str, credential: str | None) -> AsyncIterator[Any]:
    """An initialised client session over streamable HTTP, sending `credential` as a bearer token."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {credential}"} if credential else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session
