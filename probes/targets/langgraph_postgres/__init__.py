"""Probing kind `langgraph-postgres` (LangGraph `PostgresStore` + pgvector, `PostgresSaver`): own code,
read-only.

Logical probes over SQL, on a connection of its own (`probe_url`, or `url`) whose every transaction is
read-only (`default_transaction_read_only`): a read-only role is enough. The probe reads every row of
`store`, `store_vectors` and `checkpoints` itself and decides in Python whose each is (a namespace
label or key that IS the subject's id, after NFKC and case folding; a checkpoint whose metadata has a
top-level value that is their id): nothing comes from the erasing side.

Bytes: when the cluster's data directory (`data_dir`) is readable, `files()` returns it and
`probes.targets.run` scans every file of it (`base/` of every database, `global/`, `pg_wal/`,
`pg_xact/`, `pg_logical/`, `pg_replslot/`, ...) raw and through every decoded view. When it is not
(a managed service), `files()` is empty and `unscanned()` says so: "bytes not readable: managed
PostgreSQL" becomes an `unscanned_content` exception, never all clear by bytes. So does a WAL archive
or a streaming standby: files the probe cannot read that hold copies.

The server log (`.logs`): its readable files are scanned too, and a log that may hold the subject but
cannot be read is declared unscanned. Compressed WAL (`.wal`): with `wal_compression` on, the full-page
images in `pg_wal/` are written out decompressed by `pg_waldump --save-fullpage` and scanned
(`extracted`); without a pg_waldump that can, the WAL is declared. `pg_stat_statements`
(`.statements`), where installed: a statement text naming the subject is residue
(`pg_stat_statements-query-texts`), a view the probe cannot read is declared.

Known limit: PostgreSQL compresses values over about 2 kB (pglz or lz4, in line or in TOAST); no
decoded view reads those, so a dead compressed copy is invisible to the byte scan (the logical probes
see every live row, and VACUUM FULL leaves no dead one).

Fingerprint (before): identifier spellings (caseless), windows of the subject's items' and threads'
text, thread ids, the subject's vectors as float32 pieces (pgvector keeps a 4-byte header then the
float4 values), minus whatever also occurs in a bystander's record; bystander populations and content
digests (each other person's item with its vectors, each other thread with all its rows).
"""

from __future__ import annotations

import contextlib
import json
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import psycopg
from psycopg import sql

from erasure.errors import StoreError
from erasure.subject import Subject
from erasure.target_kinds.langgraph_postgres import SUBJECT_LABEL, PostgresTarget, postgres_target
from erasure.targets import Target
from erasure.tiers import Tier
from probes.identity import spellings
from probes.model import Measurement
from probes.needles import MIN_IDENTIFIER_BYTES, NeedleKind, NeedleSet, plain_windows, vector_pieces
from probes.others_text import naming
from probes.targets.langgraph_postgres import logs as pg_logs
from probes.targets.langgraph_postgres import statements as pg_statements
from probes.targets.langgraph_postgres import wal as pg_wal
from probes.targets.langgraph_sqlite.records import casefold, digest, naming_keys, unchanged
from probes.targets.probe import TargetFingerprint
from probes.views import Unscanned

KIND = "langgraph-postgres"
MAX_CONTENT_GROUPS = 400
MAX_NEAREST = 64
NEAR = 1e-4
MIN_THREAD_ID = 8
_PRINTABLE = re.compile(rb"[\x20-\x7e]{24,}")
NOT_READABLE = "bytes not readable: managed PostgreSQL (no readable data_dir)"


def _connect(cfg: PostgresTarget) -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(
            cfg.probe_url,
            autocommit=True,
            connect_timeout=15,
            application_name="erasure-probe",
            options="-c default_transaction_read_only=on",
        )
    except psycopg.OperationalError as exc:
        raise StoreError(
            f"langgraph-postgres probe: target {cfg.name!r}: cannot connect ({type(exc).__name__})"
        ) from exc


def _vector_bytes(text: str) -> bytes:
    """pgvector's text form `[0.1,-2e-05,...]` -> the float4 values as the cluster keeps them (LE)."""
    values = [float(x) for x in text.strip("[]").split(",") if x]
    return struct.pack(f"<{len(values)}f", *values)


