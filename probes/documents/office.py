"""Spreadsheets whose cells point into a shared-string table (OOXML `xl/sharedStrings.xml`): each sheet row
is one record, its cells' values (shared strings resolved, inline strings, numbers) spaced. The package's
other parts, the sheets and the shared strings themselves among them, are still read one by one as zip
members (`probes.documents.markup` reads a shared string as a record of its own)."""

from __future__ import annotations

import io
import zipfile

from lxml import etree

from probes.documents.markup import S, parse_xml

MAX_PART = 64 << 20
"""Largest part read (a larger one is left to the member-by-member reading and its limits)."""


def _part(archive: zipfile.ZipFile, name: str) -> etree._Element | None:
    try:
        info = archive.getinfo(name)
        if info.file_size > MAX_PART or info.flag_bits & 0x1:
            return None
        return parse_xml(archive.read(info))
    except (KeyError, zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError):
        return None


def _text(el: etree._Element) -> str:
    return "".join(t.text or "" for t in el.iter(S + "t"))


def spreadsheet_rows(data: bytes) -> list[str]:
    """One record per row of every sheet of an XLSX package; [] when `data` is not one."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        names = archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return []
    sheets = sorted(n for n in names if n.startswith("xl/worksheets/") and n.endswith(".xml"))
    if not sheets:
        return []
    table = _part(archive, "xl/sharedStrings.xml") if "xl/sharedStrings.xml" in names else None
    shared = [_text(si) for si in table.iter(S + "si")] if table is not None else []
    rows: list[str] = []
    for name in sheets:
        sheet = _part(archive, name)
        if sheet is None:
            continue
        for row in sheet.iter(S + "row"):
            cells: list[str] = []
            for cell in row.iter(S + "c"):
                kind = cell.get("t")
                value = cell.find(S + "v")
                if kind == "inlineStr":
                    cells.append(_text(cell))
                elif value is not None and value.text:
                    if kind == "s" and value.text.strip().isdigit() and int(value.text) < len(shared):
                        cells.append(shared[int(value.text)])
                    else:
                        cells.append(value.text)
            record = " ".join(" ".join(cells).split())
            if record:
                rows.append(record)
    return rows
