"""A small real store for the probe tests, and a thorough erasure done by hand (raw SQL).

The store is built with the real schema and the real ingest (`memory.schema.create`,
`memory.ingest.ingest_sources`), plus the derivatives ingest does not make: derived frames that
reference and quote other frames, and recall-cache rows. `erase_by_hand` is the tests' own oracle of
a complete erasure, independent of both the cascade under `tasks/` and the probes; each of its steps
can be skipped to plant exactly one kind of residue.
"""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import apsw
import httpx

from erasure.sqlite import checkpoint_truncate, transaction
from erasure.subject import Subject
from memory.blobs import BlobData
from memory.ingest import IngestSource, ingest_sources
from memory.schema import create

SUBJECT = Subject(id="subj-7f3a9c", email="dana.ortiz@example.org", name="Dana Ortiz", phone="+1 555 0142")
BYSTANDERS = (
    Subject(id="subj-11b2e0", email="li.wei@example.net", name="Li Wei"),
    Subject(id="subj-52c8d4", name="Amara Okafor"),
    Subject(id="subj-9e0f17", email="jon.berg@example.com", name="Jon Berg", phone="+47 400 12 345"),
)
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

_SUBJECT_ITEMS = (
    (
        "chat",
        "conv-dana-001",
        "My parcel to Lisbon never arrived and I want a refund. The courier left a"
        " note about the orange gate behind the bakery on Rua Augusta. Please check the billing address too.",
        True,
    ),
    (
        "email",
        "msg-dana-002",
        "Please update my pharmacy appointment to Thursday afternoon. My allergy list"
        " now includes penicillin and the blue inhaler from the Alvalade clinic.",
        True,
    ),
    (
        "chat",
        "conv-dana-003",
        "I am planning a hiking holiday in the Serra da Estrela with my sister Inês."
        " Could you compare the cabin prices near Manteigas for the second week of June?",
        False,
    ),
)
_BYSTANDER_ITEMS = (
    (
        "chat",
        "conv-li-001",
        "The router in the study keeps dropping the connection every evening around"
        " nine. I already swapped the cable and moved the antenna closer to the window.",
        True,
    ),
    (
        "email",
        "msg-li-002",
        "Thanks for the refund on the late delivery of the winter boots. The billing"
        " portal still shows the old card ending in the wrong digits.",
        False,
    ),
    (
        "chat",
        "conv-amara-001",
        "I would like advice on a vegetable recipe for twelve guests at the wedding"
        " rehearsal dinner, ideally something with roasted squash and lentils.",
        True,
    ),
    (
        "email",
        "msg-amara-002",
        "My pension statement lists two employers from the nineties that I never"
        " worked for. Could the payroll office send the original contribution records?",
        False,
    ),
    (
        "chat",
        "conv-jon-001",
        "Our chess club needs a printer for tournament pairings that handles heavy card"
        " stock. Budget is modest, and it must work without a cloud account.",
        True,
    ),
    (
        "email",
        "msg-jon-002",
        "Please move my astronomy evening course to the spring term. The telescope loan"
        " form is attached and signed by the club treasurer.",
        False,
    ),
)


@dataclass
class Built:
    """What `build_store` made: the store, a writable connection kept open, and known ids."""

    store_dir: Path
    conn: apsw.Connection
    subject_pairs: list[tuple[str, str]] = field(default_factory=list)
    derived_subject: list[int] = field(default_factory=list)
    derived_bystander: list[int] = field(default_factory=list)


def _tokens() -> Iterator[str]:
    return (f"tok{n:04d}{secrets.token_hex(4)}" for n in itertools.count())


def _attachment(tag: str) -> BlobData:
    body = f"%PDF-1.7 scanned form for {tag}\n".encode() + secrets.token_bytes(2048) + f"\nend of {tag}\n".encode()
    return BlobData(filename=f"{tag}.pdf", data=body)


