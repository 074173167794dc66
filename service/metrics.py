"""Prometheus metrics of the SLA table (`erasure.sla`): seconds to deadline per open request, counts by
state, overdue and at-risk totals. Labels carry request ids, legal bases and states only.

Two ways out:
- a textfile (node_exporter's textfile collector format), written atomically by the sla-monitor flow
  after each run; default `<ERASURE_HOME>/metrics/erasure_sla.prom`;
- an HTTP endpoint that recomputes on every scrape: `python -m service.metrics --port 9464`, or
  `erasure serve --metrics-port 9464`. It answers only a scrape that carries the home's credential
  (HTTP Basic, the password being the content of `<home>/keys/prefect-api.auth`, as Prometheus's
  `basic_auth.password_file` sends it): every open request's id, state and deadline are not for any
  local user. Anything else gets 401 and no metric.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import hmac
import signal
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app, write_to_textfile
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from erasure.clocks import ClockPolicy
from erasure.config import Home
from erasure.engine_db import Engine
from erasure.sla import DEFAULT_AT_RISK_DAYS, SlaRow, sla_rows, state_counts, summarise

TEXTFILE_NAME = "erasure_sla.prom"
CREDENTIAL_FILE = "prefect-api.auth"
"""The home's credential (`cli.prefect_auth` creates it): the scraper's password too."""
_REQ_LABELS = ["request_id", "legal_basis", "state", "extended", "paused"]


def default_textfile(h: Home) -> Path:
    """Where the sla-monitor flow writes the metrics unless told otherwise."""
    return h.root / "metrics" / TEXTFILE_NAME


def families(
    rows: Sequence[SlaRow], counts: dict[str, int], *, now: datetime, at_risk_days: int = DEFAULT_AT_RISK_DAYS
) -> list[Metric]:
    """The metric families for one SLA snapshot."""
    seconds = GaugeMetricFamily(
        "erasure_request_seconds_to_deadline",
        "Seconds from now to the request's legal deadline (negative when overdue).",
        labels=_REQ_LABELS,
    )
    deadline = GaugeMetricFamily(
        "erasure_request_deadline_timestamp_seconds",
        "The request's legal deadline (pauses and extensions applied), Unix time.",
        labels=_REQ_LABELS,
    )
    days = GaugeMetricFamily(
        "erasure_request_days_left", "Calendar days left before the deadline in the legal timezone.", labels=_REQ_LABELS
    )
    for r in rows:
        labels = [r.request_id, r.legal_basis.value, r.state.value, str(r.extended).lower(), str(r.paused).lower()]
        seconds.add_metric(labels, r.seconds_left)
        deadline.add_metric(labels, r.deadline.timestamp())
        days.add_metric(labels, r.days_left)
    by_state = GaugeMetricFamily("erasure_requests", "Requests by state (all requests, open or not).", labels=["state"])
    for state, n in sorted(counts.items()):
        by_state.add_metric([state], n)
    s = summarise(rows)
    totals = [
        GaugeMetricFamily("erasure_requests_open", "Open requests (not yet notified).", value=s.open),
        GaugeMetricFamily("erasure_requests_overdue", "Open requests past their legal deadline.", value=s.breached),
        GaugeMetricFamily(
            "erasure_requests_at_risk",
            "Open requests not overdue with at most the at-risk threshold of days left.",
            value=s.at_risk,
        ),
        GaugeMetricFamily("erasure_requests_paused", "Open requests whose clock is paused.", value=s.paused),
        GaugeMetricFamily("erasure_sla_at_risk_days", "The at-risk threshold in days.", value=at_risk_days),
        GaugeMetricFamily(
            "erasure_sla_generated_timestamp_seconds", "When this snapshot was computed.", value=now.timestamp()
        ),
    ]
    return [seconds, deadline, days, by_state, *totals]


class _Snapshot(Collector):
    def __init__(self, metrics: list[Metric]) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        yield from self._metrics


class SlaCollector(Collector):
    """Recomputes the SLA table from the engine database on every collection (for a live endpoint)."""

    def __init__(self, h: Home, *, at_risk_days: int = DEFAULT_AT_RISK_DAYS, policy: ClockPolicy | None = None) -> None:
        self._home = h
        self._at_risk_days = at_risk_days
        self._policy = policy

    def collect(self) -> Iterator[Metric]:
        """The current metric families."""
        now = datetime.now(UTC)
        with Engine.open(self._home.engine_db) as engine:  # a scrape is an entry point of its own
            rows = sla_rows(engine.conn, now=now, policy=self._policy, at_risk_days=self._at_risk_days)
            counts = state_counts(engine.conn)
        yield from families(rows, counts, now=now, at_risk_days=self._at_risk_days)


def write_textfile(
    path: Path,
    rows: Sequence[SlaRow],
    counts: dict[str, int],
    *,
    now: datetime,
    at_risk_days: int = DEFAULT_AT_RISK_DAYS,
) -> Path:
    """Write one snapshot in the Prometheus text format, atomically (temp file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(families(rows, counts, now=now, at_risk_days=at_risk_days)))
    write_to_textfile(str(path), registry)
    return path


