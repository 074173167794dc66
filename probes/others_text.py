"""Which of other people's records name the subject, read as the decoded views read a file.

A store kind's probe counts the records of other people that name the subject (mentions: reported by the
eraser, never erased; their hits in the files are explained, docs/matching.md 7.2). Counted with a literal
search, a record that names the subject in a spelling the rule reads (a format character inside the
address, a phone in Eastern Arabic digits, the name in a JSON escape, base64 of a note pasted into the
message) was no mention to the probe, while the eraser, which reads it by the rule, reported it and left it;
the views then found the subject in it after every erasure: residue for ever. Here each record is read by
the views' own reader (`probes.view_payloads.read_payload`: documents, base64 runs, escapes, the rule), so
the probe counts what its own views will find.

Records are looked at together: one trigger pass over them all (joined by NULs), and only those with a
trigger in them are read whole, as `probes.view_sqlite` reads a database's short values."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from probes.matcher import Matcher
from probes.view_payloads import FileScan, read_payload


class Naming:
    """`needles` ((kind, text) as `probes.views.scan_views` takes them) looked for in other people's
    records, one matcher for every call (its databases are compiled once)."""

    def __init__(self, needles: Sequence[tuple[str, str]]) -> None:
        self.matcher = Matcher(needles)

    def __call__(self, texts: Sequence[str | bytes]) -> list[set[int]]:
        """Per text, the indexes of the needles the decoded views find in it, inside base64 runs included."""
        out: list[set[int]] = [set() for _ in texts]
        if self.matcher.empty or not texts:
            return out
        data = [t.encode("utf-8", "surrogatepass") if isinstance(t, str) else bytes(t) for t in texts]
        starts: list[int] = []
        at = 0
        for d in data:
            starts.append(at)
            at += len(d) + 1
        joined = b"\x00".join(data)
        for i in sorted({bisect_right(starts, end - 1) - 1 for _pid, end in self.matcher.triggers(joined)}):
            scan = FileScan(self.matcher, {}, [])
            read_payload(scan, data[i], 1, whole_file=False, speculative=True)
            out[i] = set(scan.hits).union(*scan.encoded.values())
        return out


def naming(texts: Sequence[str | bytes], needles: Sequence[tuple[str, str]]) -> list[set[int]]:
    """Per text, the indexes of `needles` that the decoded views find in it (`Naming`, for one call)."""
    return Naming(needles)(texts)
