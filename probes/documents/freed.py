"""SQLite freed pages (issue 33 family 4): what a database deleted without `secure_delete` still holds.

A value deleted from a table stays in the pages SQLite put on its freelist, and a long value is split
over overflow pages by 4-byte page pointers. `freed_payloads` gives the freed pages' old bytes, alone and
joined into the values they held, for the views to match.
"""

from __future__ import annotations

MAX_FREED_PAGES = 1 << 16
"""Freed pages read from one SQLite file (64 Ki pages: 256 MiB at 4 KiB a page)."""


def freed_payloads(path: str) -> list[bytes]:
    """A SQLite file's freed pages (the freelist: trunk pages, whose old bytes lie past their leaf list,
    and leaf pages), read as the values they held. A value that spilled over overflow pages has a 4-byte
    pointer to the next page at the start of each, so freed pages are joined with those bytes removed:
    along the pointers they still hold, and in page order (SQLite allocates overflow pages in a row, and
    a page turned into a trunk has lost its pointer). Where `secure_delete` zeroed them there is nothing."""
    with open(path, "rb", buffering=0) as f:
        header = f.read(100)
        if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
            return []
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        trunk = int.from_bytes(header[32:36], "big")
        if not trunk or page_size < 512:
            return []

        def page(n: int) -> bytes:
            f.seek((n - 1) * page_size)
            return f.read(page_size)

        body: dict[int, bytes] = {}  # freed page -> its old bytes past what the freelist wrote over
        pointer: dict[int, int] = {}
        seen: set[int] = set()
        while trunk and trunk not in seen and len(body) < MAX_FREED_PAGES:
            seen.add(trunk)
            data = page(trunk)
            if len(data) < 8:
                break
            count = min(int.from_bytes(data[4:8], "big"), (page_size - 8) // 4)
            body[trunk] = data[8 + 4 * count :]
            for k in range(count):
                leaf = int.from_bytes(data[8 + 4 * k : 12 + 4 * k], "big")
                if leaf and leaf not in body and len(body) < MAX_FREED_PAGES:
                    leaf_data = page(leaf)
                    body[leaf], pointer[leaf] = leaf_data[4:], int.from_bytes(leaf_data[0:4], "big")
            trunk = int.from_bytes(data[0:4], "big")
    pages = {n: d for n, d in body.items() if d.strip(b"\x00")}
    if not pages:
        return []
    joined: list[bytes] = []
    heads = set(pages) - {nxt for nxt in pointer.values() if nxt in pages}
    for head in sorted(heads):  # along the pointers
        parts, n, walked = [], head, set()
        while n in pages and n not in walked:
            walked.add(n)
            parts.append(pages[n])
            n = pointer.get(n, 0)
        if len(parts) > 1:
            joined.append(b"".join(parts))
    run: list[bytes] = []
    last = -2
    for n in sorted(pages):  # in page order
        if n != last + 1 and len(run) > 1:
            joined.append(b"".join(run))
        run = [*run, pages[n]] if n == last + 1 else [pages[n]]
        last = n
    joined += [b"".join(run)] if len(run) > 1 else []
    return [*pages.values(), *joined]
