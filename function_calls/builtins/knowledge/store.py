"""The knowledge tables in the bot's database, and the keyword search over them.

Every function here is synchronous and takes the engine: the service runs each one through
`Storage.run` (one thread hop, off the event loop). The plugin owns its schema the way a
third-party plugin has to: `ensure_schema` creates what is missing at start (idempotent, on
SQLite and PostgreSQL alike) and records its version in `kb_meta`, so a later version knows
what it upgrades from.

- `kb_documents`: one row per source document (a file, a URL, a text added with `/kb add`)
  with its content hash; `kb_chunks`: its passages with their headings.
- Keyword index: on SQLite an FTS5 table (`kb_fts`, BM25 ranking, porter stemming) in the same
  file, no service; on PostgreSQL a generated `tsvector` column with a GIN index, ranked with
  `ts_rank_cd` (PostgreSQL has no BM25; the terms are the same, text.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    bindparam,
    delete,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, Engine

from function_calls import Tables, create_missing
from function_calls.builtins.knowledge.text import fts5_query, index_text, query_terms, tsquery

SCHEMA_VERSION = "1"
TOKENIZE = "porter unicode61 remove_diacritics 2"
# A query term held by more than this share of the passages is left out of the search when a
# rarer one is there: its BM25 weight (IDF) is small, and every passage it matches has to be
# scored, which is where the time of a search over megabytes goes (bench/README.md).
COMMON = 0.2
# ... in a base of at least this many passages: below it every passage is scored in well under
# a millisecond anyway, and a small base's terms are all "common" (a word in one passage of
# three): cutting them only loses the ranking they give.
COMMON_FROM = 1000
metadata = MetaData()

kb_meta = Table(
    "kb_meta",
    metadata,
    Column("key", String(128), primary_key=True),
    Column("value", Text, nullable=False),
)
kb_documents = Table(
    "kb_documents",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("base", String(32), nullable=False),
    # A file's path as configured (relative to the config file), a URL, or "added:<id>".
    Column("source", String(1024), nullable=False),
    Column("kind", String(8), nullable=False),  # file | url | added
    Column("title", String(256), nullable=False, default=""),
    Column("content_hash", String(64), nullable=False),
    Column("size", Integer, nullable=False, default=0),
    Column("mtime", Float, nullable=False, default=0.0),
    Column("chunks", Integer, nullable=False, default=0),
    # Whether the passages' vectors are written (bases with an embedding model).
    Column("vectors_ok", Boolean, nullable=False, default=False),
    Column("added_by", String(128), nullable=False, default=""),
    Column("indexed_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("base", "source", name="uq_kb_documents_base_source"),
)
kb_chunks = Table(
    "kb_chunks",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("doc_id", Integer, ForeignKey("kb_documents.id", ondelete="CASCADE"), nullable=False),
    Column("base", String(32), nullable=False, index=True),
    Column("position", Integer, nullable=False),
    Column("heading", String(512), nullable=False, default=""),
    Column("text", Text, nullable=False),
    # PostgreSQL only: the words the `tsv` column is generated from (SQLite keeps them in FTS5).
    Column("search_text", Text, nullable=True),
)
_D = kb_documents.c
_C = kb_chunks.c


@dataclass(frozen=True, slots=True)
class Document:
    id: int
    base: str
    source: str
    kind: str
    title: str
    content_hash: str
    size: int
    mtime: float
    chunks: int
    vectors_ok: bool
    added_by: str
    indexed_at: datetime


@dataclass(frozen=True, slots=True)
class Passage:
    """One passage found: what the model reads and what its citation names."""

    chunk_id: int
    base: str
    source: str
    kind: str
    heading: str
    text: str
    score: float

    @property
    def citation(self) -> str:
        return f"{self.source} § {self.heading}" if self.heading else self.source


def ensure_schema(engine: Engine) -> None:
    """Create the knowledge tables and the keyword index if they are missing, as the runtime
    does for the plugin's declared `TABLES` (function_calls/tables.py: several processes
    starting at once may race; a loser that sees "already exists" looks again)."""
    TABLES.ensure(engine, "knowledge")


def _create(engine: Engine) -> None:
    with engine.begin() as conn:
        create_missing(conn, metadata)
        _keyword_index(conn)


def _keyword_index(conn: Connection) -> None:
    """What the tables' `MetaData` cannot say: the keyword index, FTS5 on SQLite, a generated
    `tsvector` column with a GIN index on PostgreSQL; and the version in `kb_meta`."""
    if conn.dialect.name == "sqlite":
        conn.execute(
            text(
                "CREATE VIRTUAL TABLE IF NOT EXISTS kb_fts USING fts5(body, base UNINDEXED, "
                f"tokenize = '{TOKENIZE}')"
            )
        )
        # How many passages hold each (stemmed) term: what `_selective` reads.
        conn.execute(
            text("CREATE VIRTUAL TABLE IF NOT EXISTS kb_fts_vocab USING fts5vocab(kb_fts, row)")
        )
    elif conn.dialect.name == "postgresql":
        conn.execute(
            text(
                "ALTER TABLE kb_chunks ADD COLUMN IF NOT EXISTS tsv tsvector GENERATED "
                "ALWAYS AS (to_tsvector('english', coalesce(search_text, ''))) STORED"
            )
        )
        conn.execute(
            text("CREATE INDEX IF NOT EXISTS ix_kb_chunks_tsv ON kb_chunks USING gin (tsv)")
        )
    _set_meta(conn, "schema", SCHEMA_VERSION)


#: The plugin's tables (its `Plugin(tables=...)`, when it has bases): created and migrated by
#: the runtime as every plugin's are.
TABLES = Tables(metadata, version=int(SCHEMA_VERSION), after=_keyword_index)


def _set_meta(conn: Connection, key: str, value: str) -> None:
    done = conn.execute(update(kb_meta).where(kb_meta.c.key == key).values(value=value))
    if done.rowcount == 0:
        conn.execute(insert(kb_meta).values(key=key, value=value))


def get_meta(engine: Engine, key: str) -> str | None:
    with engine.connect() as conn:
        return conn.execute(select(kb_meta.c.value).where(kb_meta.c.key == key)).scalar()


def set_meta(engine: Engine, key: str, value: str) -> None:
    with engine.begin() as conn:
        _set_meta(conn, key, value)


def documents(engine: Engine, bases: Sequence[str] | None = None) -> list[Document]:
    stmt = select(kb_documents).order_by(_D.base, _D.id)
    if bases is not None:
        stmt = stmt.where(_D.base.in_(list(bases)))
    with engine.connect() as conn:
        return [Document(**row._mapping) for row in conn.execute(stmt)]


def touch(engine: Engine, doc_id: int, size: int, mtime: float) -> None:
    """A file whose mtime moved but whose content did not: remember the new stat."""
    with engine.begin() as conn:
        conn.execute(update(kb_documents).where(_D.id == doc_id).values(size=size, mtime=mtime))


def _delete_chunks(conn: Connection, doc_id: int) -> list[int]:
    ids = list(conn.execute(select(_C.id).where(_C.doc_id == doc_id)).scalars())
    if ids and conn.dialect.name == "sqlite":
        conn.execute(text("DELETE FROM kb_fts WHERE rowid = :id"), [{"id": i} for i in ids])
    conn.execute(delete(kb_chunks).where(_C.doc_id == doc_id))
    return ids


def delete_document(engine: Engine, doc_id: int) -> list[int]:
    """Remove a document and its passages; returns the passages' ids (for their vectors)."""
    with engine.begin() as conn:
        ids = _delete_chunks(conn, doc_id)
        conn.execute(delete(kb_documents).where(_D.id == doc_id))
    return ids


