"""Tier 8 (subprocessors): ask every processor in the store's inventory, with the probes' own HTTP.

For each row of `subprocessors`: `GET {base_url}/v1/lookup?subject_ref=<subject id>` must answer
`{"count": 0}`. A processor that does not answer (after `ATTEMPTS` tries on connection errors and 5xx,
each over by the probe's HTTP timeout in all, however slowly the peer drips its answer: the deadline
client of `erasure.peer_http`, a transport only) or answers
nonsense (or more than `MAX_ANSWER` bytes) is residue-unknown: residue 1 under method
`lookup-unreachable:<name>`. The same lookup for a few other subjects the processor holds (sampled in
the fingerprint) gives the bystander count: a deletion call that took others' records with it shows as
a drop. The store's own
`subprocessor_records` rows of the subject are residue too.

The measurement comes in two parts, so that no lookup is made while the store is locked (issue 34):
`read_store` reads the inventory and the store's records (under the caller's lock), `ask` makes the
lookups (no store), `measured` combines them. `measure` does all three at once.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from erasure.peer_http import PeerClient, PeerError, PeerUnreachable
from probes.context import ProbeContext, to_results
from probes.model import Measurement, ProbeResult
from probes.store import count, ids_in, open_store

TIER = "subprocessors"
ATTEMPTS = 3
BACKOFF = 0.2
MAX_ANSWER = 64 * 1024
"""A lookup answer is a few dozen bytes: anything over this is nonsense (residue-unknown)."""


class Unreachable(Exception):
    """The processor gave no count: no answer within the deadline, an error, or nonsense."""


def _get_count(client: PeerClient, url: str, subject_ref: str, timeout: float) -> int | None:
    """One GET within `timeout` seconds in all: the count, None for a transient failure (retry), or
    `Unreachable` for an answer that will not change (4xx, nonsense, too large)."""
    try:
        resp = client.request("GET", url, params={"subject_ref": subject_ref}, deadline=time.monotonic() + timeout)
    except PeerUnreachable:
        return None
    except PeerError:  # too large, or a URL that cannot be asked
        raise Unreachable from None
    if resp.status_code >= 500 or resp.status_code == 429:
        return None
    if resp.status_code != 200:
        raise Unreachable
    try:
        n = resp.json().get("count")
    except (ValueError, AttributeError):
        raise Unreachable from None
    if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
        return n
    raise Unreachable


class Lookups:
    """The probe's HTTP client for processors' lookups (a connection pool). Use as a context manager."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._client = PeerClient(connect_timeout=timeout, max_bytes=MAX_ANSWER)

    def count(self, base_url: str, subject_ref: str) -> int:
        """`GET {base_url}/v1/lookup?subject_ref=...`: the count; `Unreachable` after `ATTEMPTS` tries
        of at most `timeout` seconds each, or at once on an answer that is not a count."""
        url = f"{base_url.rstrip('/')}/v1/lookup"
        for attempt in range(ATTEMPTS):
            if attempt:
                time.sleep(BACKOFF * attempt)
            n = _get_count(self._client, url, subject_ref, self.timeout)
            if n is not None:
                return n
        raise Unreachable

    def __enter__(self) -> Lookups:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()


def lookup(base_url: str, subject_ref: str, *, timeout: float) -> int:
    """The processor's count for `subject_ref`; `Unreachable` when it gives none."""
    with Lookups(timeout) as lookups:
        return lookups.count(base_url, subject_ref)


Pair = tuple[str, str]
"""(base_url, subject_ref): one lookup."""
Answers = Mapping[Pair, int | None]
"""Each lookup's count; None: the processor gave none (`Unreachable`)."""


@dataclass(frozen=True)
class StorePart:
    """What the store says for one probe: its processors (name, base_url) and its records."""

    processors: tuple[tuple[str, str], ...]
    records: Measurement


def read_store(ctx: ProbeContext) -> StorePart:
    """The store's part of the measurement: the inventory and the subject's (and others') records."""
    with open_store(ctx.store_dir) as conn:
        processors = tuple(
            (str(n), str(u)) for n, u in conn.execute("SELECT name, base_url FROM subprocessors ORDER BY name")
        )
        records = count(conn, f"SELECT count(*) FROM subprocessor_records WHERE subject_id {ids_in()}", (ctx.ids_json,))
        record_others = count(
            conn, f"SELECT count(*) FROM subprocessor_records WHERE subject_id NOT {ids_in()}", (ctx.ids_json,)
        )
    return StorePart(processors, Measurement("records-by-subject-id", records, "records", record_others))


def wanted(part: StorePart, ctx: ProbeContext) -> list[Pair]:
    """The lookups `measured` needs for `ctx` (its subject's ids and bystander samples), each once."""
    refs = ctx.fingerprint.keys.subprocessor_bystanders
    return list(dict.fromkeys((url, ref) for name, url in part.processors for ref in (*ctx.ids, *refs.get(name, []))))


def ask(pairs: Iterable[Pair], timeout: float) -> dict[Pair, int | None]:
    """Every lookup (no store handle): its count, or None when the processor gave none. After one
    lookup of a processor gives none, its other lookups are not made (each would wait as long)."""
    out: dict[Pair, int | None] = {}
    dead: set[str] = set()
    with Lookups(timeout) as lookups:
        for url, ref in dict.fromkeys(pairs):
            if url in dead:
                out[(url, ref)] = None
                continue
            try:
                out[(url, ref)] = lookups.count(url, ref)
            except Unreachable:
                out[(url, ref)] = None
                dead.add(url)
    return out


def measured(part: StorePart, ctx: ProbeContext, answers: Answers) -> list[Measurement]:
    """The store's records and one lookup result per processor, from `answers` (a lookup not there
    counts as unanswered: residue-unknown)."""
    refs = ctx.fingerprint.keys.subprocessor_bystanders
    out = [part.records]
    for name, url in part.processors:
        residue = [answers.get((url, sid)) for sid in ctx.ids]
        others = [answers.get((url, ref)) for ref in refs.get(name, [])]
        if _unanswered(residue) or _unanswered(others):
            out.append(Measurement(f"lookup-unreachable:{name}", 1, f"unreachable:{name}", 0))
        else:
            out.append(
                Measurement(
                    f"lookup:{name}", sum(n or 0 for n in residue), f"processor:{name}", sum(n or 0 for n in others)
                )
            )
    return out


def _unanswered(counts: Collection[int | None]) -> bool:
    return any(n is None for n in counts)


def measure(ctx: ProbeContext) -> list[Measurement]:
    """One lookup result per processor, and the store's records of the subject (with `ctx.lookups`
    off: the records only)."""
    part = read_store(ctx)
    if not ctx.lookups:
        return [part.records]
    return measured(part, ctx, ask(wanted(part, ctx), ctx.http_timeout))


def probe(ctx: ProbeContext) -> list[ProbeResult]:
    """Probe the subprocessors."""
    return to_results(TIER, measure(ctx), ctx.fingerprint)
