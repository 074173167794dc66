"""Tier 8 (subprocessors): ask every processor in the store's inventory, with the probes' own HTTP.

For each row of `subprocessors`: `GET {base_url}/v1/lookup?subject_ref=<subject id>` must answer
`{"count": 0}`. A processor that does not answer (after `ATTEMPTS` tries on connection errors and 5xx)
or answers nonsense is residue-unknown: residue 1 under method `lookup-unreachable:<name>`. The same
lookup for a few other subjects the processor holds (sampled in the fingerprint) gives the bystander
count: a deletion call that took others' records with it shows as a drop. The store's own
`subprocessor_records` rows of the subject are residue too.
"""

from __future__ import annotations

import time

import httpx

from probes.model import Measurement, ProbeContext, ProbeResult, to_results
from probes.store import count, ids_in, open_store

TIER = "subprocessors"
ATTEMPTS = 3
BACKOFF = 0.2


class _Unreachable(Exception):
    pass


def _lookup(client: httpx.Client, base_url: str, subject_ref: str) -> int:
    url = f"{base_url.rstrip('/')}/v1/lookup"
    for attempt in range(ATTEMPTS):
        if attempt:
            time.sleep(BACKOFF * attempt)
        try:
            resp = client.get(url, params={"subject_ref": subject_ref})
        except httpx.HTTPError:
            continue
        if resp.status_code >= 500 or resp.status_code == 429:
            continue
        if resp.status_code != 200:
            break
        try:
            n = resp.json().get("count")
        except (ValueError, AttributeError):
            break
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            return n
        break
    raise _Unreachable


def measure(ctx: ProbeContext) -> list[Measurement]:
    """One lookup result per processor, and the store's records of the subject."""
    keys = ctx.fingerprint.keys
    with open_store(ctx.store_dir) as conn:
        processors = [(str(n), str(u)) for n, u in conn.execute(
            "SELECT name, base_url FROM subprocessors ORDER BY name")]
        records = count(conn, f"SELECT count(*) FROM subprocessor_records WHERE subject_id {ids_in()}", (ctx.ids_json,))
        record_others = count(conn, f"SELECT count(*) FROM subprocessor_records WHERE subject_id NOT {ids_in()}",
                              (ctx.ids_json,))
    out = [Measurement("records-by-subject-id", records, "records", record_others)]
    if not processors:
        return out
    with httpx.Client(timeout=ctx.http_timeout) as client:
        for name, url in processors:
            try:
                residue = sum(_lookup(client, url, sid) for sid in ctx.ids)
                others = sum(_lookup(client, url, ref) for ref in keys.subprocessor_bystanders.get(name, []))
            except _Unreachable:
                out.append(Measurement(f"lookup-unreachable:{name}", 1, f"unreachable:{name}", 0))
                continue
            out.append(Measurement(f"lookup:{name}", residue, f"processor:{name}", others))
    return out


def probe(ctx: ProbeContext) -> list[ProbeResult]:
    """Probe the subprocessors."""
    return to_results(TIER, measure(ctx), ctx.fingerprint)