def credential_file(h: Home) -> Path:
    """The file whose content a scrape must carry as its Basic password."""
    return h.keys_dir / CREDENTIAL_FILE


def authorized(header: str | None, secret: str) -> bool:
    """True when an `Authorization` header is HTTP Basic with `secret` as its password (any user name),
    or as its whole token (how Prefect's clients send the same credential). Compared in constant time."""
    if not header or not secret or not header.startswith("Basic "):
        return False
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return False
    password = decoded.partition(":")[2]
    return hmac.compare_digest(decoded.encode(), secret.encode()) or hmac.compare_digest(
        password.encode(), secret.encode()
    )


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No access log (request ids are in the answers, not in the paths; nothing to keep)."""


def serve_metrics(
    h: Home, port: int, *, secret: str, addr: str = "127.0.0.1", at_risk_days: int = DEFAULT_AT_RISK_DAYS
) -> Any:
    """Serve live metrics on `addr:port` in a daemon thread, to a scrape with the credential `secret`
    only; returns the server (`stop_metrics` it)."""
    if not secret:
        raise ValueError("the metrics endpoint needs a credential")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SlaCollector(h, at_risk_days=at_risk_days))
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        if not authorized(environ.get("HTTP_AUTHORIZATION"), secret):
            start_response(
                "401 Unauthorized", [("Content-Type", "text/plain"), ("WWW-Authenticate", 'Basic realm="erasure"')]
            )
            return [b"the home's credential is required\n"]
        return metrics(environ, start_response)

    server = make_server(addr, port, app, _Server, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="erasure-metrics", daemon=True).start()
    return server


def stop_metrics(server: Any) -> None:
    """Stop a server from `serve_metrics` and close its socket."""
    server.shutdown()
    server.server_close()


def main(argv: list[str] | None = None) -> int:
    """`python -m service.metrics`: serve live metrics on a port, or write the textfile once."""
    p = argparse.ArgumentParser(prog="python -m service.metrics", description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, help="serve on this port until interrupted")
    p.add_argument("--addr", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--textfile", type=Path, help="write the textfile here once (default: under ERASURE_HOME)")
    p.add_argument("--at-risk-days", type=int, default=DEFAULT_AT_RISK_DAYS)
    args = p.parse_args(argv)
    h = Home.resolve().ensure()
    if args.port is None:
        now = datetime.now(UTC)
        with Engine.open(h.engine_db) as engine:
            rows = sla_rows(engine.conn, now=now, at_risk_days=args.at_risk_days)
            counts = state_counts(engine.conn)
        out = write_textfile(
            args.textfile or default_textfile(h), rows, counts, now=now, at_risk_days=args.at_risk_days
        )
        print(out)
        return 0
    try:
        secret = credential_file(h).read_text().strip()
    except OSError as exc:
        p.error(f"cannot read the home's credential {credential_file(h)}: {exc.strerror} (start the server once)")
    server = serve_metrics(h, args.port, secret=secret, addr=args.addr, at_risk_days=args.at_risk_days)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"metrics on http://{args.addr}:{args.port}/metrics", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    stop_metrics(server)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