def sources(subject_present: bool = True, processors: tuple[str, ...] = ()) -> list[IngestSource]:
    """The items to ingest: three of SUBJECT (if present), two of each bystander."""
    out: list[IngestSource] = []
    if subject_present:
        out += [
            IngestSource(src, ref, SUBJECT, text, (_attachment(ref),), training, processors)
            for src, ref, text, training in _SUBJECT_ITEMS
        ]
    for i, (src, ref, text, training) in enumerate(_BYSTANDER_ITEMS):
        who = BYSTANDERS[i // 2]
        out.append(IngestSource(src, ref, who, text, (_attachment(ref),) if i % 2 == 0 else (), training, processors))
    return out


def build_store(store_dir: Path, *, subject_present: bool = True, processors: Iterable[tuple[str, str]] = ()) -> Built:
    """Create and fill a store; registers `processors` (name, url) and syncs records to them."""
    conn = create(store_dir)
    procs = tuple(processors)
    with transaction(conn):
        for name, url in procs:
            conn.execute(
                "INSERT INTO subprocessors(name, base_url, purpose, holds) VALUES (?,?,?,?)",
                (name, url, "test processor", "[]"),
            )
    tokens = _tokens()
    ingest_sources(
        conn,
        store_dir,
        sources(subject_present, tuple(n for n, _ in procs)),
        now=NOW,
        token=lambda: next(tokens),
        sync=bool(procs),
    )
    built = Built(store_dir=store_dir, conn=conn)
    if subject_present:
        built.subject_pairs = [(s, r) for s, r, _, _ in _SUBJECT_ITEMS]
    _add_derivatives(built, subject_present)
    return built


def _summary_of(conn: apsw.Connection, subject_id: str) -> list[int]:
    return [
        int(r[0])
        for r in conn.execute(
            "SELECT frame_id FROM frames WHERE kind='summary' AND subject_id=? ORDER BY frame_id", (subject_id,)
        )
    ]


def add_frame(
    conn: apsw.Connection, kind: str, content: str, *, subject_id: str | None = None, refs: Iterable[int] = ()
) -> int:
    """Insert a frame with its FTS row (raw SQL), referencing `refs`; returns its id."""
    with transaction(conn):
        top = conn.execute("SELECT coalesce(max(frame_id), 0) + 1000 FROM frames").fetchone()
        assert top is not None
        fid = int(top[0])
        conn.execute(
            "INSERT INTO frames(frame_id, kind, subject_id, content, created_at) VALUES (?,?,?,?,?)",
            (fid, kind, subject_id, content, NOW.isoformat()),
        )
        conn.execute("INSERT INTO frames_fts(rowid, content) VALUES (?,?)", (fid, content))
        conn.executemany("INSERT INTO frame_refs(frame_id, ref_frame_id) VALUES (?,?)", [(fid, r) for r in refs])
    return fid


def _add_derivatives(built: Built, subject_present: bool) -> None:
    conn = built.conn
    by = _summary_of(conn, BYSTANDERS[0].id)
    built.derived_bystander.append(
        add_frame(
            conn,
            "derived",
            "Weekly digest: connection drops in the study were traced to channel interference.",
            refs=by,
        )
    )
    with transaction(conn):
        conn.execute(
            "INSERT INTO recall_cache(frame_id, query, answer, created_at) VALUES (?,?,?,?)",
            (by[0], "why does the router drop", "channel interference", NOW.isoformat()),
        )
    if not subject_present:
        return
    mine = _summary_of(conn, SUBJECT.id)
    first = add_frame(
        conn,
        "derived",
        "Digest: a refund for a lost parcel was requested; courier notes mention a gate.",
        refs=mine[:1],
    )
    second = add_frame(conn, "derived", "Rollup of digests for the quarter.", refs=[first, *by[:1]])
    quoting = add_frame(conn, "derived", f"Follow up with {SUBJECT.name} about the clinic change.")
    built.derived_subject += [first, second, quoting]
    with transaction(conn):
        conn.execute(
            "INSERT INTO recall_cache(frame_id, query, answer, created_at) VALUES (?,?,?,?)",
            (mine[0], "where was the parcel left", "by the orange gate", NOW.isoformat()),
        )


# --- the oracle erasure ---------------------------------------------------------------------------

STEPS = frozenset(
    {
        "frames",
        "turn_frames",
        "chunk_vectors",
        "frame_vectors",
        "fts",
        "recall_cache",
        "derived",
        "entities",
        "relations",
        "archive",
        "sessions",
        "session_files",
        "blobs",
        "blob_files",
        "examples",
        "corpus_files",
        "subprocessors",
        "subprocessor_calls",
        "vault",
        "checkpoint",
    }
)


def _ids(conn: apsw.Connection, sql: str, params: tuple[object, ...] = ()) -> list[int]:
    return [int(r[0]) for r in conn.execute(sql, params)]


def _in(ids: Iterable[object]) -> str:
    return json.dumps(sorted(set(ids)))


IN = "IN (SELECT value FROM json_each(?))"


def erase_by_hand(built: Built, subject: Subject = SUBJECT, *, skip: Iterable[str] = ()) -> None:
    """Erase `subject` completely with raw SQL and file removal, except the steps named in `skip`."""
    skipped = set(skip)
    assert skipped <= STEPS, skipped - STEPS
    conn, store = built.conn, built.store_dir
    sid = subject.id
    pairs = [
        (str(s), str(r))
        for s, r in conn.execute("SELECT source, source_ref FROM raw_archive WHERE subject_id=?", (sid,))
    ]
    archive = _ids(conn, "SELECT archive_id FROM raw_archive WHERE subject_id=?", (sid,))
    summaries = _ids(conn, "SELECT frame_id FROM frames WHERE subject_id=? AND kind != 'derived'", (sid,))
    turns = _ids(conn, f"SELECT frame_id FROM frames WHERE turn_key {IN}", (_in(f"{s}/{r}" for s, r in pairs),))
    derived = _derived(conn, subject, set(summaries) | set(turns))
    frames = summaries + ([] if "turn_frames" in skipped else turns) + ([] if "derived" in skipped else derived)
    chunks = _ids(conn, f"SELECT chunk_id FROM frame_chunks WHERE frame_id {IN}", (_in(frames),))
    named = _ids(
        conn,
        f"SELECT entity_id FROM kg_entities WHERE name {IN} AND kind IN ('person','email','phone')",
        (_in(subject.identifiers()),),
    )
    linked = _ids(conn, f"SELECT DISTINCT entity_id FROM kg_entity_frames WHERE frame_id {IN}", (_in(frames),))
    sessions = [str(r[0]) for r in conn.execute("SELECT session_id FROM working_sessions WHERE subject_id=?", (sid,))]
    blob_keys = [str(r[0]) for r in conn.execute("SELECT blob_key FROM blobs WHERE subject_id=?", (sid,))]
    processors = [
        (str(n), str(u))
        for n, u in conn.execute(
            "SELECT DISTINCT s.name, s.base_url FROM subprocessors s JOIN subprocessor_records r"
            " ON r.processor = s.name WHERE r.subject_id=?",
            (sid,),
        )
    ]

    def run(step: str, sql: str, params: tuple[object, ...] = ()) -> None:
        if step not in skipped:
            conn.execute(sql, params)

    with transaction(conn):
        run("chunk_vectors", f"DELETE FROM chunk_vectors WHERE chunk_id {IN}", (_in(chunks),))
        run("frame_vectors", f"DELETE FROM frame_vectors WHERE frame_id {IN}", (_in(frames),))
        run("fts", f"DELETE FROM frames_fts WHERE rowid {IN}", (_in(frames),))
        run("recall_cache", f"DELETE FROM recall_cache WHERE frame_id {IN}", (_in(frames),))
        subject_entities = named + [e for e in linked if e not in named]
        run(
            "relations",
            f"DELETE FROM kg_relations WHERE frame_id {IN} OR src_entity_id {IN} OR dst_entity_id {IN}",
            (_in(frames), _in(named), _in(named)),
        )
        run("frames", f"DELETE FROM frames WHERE frame_id {IN}", (_in(frames),))
        if "entities" not in skipped:
            orphans = _ids(
                conn,
                f"SELECT entity_id FROM kg_entities WHERE entity_id {IN}"
                " AND entity_id NOT IN (SELECT entity_id FROM kg_entity_frames)",
                (_in(subject_entities),),
            )
            conn.execute(
                f"DELETE FROM kg_relations WHERE src_entity_id {IN} OR dst_entity_id {IN}", (_in(orphans), _in(orphans))
            )
            conn.execute(f"DELETE FROM kg_entity_frames WHERE entity_id {IN}", (_in(named),))
            conn.execute(f"DELETE FROM kg_entities WHERE entity_id {IN}", (_in(set(orphans) | set(named)),))
        run(
            "archive",
            f"UPDATE raw_archive SET content=NULL, subject_id=NULL, erased_at=?, erasure_ref='req-t',"
            f" archive_uid=lower(hex(randomblob(16))) WHERE archive_id {IN}",
            (NOW.isoformat(), _in(archive)),
        )
        run("sessions", "DELETE FROM working_sessions WHERE subject_id=?", (sid,))
        run("blobs", "DELETE FROM blobs WHERE subject_id=?", (sid,))
        run("examples", "DELETE FROM ft_examples WHERE subject_id=?", (sid,))
        run("subprocessors", "DELETE FROM subprocessor_records WHERE subject_id=?", (sid,))
        run("vault", "DELETE FROM audit_vault WHERE subject_id=?", (sid,))
        conn.executemany(
            "INSERT OR IGNORE INTO erased_subjects(source, source_ref, erased_at, request_ref) VALUES (?,?,?,'req-t')",
            [(s, r, NOW.isoformat()) for s, r in pairs],
        )
    if "session_files" not in skipped:
        for s in sessions:
            (store / "sessions" / f"{s}.json").unlink(missing_ok=True)
    if "blob_files" not in skipped:
        for path in (store / "blobs").rglob("*"):
            if path.name in blob_keys:
                path.unlink()
    if "corpus_files" not in skipped:
        _rewrite_corpora(store, set(pairs))
    if "subprocessor_calls" not in skipped:
        for _, url in processors:
            httpx.post(f"{url}/v1/deletions", json={"subject_ref": sid}, timeout=5).raise_for_status()
    if "checkpoint" not in skipped:
        checkpoint_truncate(conn)


def _derived(conn: apsw.Connection, subject: Subject, seeds: set[int]) -> list[int]:
    found: set[int] = set()
    for ident in subject.identifiers():
        phrase = '"' + " ".join("".join(c if c.isalnum() else " " for c in ident).split()) + '"'
        found |= set(
            _ids(
                conn,
                "SELECT f.frame_id FROM frames_fts t JOIN frames f ON f.frame_id = t.rowid"
                " WHERE frames_fts MATCH ? AND f.kind = 'derived'",
                (phrase,),
            )
        )
    frontier = seeds | found
    while frontier:
        refs = set(_ids(conn, f"SELECT frame_id FROM frame_refs WHERE ref_frame_id {IN}", (_in(frontier),)))
        frontier = refs - found
        found |= frontier
    return sorted(found)


def _rewrite_corpora(store: Path, pairs: set[tuple[str, str]]) -> None:
    for path in sorted((store / "corpora").rglob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [ln for ln in lines if (json.loads(ln)["source"], json.loads(ln)["source_ref"]) not in pairs]
        path.write_text("".join(kept), encoding="utf-8")


def delete_bystander_frame(built: Built) -> None:
    """An over-deleting erasure: one bystander summary frame goes too (with its FTS row and vector)."""
    conn = built.conn
    fid = _summary_of(conn, BYSTANDERS[1].id)[0]
    with transaction(conn):
        conn.execute("DELETE FROM frames_fts WHERE rowid=?", (fid,))
        conn.execute("DELETE FROM frame_vectors WHERE frame_id=?", (fid,))
        conn.execute("DELETE FROM kg_relations WHERE frame_id=?", (fid,))
        conn.execute("DELETE FROM frames WHERE frame_id=?", (fid,))
    checkpoint_truncate(conn)
