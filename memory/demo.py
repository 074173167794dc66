"""A deterministic demo store: K subjects (people who may file erasure requests) among many
bystanders, about N frames in all, every tier filled.

Everything goes through the same fan-out as `memory.ingest` (`ingest_sources`), in large batches,
with a seeded token stream and fixed timestamps, so the same seed gives the same store content (only
`store_meta.subject_key_secret` and the audit log's salts, commitments and hashes are random).

Shape of the data:
- every person has an id (`subj-0001` for subjects, `user-000123` for bystanders), a unique name,
  an email, a phone and two distinctive phrases of their own (`<adj> <noun> #000123-1`);
- each item has 2-6 turns: sentences drawn from a vocabulary (topics are from `ingest_text.TOPICS`, so
  bystanders SHARE topic entities with subjects), the person's phrases, sometimes their email or
  phone; every sentence in the store is distinct (so a nearest-neighbour probe with a subject's own
  vectors never meets a bystander's identical vector);
- some items carry attachments, some are training examples, and when processors are registered in
  `subprocessors` some go to them; only each person's latest item keeps a live working session;
- the corpus is frozen and a model trained on it half-way (lineage exists);
- derived frames (kind 'derived') reference 2-3 summary frames of different people via frame_refs
  and quote a sentence of each; a few quote without a reference; a few second-order ones reference
  derived frames; recall_cache rows are keyed by summary and derived frame ids.
Names, ids, phones and phrases are built so that no one's identifier is a substring of another's.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw

from erasure.errors import Conflict, InputError
from erasure.files import private_dirs, write_private
from erasure.sqlite import checkpoint_truncate, transaction
from erasure.subject import Subject
from memory import corpora
from memory.blobs import BlobData
from memory.demo_words import (
    ADJECTIVES,
    CITIES,
    CONTACT_TEMPLATES,
    DAYS,
    DOMAINS,
    FIRST_NAMES,
    NOUNS,
    PERSONAL_TEMPLATES,
    SOURCES,
    SYLLABLES,
    TEMPLATES,
    VERBS,
)
from memory.embedder import Embedder, HashingEmbedder
from memory.ingest import IngestSource, add_derived_frames, ingest_sources, sync_subprocessors
from memory.ingest_text import TOPICS
from memory.store_census import table_counts

MIN_FRAMES, MAX_FRAMES = 1_000, 1_000_000
FRAMES_PER_SUBJECT = 60
BATCH_ITEMS = 8_000
SUBJECTS_FILE = "demo-subjects.json"
MODEL_ID = "assistant-demo-v1"
BASE_MODEL = "demo-base-7b"
BASE_TIME = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
DERIVED_SHARE = 0.03  # first-order derived frames, of N
SECOND_ORDER_SHARE = 0.005


@dataclass(frozen=True)
class Person:
    """A generated person: their identifiers and their own distinctive phrases."""

    subject: Subject
    phrases: tuple[str, ...]
    is_subject: bool


@dataclass(frozen=True)
class _Planned:
    person: int
    turns: int
    source: str
    source_ref: str
    attachment: bool
    training: bool
    processors: tuple[str, ...]
    keep_session: bool


@dataclass
class DemoResult:
    """What a demo build made (counts and the subjects; no content)."""

    subjects: list[Subject]
    people: int
    items: int
    frames: int
    derived: int
    second_order: int
    recall_cache: int
    model_id: str | None
    elapsed: float
    counts: dict[str, int] = field(default_factory=dict)


def _check_sizes(frames: int, subjects: int) -> None:
    if not MIN_FRAMES <= frames <= MAX_FRAMES:
        raise InputError(f"--frames must be between {MIN_FRAMES:,} and {MAX_FRAMES:,}")
    if subjects < 1 or subjects > 9999:
        raise InputError("--subjects must be between 1 and 9999")
    if frames < FRAMES_PER_SUBJECT * subjects:
        raise InputError(f"--frames must be at least {FRAMES_PER_SUBJECT} x --subjects")


class _Names:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def next(self) -> tuple[str, str]:
        while True:
            first = self.rng.choice(FIRST_NAMES)
            last = "".join(self.rng.choice(SYLLABLES) for _ in range(3)).capitalize()
            full = f"{first} {last}"
            if full not in self.used:
                self.used.add(full)
                return first, last


def _person(rng: random.Random, names: _Names, idx: int, is_subject: bool, number: int) -> Person:
    first, last = names.next()
    pid = f"subj-{number:04d}" if is_subject else f"user-{number:06d}"
    email = f"{first}.{last}.{idx:06d}@{rng.choice(DOMAINS)}".lower()
    phone = f"+1-555-{idx:07d}"
    phrases = tuple(f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} #{idx:06d}-{j}" for j in (1, 2))
    return Person(Subject(id=pid, email=email, name=f"{first} {last}", phone=phone), phrases, is_subject)


def _plan(
    rng: random.Random, frames: int, k: int, processors: list[str]
) -> tuple[list[Person], list[_Planned], int, int]:
    """People and items (shuffled into time order) so that item frames + derived frames == frames."""
    second = max(1, int(frames * SECOND_ORDER_SHARE))
    derived = max(3, int(frames * DERIVED_SHARE))
    budget = frames - derived - second
    names = _Names(rng)
    people: list[Person] = []
    shapes: list[tuple[int, int, bool]] = []  # (person, turns, is_subject)
    used = 0
    for n in range(1, k + 1):
        people.append(_person(rng, names, len(people), True, n))
        for _ in range(rng.randint(4, 8)):
            turns = rng.randint(2, 6)
            shapes.append((len(people) - 1, turns, True))
            used += turns + 1
    bystander = 0
    while budget - used >= 2:
        bystander += 1
        people.append(_person(rng, names, len(people), False, bystander))
        for _ in range(rng.randint(1, 8)):
            left = budget - used
            if left < 2:
                break
            turns = min(rng.randint(2, 6), left - 1)
            shapes.append((len(people) - 1, turns, False))
            used += turns + 1
    if used < budget:  # one frame left over: one more turn on the last item
        p, t, s = shapes[-1]
        shapes[-1] = (p, t + budget - used, s)
    rng.shuffle(shapes)
    last_of: dict[int, int] = {p: i for i, (p, _, _) in enumerate(shapes)}
    items: list[_Planned] = []
    for i, (p, turns, is_subj) in enumerate(shapes):
        procs: tuple[str, ...] = ()
        if processors and rng.random() < (0.6 if is_subj else 0.15):
            procs = tuple(sorted(rng.sample(processors, rng.randint(1, min(2, len(processors))))))
        items.append(
            _Planned(
                person=p,
                turns=turns,
                source=rng.choice(SOURCES),
                source_ref=f"ref-{i:07d}",
                attachment=rng.random() < (0.4 if is_subj else 0.08),
                training=rng.random() < (0.5 if is_subj else 0.25),
                processors=procs,
                keep_session=last_of[p] == i,
            )
        )
    return people, items, derived, second


class _Text:
    """Sentence generator; every sentence it returns is new (checked by an 8-byte blake2b digest)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.seen: set[bytes] = set()

    def _fresh(self, templates: tuple[str, ...], own: dict[str, str], topic: str) -> str:
        while True:
            s = self.rng.choice(templates).format(**own, **self._slots(topic))
            d = hashlib.blake2b(s.encode(), digest_size=8).digest()
            if d not in self.seen:
                self.seen.add(d)
                return s

    def _slots(self, topic: str) -> dict[str, str]:
        r = self.rng
        return {
            "topic": topic,
            "topic2": r.choice(TOPICS),
            "adj": r.choice(ADJECTIVES),
            "noun": r.choice(NOUNS),
            "city": r.choice(CITIES),
            "day": r.choice(DAYS),
            "verb": r.choice(VERBS),
            "time": f"{r.randint(7, 20)}:{r.randint(0, 59):02d}",
            "amount": f"{r.randint(3, 900)} euros",
            "ref": f"R{r.randint(0, 99_999_999):08d}",
        }

    def content(self, person: Person, turns: int) -> str:
        r = self.rng
        topics = r.sample(TOPICS, r.randint(1, 3))
        s = person.subject
        out: list[str] = []
        personal_at = r.randrange(turns) if person.is_subject or r.random() < 0.5 else -1
        contact_at = r.randrange(turns) if r.random() < 0.2 else -1
        for t in range(turns):
            topic = topics[t % len(topics)]
            if t == personal_at:
                out.append(self._fresh(PERSONAL_TEMPLATES, {"phrase": r.choice(person.phrases)}, topic))
            elif t == contact_at and t != 0:
                out.append(
                    self._fresh(
                        CONTACT_TEMPLATES, {"email": s.email or "", "phone": s.phone or "", "name": s.name or ""}, topic
                    )
                )
            else:
                out.append(self._fresh(TEMPLATES, {}, topic))
        return " ".join(out)

    def attachment(self, person: Person, n: int) -> BlobData:
        s = person.subject
        body = (
            f"Scanned document {n}\nHolder: {s.name}\nEmail: {s.email}\n"
            f"Item: {person.phrases[0]}\nPages: {self.rng.randint(1, 9)}\n"
        )
        kind = self.rng.choice(("receipt", "scan", "contract", "photo-note"))
        return BlobData(filename=f"{kind}-{n:07d}.txt", data=body.encode())