@dataclass(frozen=True, slots=True)
class NewDocument:
    base: str
    source: str
    kind: str
    title: str
    content_hash: str
    size: int
    mtime: float
    added_by: str = ""


def replace_document(
    engine: Engine, doc: NewDocument, passages: Sequence[tuple[str, str]]
) -> tuple[int, list[int], list[int]]:
    """Write `doc` with its (heading, text) passages in one transaction, replacing the
    document of the same base and source. Returns (document id, new passage ids, the old
    passages' ids)."""
    now = datetime.now(UTC)
    values: dict[str, Any] = {
        "title": doc.title[:256],
        "kind": doc.kind,
        "content_hash": doc.content_hash,
        "size": doc.size,
        "mtime": doc.mtime,
        "chunks": len(passages),
        "vectors_ok": False,
        "added_by": doc.added_by,
        "indexed_at": now,
    }
    with engine.begin() as conn:
        found = conn.execute(
            select(_D.id).where(_D.base == doc.base, _D.source == doc.source)
        ).scalar()
        if found is None:
            key = conn.execute(
                insert(kb_documents).values(base=doc.base, source=doc.source, **values)
            ).inserted_primary_key
            assert key is not None  # a single-row INSERT's result has it
            doc_id = int(key[0])
            old: list[int] = []
        else:
            doc_id = int(found)
            old = _delete_chunks(conn, doc_id)
            conn.execute(update(kb_documents).where(_D.id == doc_id).values(**values))
        ids = _insert_chunks(conn, doc_id, doc.base, passages)
    return doc_id, ids, old