@dataclass
class _View:
    subject_items: dict[tuple[str, str], Tier] = field(default_factory=dict)
    subject_text: list[str] = field(default_factory=list)
    subject_vectors: list[bytes] = field(default_factory=list)
    subject_vector_rows: int = 0
    subject_threads: set[str] = field(default_factory=set)
    other_items: int = 0
    other_vectors: list[bytes] = field(default_factory=list)
    other_threads: set[str] = field(default_factory=set)
    other_thread_rows: int = 0
    others: dict[str, list[str]] = field(default_factory=dict)
    """Bystanders' records (`item\\0prefix\\0key`, `thread\\0id`) -> digests of their rows."""
    other_text: list[str] = field(default_factory=list)
    other_item_text: list[str] = field(default_factory=list)
    """Bystanders' items as text, one each (their mentions of the subject are counted)."""
    unconfigured_items: int = 0


class _Owner:
    """Whose a namespace is (the probe's own reading of the configuration)."""

    def __init__(self, cfg: PostgresTarget, subject: Subject) -> None:
        self.want = casefold(subject.id)
        self.templates = [list(ns) for ns in cfg.namespaces]
        self.episodic = cfg.episodic

    def _template(self, parts: list[str]) -> list[str] | None:
        for t in self.templates:
            if len(parts) >= len(t) and all(
                (casefold(p) == self.want) if SUBJECT_LABEL in label else p == label
                for p, label in zip(parts, t, strict=False)
            ):
                return t
        return None

    def tier(self, prefix: str, key: str) -> Tier | None:
        parts = prefix.split(".")
        t = self._template(parts)
        own = next((i for i, p in enumerate(parts) if casefold(p) == self.want), None)
        if t is None and own is None:
            return Tier.semantic if casefold(key) == self.want else None
        end = len(t) if t is not None else (own or 0) + 1
        return Tier.episodic if len(parts) > end and parts[end] in self.episodic else Tier.semantic

    def configured(self, prefix: str) -> bool:
        return self._template(prefix.split(".")) is not None


def _tables(conn: psycopg.Connection[Any], schema: str) -> set[str]:
    return {
        str(r[0])
        for r in conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))
    }


def _read(cfg: PostgresTarget, subject: Subject) -> _View:
    view = _View()
    owner = _Owner(cfg, subject)
    conn = _connect(cfg)
    try:
        tables = _tables(conn, cfg.schema)
        t = {name: sql.Identifier(cfg.schema, name) for name in tables}
        if "store" in tables:
            query = sql.SQL("SELECT prefix, key, value::text FROM {}").format(t["store"])
            for prefix, key, text in conn.execute(query):
                tier = owner.tier(str(prefix), str(key))
                if tier is not None:
                    view.subject_items[(str(prefix), str(key))] = tier
                    view.subject_text.append(str(text))
                    view.unconfigured_items += not owner.configured(str(prefix))
                else:
                    view.other_items += 1
                    view.other_text.append(f"{prefix}\n{key}\n{text}")
                    view.other_item_text.append(json.dumps(json.loads(str(text)), ensure_ascii=False))
                    view.others.setdefault(f"item\x00{prefix}\x00{key}", []).append(
                        digest(f"store\x00{prefix}\x00{key}\x00{text}".encode())[:32]
                    )
        if "store_vectors" in tables:
            for prefix, key, field_name, emb in conn.execute(
                sql.SQL("SELECT prefix, key, field_name, embedding::text FROM {}").format(t["store_vectors"])
            ):
                blob = _vector_bytes(str(emb))
                if owner.tier(str(prefix), str(key)) is not None:
                    view.subject_vector_rows += 1
                    view.subject_vectors.append(blob)
                else:
                    view.other_vectors.append(blob)
                    view.others.setdefault(f"item\x00{prefix}\x00{key}", []).append(
                        digest(f"vec\x00{field_name}\x00".encode() + blob)[:32]
                    )
        if "checkpoints" in tables:
            rows: dict[str, list[str]] = {}
            texts: dict[str, list[str]] = {}
            for tid, meta, cp in conn.execute(
                sql.SQL("SELECT thread_id, metadata, checkpoint::text FROM {}").format(t["checkpoints"])
            ):
                tid = str(tid)
                if naming_keys(meta, owner.want):
                    view.subject_threads.add(tid)
                rows.setdefault(tid, []).append(digest(f"cp\x00{meta}\x00{cp}".encode())[:32])
                texts.setdefault(tid, []).append(str(cp))
            for table in ("checkpoint_blobs", "checkpoint_writes"):
                if table in tables:
                    for tid, blob in conn.execute(sql.SQL("SELECT thread_id, blob FROM {}").format(t[table])):
                        raw = bytes(blob) if blob is not None else b""
                        rows.setdefault(str(tid), []).append(digest(table.encode() + raw)[:32])
                        texts.setdefault(str(tid), []).extend(m.decode() for m in _PRINTABLE.findall(raw))
            for tid, digests in rows.items():
                if tid in view.subject_threads:
                    view.subject_text += texts.get(tid, [])
                else:
                    view.other_threads.add(tid)
                    view.other_thread_rows += len(digests)
                    view.others[f"thread\x00{tid}"] = digests
                    view.other_text += [tid, *texts.get(tid, [])]
        return view
    finally:
        conn.close()


