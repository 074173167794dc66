"""The audit-log redaction evidence (audit-log-redaction/v3) against the size of the log.

    .venv/bin/python bench/audit_evidence.py [--sizes 10000,100000,1000000] [--subject-entries 20]

For each size, a synthetic store on a temporary file: a log of that many entries (`audit.append` in one
transaction), `--subject-entries` of them holding the subject's email as a commitment, spread over the
log. Then, timed: the first checkpoint (fills the Merkle tree of the whole log once: what an existing
store pays on upgrade), the erasure's part (checkpoint before, redact, redaction entry, checkpoint
after: the tree grows by one leaf), the evidence build (`redaction_evidence` and its JSON), and the
offline verifier's check 7 on it. Prints one table: times in seconds, the evidence in bytes (as written
and gzipped, as it travels in the pack).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from erasure.sqlite import transaction
from memory import audit, schema
from proof import verify

SUBJECT, EMAIL, REQUEST = "subj-bench", "bench.subject@example.org", "req-bench-1"


def one(size: int, subject_entries: int) -> dict[str, float | int]:
    with tempfile.TemporaryDirectory(prefix="audit-bench-") as tmp:
        store_dir = Path(tmp) / "store"
        conn = schema.create(store_dir)
        try:
            every = max(1, size // subject_entries)
            t = time.perf_counter()
            with transaction(conn):
                for i in range(1, size + 1):
                    personal: dict[str, tuple[str | None, str]] | None = (
                        {"email": (SUBJECT, EMAIL)} if i % every == every // 2 else None
                    )
                    audit.append(conn, "ingest", "ingest-worker", {"items": i % 7}, personal)
            built = time.perf_counter() - t

            t = time.perf_counter()
            audit.checkpoint(conn, store_dir)
            first_checkpoint = time.perf_counter() - t

            t = time.perf_counter()
            with transaction(conn):
                before = audit.checkpoint(conn, store_dir)
                result = audit.redact_subject(conn, SUBJECT)
                audit.append(
                    conn, audit.REDACTION_EVENT, "erasure-engine", {"request_id": REQUEST, "redacted": result.count}
                )
                after = audit.checkpoint(conn, store_dir)
            erasure = time.perf_counter() - t

            t = time.perf_counter()
            doc = audit.redaction_evidence(
                conn, store_dir, before, after, result, request_id=REQUEST, subject_id=SUBJECT
            )
            data = (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode()
            evidence = time.perf_counter() - t

            t = time.perf_counter()
            summary = verify.check_audit_log(data)
            check = time.perf_counter() - t
            assert summary.redaction_request == REQUEST
            assert EMAIL.encode() not in data and SUBJECT.encode() not in data
        finally:
            conn.close()
    return {
        "entries": size,
        "subject": len(doc["entries"]) - 1,
        "build_log": built,
        "first_checkpoint": first_checkpoint,
        "erasure": erasure,
        "evidence": evidence,
        "bytes": len(data),
        "gzipped": len(gzip.compress(data, mtime=0)),
        "verify": check,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--subject-entries", type=int, default=20)
    args = ap.parse_args()
    rows = [one(int(n), args.subject_entries) for n in args.sizes.split(",")]
    print(
        "| log entries | subject's entries | build log | first checkpoint (tree fill) | checkpoints + redaction"
        " | evidence build | evidence bytes | gzipped | check 7 |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['entries']:,} | {r['subject']} | {r['build_log']:.1f} s | {r['first_checkpoint']:.2f} s"
            f" | {r['erasure']:.3f} s | {r['evidence']:.3f} s | {r['bytes']:,} | {r['gzipped']:,}"
            f" | {r['verify']:.3f} s |"
        )


if __name__ == "__main__":
    main()