def _insert_chunks(
    conn: Connection, doc_id: int, base: str, passages: Sequence[tuple[str, str]]
) -> list[int]:
    sqlite = conn.dialect.name == "sqlite"
    rows = [
        {
            "doc_id": doc_id,
            "base": base,
            "position": i,
            "heading": heading[:512],
            "text": body,
            "search_text": None if sqlite else index_text(f"{heading}\n{body}"),
        }
        for i, (heading, body) in enumerate(passages)
    ]
    if not rows:
        return []
    conn.execute(insert(kb_chunks), rows)
    ids = list(
        conn.execute(select(_C.id).where(_C.doc_id == doc_id).order_by(_C.position)).scalars()
    )
    if sqlite:
        conn.execute(
            text("INSERT INTO kb_fts(rowid, body, base) VALUES (:id, :body, :base)"),
            [
                {"id": i, "body": index_text(f"{h}\n{b}"), "base": base}
                for i, (h, b) in zip(ids, passages, strict=True)
            ],
        )
    return ids


def mark_vectors(engine: Engine, doc_id: int) -> None:
    with engine.begin() as conn:
        conn.execute(update(kb_documents).where(_D.id == doc_id).values(vectors_ok=True))


def chunk_texts(engine: Engine, doc_id: int) -> list[tuple[int, str, str]]:
    """(id, heading, text) of a document's passages, in order (to embed them again)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(_C.id, _C.heading, _C.text).where(_C.doc_id == doc_id).order_by(_C.position)
        )
        return [(r.id, r.heading, r.text) for r in rows]


def chunk_ids(engine: Engine, base: str) -> list[int]:
    with engine.connect() as conn:
        return list(conn.execute(select(_C.id).where(_C.base == base)).scalars())


_PASSAGE_COLUMNS = "c.id, c.base, d.source, d.kind, c.heading, c.text"


def keyword_search(engine: Engine, query: str, bases: Sequence[str], k: int) -> list[Passage]:
    """The `k` best passages of `bases` for `query` by BM25 (SQLite) or ts_rank_cd."""
    if not bases:
        return []
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            match = fts5_query(_selective(conn, query_terms(query)))
            if match is None:
                return []
            stmt = text(
                f"SELECT {_PASSAGE_COLUMNS}, -bm25(kb_fts) AS score FROM kb_fts "
                "JOIN kb_chunks c ON c.id = kb_fts.rowid JOIN kb_documents d ON d.id = c.doc_id "
                "WHERE kb_fts MATCH :match AND kb_fts.base IN :bases ORDER BY rank LIMIT :k"
            ).bindparams(bindparam("bases", expanding=True))
            rows = conn.execute(stmt, {"match": match, "bases": list(bases), "k": k})
        else:
            q = tsquery(query)
            if q is None:
                return []
            stmt = text(
                f"SELECT {_PASSAGE_COLUMNS}, ts_rank_cd(c.tsv, q) AS score "
                "FROM kb_chunks c JOIN kb_documents d ON d.id = c.doc_id, "
                "to_tsquery('english', :q) q WHERE c.tsv @@ q AND c.base IN :bases "
                "ORDER BY score DESC, c.id LIMIT :k"
            ).bindparams(bindparam("bases", expanding=True))
            rows = conn.execute(stmt, {"q": q, "bases": list(bases), "k": k})
        return [Passage(r[0], r[1], r[2], r[3], r[4], r[5], float(r[6])) for r in rows]


def _selective(conn: Connection, terms: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """`terms` without those held by more than COMMON of the passages, when a rarer one is
    left. A term's stem (what the index holds) comes from FTS5's own tokenizer, run over the
    terms in a per-connection temporary table, so Python never has to stem like porter."""
    words = [t for t, prefix in terms if not prefix]
    if len(words) < 2:
        return terms
    total = conn.execute(select(func.count()).select_from(kb_chunks)).scalar_one()
    if total < COMMON_FROM:
        return terms
    conn.execute(
        text(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.kb_query USING fts5(w, tokenize='{TOKENIZE}')"
        )
    )
    conn.execute(
        text(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.kb_query_terms "
            "USING fts5vocab(temp, kb_query, instance)"
        )
    )
    conn.execute(text("DELETE FROM temp.kb_query"))
    conn.execute(
        text("INSERT INTO temp.kb_query(rowid, w) VALUES (:i, :w)"),
        [{"i": i, "w": w} for i, w in enumerate(words)],
    )
    stems: dict[int, list[str]] = {}
    for term, doc in conn.execute(text("SELECT term, doc FROM temp.kb_query_terms")):
        stems.setdefault(int(doc), []).append(term)
    conn.execute(text("DELETE FROM temp.kb_query"))
    held: dict[str, int] = {}
    for i, w in enumerate(words):
        counts = [
            conn.execute(text("SELECT doc FROM kb_fts_vocab WHERE term = :t"), {"t": t}).scalar()
            or 0
            for t in stems.get(i, [])
        ]
        held[w] = max(counts, default=0)
    rare = [(t, p) for t, p in terms if p or held.get(t, 0) <= COMMON * total]
    # Only a rare term the index holds may stand for the common ones: a question's words that
    # occur nowhere (`会在`, `在哪`) are rare too, and left alone they find nothing.
    return rare if any(not p and held.get(t, 0) > 0 for t, p in rare) else terms


def passages_by_id(engine: Engine, ids: Sequence[int]) -> dict[int, Passage]:
    if not ids:
        return {}
    stmt = text(
        f"SELECT {_PASSAGE_COLUMNS} FROM kb_chunks c JOIN kb_documents d ON d.id = c.doc_id "
        "WHERE c.id IN :ids"
    ).bindparams(bindparam("ids", expanding=True))
    with engine.connect() as conn:
        return {
            r[0]: Passage(r[0], r[1], r[2], r[3], r[4], r[5], 0.0)
            for r in conn.execute(stmt, {"ids": list(ids)})
        }


def counts(engine: Engine) -> dict[str, tuple[int, int]]:
    """(documents, passages) per base."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(_D.base, func.count(), func.coalesce(func.sum(_D.chunks), 0)).group_by(_D.base)
        )
        return {r[0]: (int(r[1]), int(r[2])) for r in rows}