def _compressed(cfg: PostgresTarget, view: _View) -> int:
    """How many of the subject's values PostgreSQL keeps compressed (`pg_column_compression`, 14+):
    items, checkpoints and their blobs and writes."""
    conn = _connect(cfg)
    try:
        tables = _tables(conn, cfg.schema)
        n = 0
        if "store" in tables and view.subject_items:
            row = conn.execute(
                sql.SQL(
                    "SELECT count(*) FROM {} WHERE (prefix, key) IN (SELECT * FROM unnest(%s::text[], %s::text[]))"
                    " AND pg_column_compression(value) IS NOT NULL"
                ).format(sql.Identifier(cfg.schema, "store")),
                ([p for p, _k in view.subject_items], [k for _p, k in view.subject_items]),
            ).fetchone()
            n += int(row[0]) if row else 0
        for table, column in (
            ("checkpoints", "checkpoint"),
            ("checkpoint_blobs", "blob"),
            ("checkpoint_writes", "blob"),
        ):
            if table in tables and view.subject_threads:
                row = conn.execute(
                    sql.SQL(
                        "SELECT count(*) FROM {} WHERE thread_id = ANY(%s) AND pg_column_compression({}) IS NOT NULL"
                    ).format(sql.Identifier(cfg.schema, table), sql.Identifier(column)),
                    (sorted(view.subject_threads),),
                ).fetchone()
                n += int(row[0]) if row else 0
        return n
    finally:
        conn.close()


def _nearest(cfg: PostgresTarget, vectors: list[bytes]) -> int:
    """How many of the subject's vectors still have a copy in `store_vectors` (cosine distance < NEAR)."""
    if not vectors:
        return 0
    conn = _connect(cfg)
    try:
        if "store_vectors" not in _tables(conn, cfg.schema):
            return 0
        n = 0
        for vec in vectors:
            values = struct.unpack(f"<{len(vec) // 4}f", vec)
            literal = "[" + ",".join(repr(v) for v in values) + "]"
            row = conn.execute(
                sql.SQL("SELECT min(embedding <=> %s::vector) FROM {} WHERE vector_dims(embedding) = %s").format(
                    sql.Identifier(cfg.schema, "store_vectors")
                ),
                (literal, len(values)),
            ).fetchone()
            if row is not None and row[0] is not None and float(row[0]) < NEAR:
                n += 1
        return n
    finally:
        conn.close()


def _statements(cfg: PostgresTarget, subject: Subject) -> list[tuple[str, Measurement]]:
    """Texts of `pg_stat_statements` that name the subject (where installed and readable; an unreadable
    view is declared by `unscanned`)."""
    conn = _connect(cfg)
    try:
        if not pg_statements.installed(conn):
            return []
        rows, _unread = pg_statements.texts(conn)
    finally:
        conn.close()
    words = [s for _k, s in spellings(subject, [subject.id]) if len(s.encode()) >= MIN_IDENTIFIER_BYTES]
    named = pg_statements.naming(rows, words)
    return [(Tier.semantic, Measurement("pg_stat_statements-query-texts", named, "statements", len(rows) - named))]


