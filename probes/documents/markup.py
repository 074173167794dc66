"""Markup read by lxml into records (U+001E between them, `RS`).

- HTML: the text content; a block element (p, div, tr, li, td/th, br, h1-h6, ...) ends a record, an
  inline tag (b, i, span, a, ...) is a space; a table row is one record (its cells spaced). The values of
  the attributes people's data is written in (title, alt, href, value, content, label, placeholder,
  aria-label, data-*) are each a record of their own. Comments and script text are read too.
- Office XML (OOXML's WordprocessingML, DrawingML, SpreadsheetML; ODF): one record per paragraph (w:p,
  a:p, text:p, text:h, a shared string) or table row (w:tr, a:tr, table:table-row, a sheet row), the
  runs of a paragraph joined with nothing between them (a run may split a word), a tab or break a space.
- Other XML: every tag is a space; an element with no grandchildren (a flat record such as
  `<person><given/><family/></person>`) is one record; every attribute value is a record of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

from lxml import etree
from lxml import html as lxml_html

RS = "\x1e"
"""The record separator: the matcher never lets a name match across it."""

_BLOCK = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "dd",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "head",
        "header",
        "hr",
        "html",
        "legend",
        "li",
        "main",
        "menu",
        "nav",
        "ol",
        "option",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "title",
        "tr",
        "ul",
        "textarea",
        "select",
    ]
)
_ROW = frozenset({"tr"})
_HTML_ATTRIBUTES = frozenset({"title", "alt", "href", "value", "content", "label", "placeholder", "aria-label"})

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
TEXT_NS = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
TABLE_NS = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_OFFICE_ROWS = frozenset({W + "tr", A + "tr", TABLE_NS + "table-row", S + "row"})
_OFFICE_PARAGRAPHS = frozenset({W + "p", A + "p", TEXT_NS + "p", TEXT_NS + "h", S + "si"})
_OFFICE_SPACES = frozenset(
    {W + "tab", W + "br", W + "cr", A + "br", TEXT_NS + "s", TEXT_NS + "tab", TEXT_NS + "line-break", S + "c"}
)
_OFFICE_SKIP = frozenset({W + "instrText", W + "delInstrText", S + "f"})
"""Field codes and formulas: not the document's text (their results are)."""


def _parser() -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, recover=True, load_dtd=False)


def _local(tag: object) -> str:
    return etree.QName(tag).localname.lower() if isinstance(tag, str) else ""


def html_records(text: str) -> list[str]:
    """The records of an HTML document (see the module docstring)."""
    try:
        root = lxml_html.document_fromstring(text)
    except (etree.ParserError, ValueError):
        return []
    records: list[str] = []
    current: list[str] = []

    def end() -> None:
        joined = " ".join(" ".join(current).split())
        if joined:
            records.append(joined)
        current.clear()

    def walk(el: etree._Element, in_row: bool) -> None:
        tag = _local(el.tag)
        for name, value in el.attrib.items():
            if (name.lower() in _HTML_ATTRIBUTES or name.lower().startswith("data-")) and value.strip():
                records.append(" ".join(value.split()))
        block = tag in _BLOCK and not (in_row and tag in ("td", "th"))
        if block and not in_row:
            end()
        if not isinstance(el.tag, str):  # a comment or processing instruction
            current.append(el.text or "")
        else:
            current.append(el.text or "")
            for child in el:
                walk(child, in_row or tag in _ROW)
                current.append(" ")
        if block and not in_row:
            end()
        if el.tail:
            current.append(el.tail)

    walk(root, False)
    end()
    return records


def _office_text(el: etree._Element) -> str:
    """A paragraph's text: runs joined with nothing between them; tabs and breaks a space."""
    parts: list[str] = []

    def walk(e: etree._Element) -> None:
        if e.tag in _OFFICE_SKIP:
            return
        if e.tag in _OFFICE_SPACES:
            parts.append(" ")
        if e.text and isinstance(e.tag, str):
            parts.append(e.text)
        for child in e:
            walk(child)
            if child.tail:
                parts.append(child.tail)

    walk(el)
    return " ".join("".join(parts).split())


def _office_records(root: etree._Element) -> Iterator[str]:
    for el in root.iter():
        if el.tag in _OFFICE_ROWS:
            yield " ".join(_office_text(p) for p in el.iter(*_OFFICE_PARAGRAPHS)) or _office_text(el)
        elif el.tag in _OFFICE_PARAGRAPHS and not any(a.tag in _OFFICE_ROWS for a in el.iterancestors()):
            yield _office_text(el)


def _xml_records(el: etree._Element, out: list[str]) -> None:
    for value in el.attrib.values():
        if value.strip():
            out.append(" ".join(value.split()))
    if not isinstance(el.tag, str):
        if el.text and el.text.strip():
            out.append(" ".join(el.text.split()))
        return
    if not any(len(child) for child in el):
        texts = [el.text or ""]
        for child in el:
            for value in child.attrib.values():
                if value.strip():
                    out.append(" ".join(value.split()))
            texts += [child.text or "" if isinstance(child.tag, str) else "", child.tail or ""]
        joined = " ".join(" ".join(texts).split())
        if joined:
            out.append(joined)
        return
    if el.text and el.text.strip():
        out.append(" ".join(el.text.split()))
    for child in el:
        _xml_records(child, out)
        if child.tail and child.tail.strip():
            out.append(" ".join(child.tail.split()))


def is_office(root: etree._Element) -> bool:
    """Whether an XML document is an OOXML or ODF part: it holds office paragraphs or rows (w:p, a:p,
    text:p, a shared string, a sheet row...)."""
    return next(root.iter(*_OFFICE_PARAGRAPHS, *_OFFICE_ROWS), None) is not None


def parse_xml(data: bytes | str) -> etree._Element | None:
    """An XML document's root (entities never resolved, nothing fetched); None when lxml cannot read it."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        root = etree.fromstring(raw.lstrip(b"\xef\xbb\xbf"), parser=_parser())
    except (etree.XMLSyntaxError, ValueError):
        return None
    return root


def xml_records(data: bytes | str) -> list[str] | None:
    """The records of an XML document (office rules for OOXML/ODF parts, XHTML as HTML); None when it
    is not well-formed enough for lxml to read."""
    root = parse_xml(data)
    if root is None:
        return None
    if _local(root.tag) == "html":
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        return html_records(text)
    if is_office(root):
        return [r for r in _office_records(root) if r]
    out: list[str] = []
    _xml_records(root, out)
    return out
