"""Parse, then match (DESIGN.md invariant 7): every payload (a file's bytes, an archive member, a decoded
stream) is identified by its content, never its name, and read by a parser made for its format; the
text it yields goes to the matcher, records separated by U+001E (`RS`: a paragraph, a table row, a JSON
object, an attribute value, a mail header), plain text as it is.

Read: plain text (UTF-8; UTF-16/32 by BOM or NUL pattern), HTML/XML (`markup`), OOXML/ODF paragraphs
and rows (`markup`, `office`, inside their zip), RTF, vCard/iCalendar, JSON, mail (`textual`), PDF (`pdf`),
gzip, zlib, bz2, xz, zstd, lz4, brotli, zip, tar, 7z (`containers`), images by OCR where Tesseract is
installed (`images`), pickles without loading them (`pickles`), MessagePack (`msgpack`), SQLite's files
(the caller reads their pages and values).

The supported store kinds' own files with no magic are identified by the kind's layout, checked against
their content (`layouts`): Chroma's HNSW segment files (against the hnswlib header beside them),
PostgreSQL's data directory (relation pages, WAL segments, SLRU, control and state files), and SQLite
rollback journals whose magic is zeroed (against the database beside them). One function of the path and
size, called by the views for every file: no kind's probe module has to be asked, and a folder of a kind
found anywhere (inside the reference store too) is read the same way.

Default deny: what is not positively identified and read comes back as `Unread` with its reason
(`unidentified-format`, `image-not-read`, `encrypted-archive`, `encrypted-pdf`, `container-corrupt`,
`container-too-large`, ...); the caller declares it. There is no entropy test and no "looks like text".
"""

from probes.documents.containers import Unread
from probes.documents.formats import identify
from probes.documents.layouts import layout_format
from probes.documents.markup import RS
from probes.documents.read import Part, Reading, read

__all__ = ["RS", "Part", "Reading", "Unread", "identify", "layout_format", "read"]
