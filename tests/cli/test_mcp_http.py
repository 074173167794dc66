"""`erasure mcp --http`: streamable HTTP behind the console's credential, driven by the `mcp` SDK's own
HTTP client. Without the credential (or with another) every request is refused with 401 and the client
cannot even initialise; with it, a preview answers with counts and a token."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx2
import pytest

from cli.prefect_auth import home_secret
from tests.mcp_fixtures import call, demo_home, http_server, http_session


def test_the_http_transport_needs_the_consoles_credential(tmp_path: Path) -> None:
    h, subjects = demo_home(tmp_path)
    s = subjects[0]
    secret = home_secret(h)
    with http_server(h, tmp_path / "mcp-http.log") as url:
        for wrong in (None, "not-the-credential", secret + "x"):
            headers = {"Authorization": f"Bearer {wrong}"} if wrong else {}
            r = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers)
            assert r.status_code == 401 and "credential" in r.text, (wrong, r.status_code)

            async def refused(credential: str | None = wrong) -> None:
                async with http_session(url, credential):
                    pass

            with pytest.raises(ExceptionGroup) as info:  # the SDK's task groups wrap its error
                asyncio.run(asyncio.wait_for(refused(), 60))
            assert "Server returned an error response" in repr(info.value)

        async def agent() -> tuple[list[str], str | None, dict[str, object], str]:
            async with http_session(url, secret) as session:
                tools = sorted(t.name for t in (await session.list_tools()).tools)
                preview = await call(session, "preview_erasure", {"subject_id": s.id, "phone": s.phone})
                return tools, preview.error, preview.data, preview.text

        tools, error, data, text = asyncio.run(agent())
    assert tools == ["erasure_status", "preview_erasure", "request_erasure"]
    assert error is None, error
    assert data["identifiers_given"] == ["id", "phone"] and isinstance(data["token"], str)
    assert not any(v in text for v in s.identifiers())
