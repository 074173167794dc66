"""The text of an item as ingest cuts it (`memory.ingest`): its turns, its chunks of at most
`CHUNK_CHARS` characters, the topics it mentions from a fixed vocabulary, and the summary that names
the subject."""

from __future__ import annotations

import re
from collections.abc import Sequence

from erasure.subject import Subject

CHUNK_CHARS = 300
SUMMARY_QUOTE_CHARS = 200

TOPICS: tuple[str, ...] = (
    "billing",
    "shipping",
    "refund",
    "password",
    "invoice",
    "subscription",
    "delivery",
    "warranty",
    "account",
    "privacy",
    "travel",
    "insurance",
    "mortgage",
    "pharmacy",
    "appointment",
    "vaccination",
    "taxes",
    "payroll",
    "pension",
    "gardening",
    "football",
    "cooking",
    "photography",
    "hiking",
    "music",
    "chess",
    "astronomy",
    "cycling",
    "knitting",
    "painting",
    "budget",
    "holiday",
    "wedding",
    "recipe",
    "marathon",
    "laptop",
    "printer",
    "router",
    "headphones",
    "parking",
    "rent",
    "loan",
)
"""The fixed topic vocabulary: a topic entity is created for each term an item mentions."""
_TOPIC_RE = re.compile(r"\b(" + "|".join(TOPICS) + r")\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_turns(content: str) -> list[str]:
    """Sentences/turns of `content`: lines, then sentences ending in . ! or ?; empty parts dropped."""
    out: list[str] = []
    for line in content.splitlines():
        out += [s.strip() for s in _SENTENCE_END.split(line) if s.strip()]
    return out or [content.strip()]


def chunk_text(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """Split `text` into chunks of at most `size` characters, at spaces where possible.

    Each chunk ends at the last space within `size` characters of its start (else at `size`), loses
    its trailing whitespace, and the next one starts after the whitespace that follows. Linear in the
    length: it walks an offset through `text` instead of copying the rest of it per chunk."""
    n = len(text)
    if n <= size:
        return [text]
    chunks: list[str] = []
    pos = 0
    while n - pos > size:
        cut = text.rfind(" ", pos, pos + size + 1) - pos
        if cut <= 0:
            cut = size
        chunks.append(text[pos : pos + cut].rstrip())
        pos += cut
        while pos < n and text[pos].isspace():
            pos += 1
    if pos < n:
        chunks.append(text[pos:])
    return chunks


def topics_of(content: str) -> list[str]:
    """Topic terms mentioned in `content`, lowercase, in order of first mention."""
    seen: dict[str, None] = {}
    for m in _TOPIC_RE.finditer(content):
        seen.setdefault(m.group(1).lower(), None)
    return list(seen)


def person_name(subject: Subject) -> str:
    """The name of the subject's person entity: their name, else their id."""
    return subject.name or subject.id


def summary_text(subject: Subject, source: str, first_sentence: str, topics: Sequence[str]) -> str:
    """A short summary that names the subject and quotes the first sentence."""
    quote = (
        first_sentence
        if len(first_sentence) <= SUMMARY_QUOTE_CHARS
        else (first_sentence[:SUMMARY_QUOTE_CHARS].rstrip() + "...")
    )
    about = ", ".join(topics[:3]) if topics else "general matters"
    return f'{person_name(subject)} discussed {about} in {source}. They said: "{quote}"'