class LangGraphPostgresProbe:
    """The probing side of kind `langgraph-postgres` (see the module docstring)."""

    kind: ClassVar[str] = KIND

    def files(self, target: Target) -> list[Path]:
        """The data directory (when readable) and every readable folder of the server log."""
        return list(self.folders(target).values())

    def folders(self, target: Target) -> dict[str, Path]:
        """`files`, by role (`data_dir`, `log_directory`, `log_dir`): how residue names its folder."""
        cfg = postgres_target(target)
        out = {"data_dir": cfg.data_dir} if cfg.data_dir is not None and cfg.data_dir_readable() else {}
        conn = _connect(cfg)
        try:
            settings = pg_logs.read_settings(conn)
        finally:
            conn.close()
        return out | pg_logs.places(cfg, settings)[0]

    @contextlib.contextmanager
    def extracted(self, target: Target) -> Iterator[tuple[dict[str, Path], list[Unscanned]]]:
        """With `wal_compression` on and a readable data directory: every full-page image of `pg_wal/`
        decompressed by `pg_waldump --save-fullpage` into a temporary folder (`pg_wal_fullpages`), and
        the runs of WAL pages it could not read, declared (`probes.targets.langgraph_postgres.wal`)."""
        cfg = postgres_target(target)
        if cfg.data_dir is None or not cfg.data_dir_readable():
            yield {}, []
            return
        conn = _connect(cfg)
        try:
            method = pg_wal.compression(conn)
            exe = pg_wal.waldump(conn, cfg.pg_bindir) if method != "off" else None
        finally:
            conn.close()
        if exe is None:  # off, or declared by `unscanned`
            yield {}, []
            return
        with pg_wal.fullpages(cfg.data_dir, exe) as (pages, unread):
            gaps = [
                Unscanned(
                    sha256=digest(f"{target.name}\x00wal_fullpages".encode()),
                    size=0,
                    reason=f"{unread} run(s) of WAL pages pg_waldump could not read (wal_compression = {method}):"
                    " their compressed full-page images are unread",
                    target=target.name,
                )
            ] * bool(unread)
            yield {"pg_wal_fullpages": pages}, gaps

    def unscanned(self, target: Target, fp: TargetFingerprint | None = None) -> list[Unscanned]:
        """What holds the subject's bytes and cannot be read here: the data directory of a managed
        service, a WAL archive, streaming standbys, and the subject's values PostgreSQL stored
        compressed (`fp`: counted before the cascade) (each once, keyed by target and what)."""
        cfg = postgres_target(target)
        out: list[Unscanned] = []

        def add(what: str, reason: str) -> None:
            key = digest(f"{target.name}\x00{what}".encode())
            out.append(Unscanned(sha256=key, size=0, reason=reason, target=target.name))

        readable = cfg.data_dir is not None and cfg.data_dir_readable()
        if not readable:
            add("data_dir", NOT_READABLE)
        compressed = int(fp.state.get("compressed_values", 0)) if fp is not None else 0
        if compressed:
            add(
                "compressed",
                f"{compressed} of the subject's values were stored compressed by PostgreSQL (pglz/lz4): their"
                " bytes in base/ and pg_wal/ are not read by any view",
            )
        conn = _connect(cfg)
        try:
            row = conn.execute("SELECT current_setting('archive_mode')").fetchone()
            if row is not None and str(row[0]) != "off":
                add("wal_archive", "WAL archive not readable by the probe: archived segments hold the subject")
            row = conn.execute("SELECT count(*) FROM pg_stat_replication").fetchone()
            if row is not None and int(row[0]):
                add("standbys", f"{int(row[0])} streaming standby(s): their files are not read by this probe")
            method = pg_wal.compression(conn)
            if readable and method != "off" and pg_wal.waldump(conn, cfg.pg_bindir) is None:
                add(
                    "wal_compression",
                    f"WAL not read: wal_compression = {method} compresses the full-page images in pg_wal/, and no"
                    " pg_waldump of this server's version with --save-fullpage (PostgreSQL 16+) was found to"
                    " read them: turn wal_compression off, or let the segments written before it be recycled"
                    " (pg_switch_wal() + CHECKPOINT cycles until max_wal_size of WAL has passed), or give the"
                    " target a pg_bindir",
                )
            if pg_statements.installed(conn):
                unread = pg_statements.texts(conn)[1]
                if unread is not None:
                    add("pg_stat_statements", f"{unread}: utility statements keep their literals there")
            reason = pg_logs.unscanned_reason(cfg, pg_logs.read_settings(conn))
            if reason is not None:
                add("server_log", reason)
        finally:
            conn.close()
        return out

    def fingerprint(self, target: Target, subject: Subject) -> TargetFingerprint:
        cfg = postgres_target(target)
        view = _read(cfg, subject)
        other_low = "\n".join(view.other_text).lower()
        needles = NeedleSet()
        words = [s for _kind, s in spellings(subject, [subject.id]) if len(s.encode()) >= MIN_IDENTIFIER_BYTES]
        # Bystanders' items that name the subject by the rule, read as the views read the files
        # (`probes.others_text`): mentions, which the eraser reports and leaves; their finds are explained.
        named = naming(view.other_item_text, [("identifier", s) for s in words])
        read = {words[i] for found in named for i in found}
        mentioned: list[int] = []
        for s in words:
            if s.lower() in other_low and s not in read:
                needles.add_group(NeedleKind.shared_identifier, [s.encode()], caseless=True)
            elif needles.add_group(NeedleKind.identifier, [s.encode()], caseless=True) and s in read:
                mentioned.append(needles.needles[-1].group)
        windows: list[str] = []
        for text in view.subject_text:
            for w in plain_windows(text, limit=2):
                if w not in windows:
                    windows.append(w)
        windows = windows[:MAX_CONTENT_GROUPS] + [t for t in sorted(view.subject_threads) if len(t) >= MIN_THREAD_ID]
        for w in windows:
            if w.lower() in other_low:
                needles.bump("content_withheld_in_bystanders")
            else:
                needles.add_group(NeedleKind.content, [w.encode()])
        other_pieces = {v[i : i + 128] for v in view.other_vectors for i in range(0, len(v), 128)}
        kept: list[bytes] = []
        for vec in view.subject_vectors:
            pieces = [p for p in vector_pieces(vec) if p not in other_pieces]
            if needles.add_group(NeedleKind.vector, pieces):
                kept.append(vec)
        base = {
            "items": view.other_items,
            "vectors": len(view.other_vectors),
            "threads": len(view.other_threads),
            "checkpoint-rows": view.other_thread_rows,
            "items-unchanged": unchanged(view.others, view.others, "item", "\x00")[0],
            "threads-unchanged": unchanged(view.others, view.others, "thread", "\x00")[0],
        }
        subject_before = {
            "items-under-namespace": len(view.subject_items),
            "vectors-under-namespace": view.subject_vector_rows,
            "threads-by-metadata": len(view.subject_threads),
        }
        state = {
            "threads": sorted(view.subject_threads),
            "items": [[p, k] for (p, k) in sorted(view.subject_items)],
            "vector_digests": sorted({digest(v) for v in kept}),
            "nearest": [v.hex() for v in kept[:MAX_NEAREST]],
            "needle_stats": needles.stats,
            "compressed_values": _compressed(cfg, view),
            "bystander_digests": view.others,
        }
        return TargetFingerprint(
            target=target.name,
            needles=needles.needles,
            bystanders=base,
            subject_before=subject_before,
            mentions=sum(1 for found in named if found),
            mentioned_groups=mentioned,
            state=state,
        )

    def measure(self, target: Target, subject: Subject, fp: TargetFingerprint) -> list[tuple[str, Measurement]]:
        cfg = postgres_target(target)
        view = _read(cfg, subject)
        baseline = {str(k): [str(d) for d in v] for k, v in fp.state.get("bystander_digests", {}).items()}
        gone_threads = set(fp.state.get("threads", []))
        gone_items = {(str(p), str(k)) for p, k in fp.state.get("items", [])}
        left_threads = len(gone_threads & (view.subject_threads | view.other_threads))
        left_items = len(
            gone_items & {(k.split("\x00")[1], k.split("\x00")[2]) for k in view.others if k.startswith("item\x00")}
            | (gone_items & set(view.subject_items))
        )
        digests = set(fp.state.get("vector_digests", []))
        by_bytes = sum(1 for v in [*view.subject_vectors, *view.other_vectors] if digest(v) in digests)
        near = _nearest(cfg, [bytes.fromhex(h) for h in fp.state.get("nearest", [])])
        episodic = sum(1 for t in view.subject_items.values() if t is Tier.episodic)
        nv = len(view.other_vectors)
        return [
            *_statements(cfg, subject),
            *[
                (
                    Tier.working,
                    Measurement("threads-by-metadata", len(view.subject_threads), "threads", len(view.other_threads)),
                ),
                (Tier.working, Measurement("threads-by-id", left_threads, "checkpoint-rows", view.other_thread_rows)),
                (
                    Tier.working,
                    Measurement(
                        "threads-content-digests",
                        0,
                        "threads-unchanged",
                        unchanged(baseline, view.others, "thread", "\x00")[1],
                    ),
                ),
                (Tier.episodic, Measurement("items-under-namespace", episodic, "items", view.other_items)),
                (
                    Tier.semantic,
                    Measurement("items-under-namespace", len(view.subject_items) - episodic, "items", view.other_items),
                ),
                (Tier.semantic, Measurement("items-by-key", left_items, "items", view.other_items)),
                (
                    Tier.semantic,
                    Measurement("items-under-unconfigured-layouts", view.unconfigured_items, "items", view.other_items),
                ),
                (
                    Tier.semantic,
                    Measurement(
                        "items-content-digests",
                        0,
                        "items-unchanged",
                        unchanged(baseline, view.others, "item", "\x00")[1],
                    ),
                ),
                (Tier.vectors, Measurement("vectors-under-namespace", view.subject_vector_rows, "vectors", nv)),
                (Tier.vectors, Measurement("vectors-by-bytes", by_bytes, "vectors", nv)),
                (Tier.vectors, Measurement("vectors-nearest-neighbour", near, "vectors", nv)),
            ],
        ]


PROBE = LangGraphPostgresProbe()
