"""Issue 34, finding 9: the live SLA metrics endpoint was open, so any local user read every open
request's id, state and deadline. The attack, as it happened: `python -m service.metrics --port P` (what
`erasure serve --metrics-port` serves too) is scraped by the OS user `nobody` with curl. It now answers
401 without the home's credential (which `nobody` cannot read), and the scrape with it still works.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from cli.prefect_auth import auth_path, home_secret
from erasure.clocks import LegalBasis
from erasure.config import Home
from erasure.engine import open_engine
from tests.process_fixtures import clean_env, free_port
from tests.service.test_sla import submit

RID = "req-metrics-private-0001"
CURL = shutil.which("curl")


@pytest.fixture
def endpoint() -> Iterator[tuple[str, Home]]:
    if os.geteuid() != 0 or CURL is None or shutil.which("runuser") is None:
        pytest.skip("needs root, runuser and curl to act as the user nobody")
    root = Path(tempfile.mkdtemp(prefix="erasure-h34-metrics-", dir="/tmp"))
    root.chmod(0o711)
    h = Home.resolve(root / "home", root / "evidence").ensure()
    home_secret(h)
    engine = open_engine(h.engine_db)
    try:
        submit(engine, RID, LegalBasis.GDPR, 3, now=datetime.now(UTC))
    finally:
        engine.close()
    port = free_port()
    env = clean_env(ERASURE_HOME=str(h.root), ERASURE_EVIDENCE=str(h.evidence_root))
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.metrics", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                httpx.get(url, timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield url, h
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


def _curl_as_nobody(url: str, *extra: str) -> tuple[str, str]:
    assert CURL is not None
    res = subprocess.run(
        ["runuser", "-u", "nobody", "--", CURL, "-s", "-w", "\n%{http_code}", *extra, url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd="/",
    )
    body, _, code = res.stdout.rpartition("\n")
    return code, body


def test_nobody_scraping_the_metrics_endpoint_reads_no_request(endpoint: tuple[str, Home]) -> None:
    url, h = endpoint
    code, body = _curl_as_nobody(url)
    assert code == "401" and RID not in body
    code, body = _curl_as_nobody(url, "-u", "nobody:guessed-" + "x" * 40)
    assert code == "401" and RID not in body
    cat = subprocess.run(["runuser", "-u", "nobody", "--", "cat", str(auth_path(h))], capture_output=True, check=False)
    assert cat.returncode != 0  # the credential is not `nobody`'s to send
    # The scraper that holds it (Prometheus' basic_auth.password_file) reads every open request.
    r = httpx.get(url, auth=("prometheus", home_secret(h)), timeout=10)
    assert r.status_code == 200 and RID in r.text