def _quote_of(summary: str) -> str:
    start = summary.find('"')
    return summary[start + 1 : -1] if start >= 0 and summary.endswith('"') else summary


def _derivatives(
    conn: apsw.Connection,
    rng: random.Random,
    people: dict[str, Person],
    derived: int,
    second: int,
    embedder: Embedder,
    now: datetime,
) -> tuple[int, int, int]:
    summaries = [
        (int(r[0]), str(r[1]), str(r[2]))
        for r in conn.execute("SELECT frame_id, subject_id, content FROM frames WHERE kind='summary' ORDER BY frame_id")
    ]
    first_order: list[tuple[str, list[int]]] = []
    unlinked_every = 25
    for i in range(derived):
        picks: list[tuple[int, str, str]] = []
        owners: set[str] = set()
        want = rng.randint(2, 3)
        while len(picks) < want:
            cand = summaries[rng.randrange(len(summaries))]
            if cand[1] not in owners:
                owners.add(cand[1])
                picks.append(cand)
        parts = [f'{people[sid].subject.name} said "{_quote_of(text)}"' for _, sid, text in picks]
        content = f"Recap {i + 1}: " + "; ".join(parts) + "."
        refs = [] if i % unlinked_every == unlinked_every - 1 else [fid for fid, _, _ in picks]
        first_order.append((content, refs))
    ids = add_derived_frames(conn, first_order, embedder=embedder, now=now)
    second_frames: list[tuple[str, list[int]]] = []
    for j in range(second):
        a, b = rng.sample(range(len(ids)), 2)
        content = f"Digest {j + 1}: {first_order[a][0][:160].rstrip()} ... {first_order[b][0][:160].rstrip()} ..."
        second_frames.append((content, [ids[a], ids[b]]))
    ids2 = add_derived_frames(conn, second_frames, embedder=embedder, now=now)
    cache: list[tuple[int, str, str, str]] = []
    stamp = corpora.iso(now)
    for fid, sid, text in summaries[:: max(1, len(summaries) // max(1, derived))]:
        who = people[sid].subject.name
        cache.append((fid, f"what did {who} say last time?", _quote_of(text), stamp))
    for n, fid in enumerate(ids + ids2):
        if n % 4 == 0:
            cache.append(
                (
                    fid,
                    f"recap number {n + 1}?",
                    first_order[n][0] if n < len(ids) else second_frames[n - len(ids)][0],
                    stamp,
                )
            )
    conn.executemany("INSERT INTO recall_cache(frame_id, query, answer, created_at) VALUES (?,?,?,?)", cache)
    return len(ids), len(ids2), len(cache)


def build_demo(
    conn: apsw.Connection,
    store_dir: Path,
    *,
    frames: int,
    subjects: int,
    seed: int,
    embedder: Embedder | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> DemoResult:
    """Fill an EMPTY store with `frames` frames for `subjects` subjects plus bystanders (see the module
    docstring). `on_progress(frames_done, frames_total)` is called after each batch. `Conflict` if
    the store already holds frames, `InputError` on sizes out of range."""
    _check_sizes(frames, subjects)
    if conn.execute("SELECT 1 FROM frames LIMIT 1").fetchone() is not None:
        raise Conflict("the store already holds data: build the demo into a fresh --home")
    started = time.perf_counter()
    emb = embedder or HashingEmbedder()
    processors = sorted(str(r[0]) for r in conn.execute("SELECT name FROM subprocessors"))
    plan_rng, text_rng, token_rng = (random.Random(f"{seed}/{k}") for k in ("plan", "text", "token"))
    people, items, derived, second = _plan(plan_rng, frames, subjects, processors)
    by_id = {p.subject.id: p for p in people}
    text = _Text(text_rng)

    def token() -> str:
        return f"{token_rng.getrandbits(128):032x}"

    def sources(batch: list[_Planned], offset: int) -> Iterator[IngestSource]:
        for n, it in enumerate(batch):
            person = people[it.person]
            att = (text.attachment(person, offset + n),) if it.attachment else ()
            yield IngestSource(
                it.source,
                it.source_ref,
                person.subject,
                text.content(person, it.turns),
                att,
                it.training,
                it.processors,
                it.keep_session,
            )

    done_frames = 0
    model: str | None = None
    half = len(items) // 2
    # batch boundaries fall on the half-way point, where the model is trained
    bounds = [*range(0, half, BATCH_ITEMS), *range(half, len(items), BATCH_ITEMS), len(items)]
    for b, (start, stop) in enumerate(itertools.pairwise(bounds)):
        batch = items[start:stop]
        when = BASE_TIME + timedelta(hours=b)
        report = ingest_sources(
            conn,
            store_dir,
            list(sources(batch, start)),
            embedder=emb,
            now=when,
            actor="demo-ingest",
            batch_items=BATCH_ITEMS,
            token=token,
            sync=False,
        )
        done_frames += report.frames
        if model is None and stop >= half and corpora.latest(conn, corpora.SFT_CORPUS):
            corpora.freeze_and_train(
                conn, store_dir, corpora.SFT_CORPUS, MODEL_ID, BASE_MODEL, now=when + timedelta(minutes=30)
            )
            model = MODEL_ID
        if on_progress is not None:
            on_progress(done_frames, frames)
    with transaction(conn):
        d1, d2, cached = _derivatives(
            conn, random.Random(f"{seed}/derived"), by_id, derived, second, emb, BASE_TIME + timedelta(days=30)
        )
    done_frames += d1 + d2
    if on_progress is not None:
        on_progress(done_frames, frames)
    if conn.execute("SELECT 1 FROM subprocessor_records WHERE remote_ref IS NULL LIMIT 1").fetchone():
        sync_subprocessors(conn)
    checkpoint_truncate(conn)
    return DemoResult(
        subjects=[p.subject for p in people if p.is_subject],
        people=len(people),
        items=len(items),
        frames=done_frames,
        derived=d1,
        second_order=d2,
        recall_cache=cached,
        model_id=model,
        elapsed=round(time.perf_counter() - started, 3),
        counts=table_counts(conn),
    )


def write_subjects_file(path: Path, subjects: list[Subject], *, seed: int, tenant: str) -> Path:
    """Write the demo's request input: `{"format": "demo-subjects/v1", "seed", "tenant", "subjects":
    [{"id", "email", "name", "phone"}]}`."""
    doc: dict[str, Any] = {
        "format": "demo-subjects/v1",
        "seed": seed,
        "tenant": tenant,
        "subjects": [s.model_dump() for s in subjects],
    }
    private_dirs(path.parent)
    write_private(path, (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))  # names people
    return path
