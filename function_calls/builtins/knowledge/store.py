"""The knowledge tables in the bot's database, and the keyword search over them.

Every function here is synchronous and takes the plugin's database view (`plugin.database(host)`,
function_calls/plugin_data.py), as a third-party plugin's would: the service runs each one
through its `run` (one thread hop, off the event loop), and every statement is SQLAlchemy Core on
the tables declared below, checked by that view; the plugin never holds the bot's `Storage` or
engine. Its schema is made the way every plugin's is (`TABLES`, function_calls/tables.py): the
runtime creates what is missing when the bot is built (idempotent, on SQLite and PostgreSQL
alike) and the version is kept in `kb_meta` as well, so a later version knows what it upgrades
from.

- `kb_documents`: one row per source document (a file, a URL, a text added with `/kb add`)
  with its content hash; `kb_chunks`: its passages with their headings.
- Keyword index: on SQLite an FTS5 table (`kb_fts`, BM25 ranking, porter stemming) in the same
  file, no service, declared as a `Table` with the columns the queries use (`MATCH` is
  `.op("MATCH")`, `bm25` a `func`) and made through the view's typed `create_virtual`; on
  PostgreSQL a generated `tsvector` column with a GIN index, ranked with
  `ts_rank_cd` (PostgreSQL has no BM25; the terms are the same, text.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    literal,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.sql.expression import ColumnClause, Select

from function_calls import Fts5, Fts5Vocab, PluginConnection, PluginDatabase, Tables
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

# Declared tables the runtime does not create from a `MetaData` (SQLite virtual tables), with
# the columns the statements below use; `kb_fts` is also FTS5's hidden column of the table's
# own name (`kb_fts MATCH ...`, `bm25(kb_fts)`). Made by `_keyword_index` and `_selective`.
virtual = MetaData()
kb_fts = Table(
    "kb_fts",
    virtual,
    Column("rowid", Integer),
    Column("body", Text),
    Column("base", String(32)),
    Column("kb_fts", Text),
    Column("rank", Float),
)
# How many passages hold each (stemmed) term: what `_selective` reads.
kb_fts_vocab = Table(
    "kb_fts_vocab", virtual, Column("term", Text), Column("doc", Integer), Column("cnt", Integer)
)
# Per connection (`temp`): a query's words, and the stems FTS5's tokenizer makes of them.
kb_query = Table("kb_query", virtual, Column("rowid", Integer), Column("w", Text), schema="temp")
kb_query_terms = Table(
    "kb_query_terms",
    virtual,
    Column("term", Text),
    Column("doc", Integer),
    Column("col", Text),
    Column("offset", Integer),
    schema="temp",
)
FTS = Fts5(("body", "base"), unindexed=("base",), tokenize=TOKENIZE)
QUERY_FTS = Fts5(("w",), tokenize=TOKENIZE)
QUERY_VOCAB = Fts5Vocab(kb_query, "instance")


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


def _keyword_index(conn: Connection) -> None:
    """What the tables' `MetaData` cannot say (the plugin's `after` schema step, run by the
    runtime): the keyword index, FTS5 on SQLite (through the view's typed door, as at run
    time), a generated `tsvector` column with a GIN index on PostgreSQL; and the version in
    `kb_meta`."""
    own = PluginConnection(conn, "knowledge", TABLES.names())
    if conn.dialect.name == "sqlite":
        own.create_virtual(kb_fts, FTS)
        own.create_virtual(kb_fts_vocab, Fts5Vocab(kb_fts, "row"))
    elif conn.dialect.name == "postgresql":
        # Schema DDL Core has no construct for (a generated column added to a table that
        # exists): part of the schema step, as a migration is, never of a search.
        conn.execute(
            text(
                "ALTER TABLE kb_chunks ADD COLUMN IF NOT EXISTS tsv tsvector GENERATED "
                "ALWAYS AS (to_tsvector('english', coalesce(search_text, ''))) STORED"
            )
        )
        conn.execute(
            text("CREATE INDEX IF NOT EXISTS ix_kb_chunks_tsv ON kb_chunks USING gin (tsv)")
        )
    _set_meta(own, "schema", SCHEMA_VERSION)


def tables(
    vector_tables: Sequence[Table] = (), also: Callable[[Connection], None] | None = None
) -> Tables:
    """The plugin's tables (its `Plugin(tables=...)`, when it has bases), created and migrated
    by the runtime as every plugin's are; `vector_tables`: the per-base vector tables of this
    configuration (vectors.py), declared so that the plugin may make and use them; `also`: a
    further schema step (vectors.pgvector_step)."""

    def after(conn: Connection) -> None:
        _keyword_index(conn)
        if also is not None:
            also(conn)

    return Tables(
        metadata,
        version=int(SCHEMA_VERSION),
        after=after,
        on_demand=(kb_fts, kb_fts_vocab, kb_query, kb_query_terms, *vector_tables),
    )


#: The tables without any base's vectors (the schema step's view, tests).
TABLES = tables()


def _set_meta(conn: PluginConnection, key: str, value: str) -> None:
    done = conn.execute(update(kb_meta).where(kb_meta.c.key == key).values(value=value))
    if done.rowcount == 0:
        conn.execute(insert(kb_meta).values(key=key, value=value))


def set_meta_in(conn: Connection, key: str, value: str) -> None:
    """`set_meta` in a schema step (the runtime's transaction)."""
    _set_meta(PluginConnection(conn, "knowledge", frozenset({kb_meta.name})), key, value)


def get_meta(db: PluginDatabase, key: str) -> str | None:
    with db.connect() as conn:
        return conn.execute(select(kb_meta.c.value).where(kb_meta.c.key == key)).scalar()


def set_meta(db: PluginDatabase, key: str, value: str) -> None:
    with db.begin() as conn:
        _set_meta(conn, key, value)


def forget_meta(db: PluginDatabase, key: str) -> None:
    with db.begin() as conn:
        conn.execute(delete(kb_meta).where(kb_meta.c.key == key))


def documents(db: PluginDatabase, bases: Sequence[str] | None = None) -> list[Document]:
    stmt = select(kb_documents).order_by(_D.base, _D.id)
    if bases is not None:
        stmt = stmt.where(_D.base.in_(list(bases)))
    with db.connect() as conn:
        return [Document(**row._mapping) for row in conn.execute(stmt)]


def touch(db: PluginDatabase, doc_id: int, size: int, mtime: float) -> None:
    """A file whose mtime moved but whose content did not: remember the new stat."""
    with db.begin() as conn:
        conn.execute(update(kb_documents).where(_D.id == doc_id).values(size=size, mtime=mtime))


def _delete_chunks(conn: PluginConnection, doc_id: int) -> list[int]:
    ids = list(conn.execute(select(_C.id).where(_C.doc_id == doc_id)).scalars())
    if ids and conn.dialect.name == "sqlite":
        conn.execute(
            delete(kb_fts).where(kb_fts.c.rowid == bindparam("id")), [{"id": i} for i in ids]
        )
    conn.execute(delete(kb_chunks).where(_C.doc_id == doc_id))
    return ids


def delete_document(db: PluginDatabase, doc_id: int) -> list[int]:
    """Remove a document and its passages; returns the passages' ids (for their vectors)."""
    with db.begin() as conn:
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
    db: PluginDatabase, doc: NewDocument, passages: Sequence[tuple[str, str]]
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
    with db.begin() as conn:
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
    conn: PluginConnection, doc_id: int, base: str, passages: Sequence[tuple[str, str]]
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
            insert(kb_fts),
            [
                {"rowid": i, "body": index_text(f"{h}\n{b}"), "base": base}
                for i, (h, b) in zip(ids, passages, strict=True)
            ],
        )
    return ids


def mark_vectors(db: PluginDatabase, doc_id: int) -> None:
    with db.begin() as conn:
        conn.execute(update(kb_documents).where(_D.id == doc_id).values(vectors_ok=True))


def chunk_texts(db: PluginDatabase, doc_id: int) -> list[tuple[int, str, str]]:
    """(id, heading, text) of a document's passages, in order (to embed them again)."""
    with db.connect() as conn:
        rows = conn.execute(
            select(_C.id, _C.heading, _C.text).where(_C.doc_id == doc_id).order_by(_C.position)
        )
        return [(r.id, r.heading, r.text) for r in rows]


def chunk_ids(db: PluginDatabase, base: str) -> list[int]:
    with db.connect() as conn:
        return list(conn.execute(select(_C.id).where(_C.base == base)).scalars())


_PASSAGE_COLUMNS = (_C.id, _C.base, _D.source, _D.kind, _C.heading, _C.text)
_WITH_DOCUMENT = kb_chunks.join(kb_documents, _D.id == _C.doc_id)


# The SQLite search and the common-term cut's statements, built once (the view checks each
# once, and SQLAlchemy keeps their compiled form): a search runs a dozen.
_FTS_SEARCH = (
    select(*_PASSAGE_COLUMNS, (-func.bm25(kb_fts.c.kb_fts)).label("score"))
    .select_from(
        kb_fts.join(kb_chunks, _C.id == kb_fts.c.rowid).join(kb_documents, _D.id == _C.doc_id)
    )
    .where(
        kb_fts.c.kb_fts.op("MATCH")(bindparam("match")),
        kb_fts.c.base.in_(bindparam("bases", expanding=True)),
    )
    .order_by(kb_fts.c.rank)
    .limit(bindparam("k", type_=Integer))
)
_PASSAGES = select(func.count()).select_from(kb_chunks)
_QUERY_CLEAR = delete(kb_query)
_QUERY_ADD = insert(kb_query)
_QUERY_STEMS = select(kb_query_terms.c.term, kb_query_terms.c.doc)
_HELD_BY = select(kb_fts_vocab.c.doc).where(kb_fts_vocab.c.term == bindparam("t"))


def keyword_search(db: PluginDatabase, query: str, bases: Sequence[str], k: int) -> list[Passage]:
    """The `k` best passages of `bases` for `query` by BM25 (SQLite) or ts_rank_cd."""
    if not bases:
        return []
    with db.connect() as conn:
        if conn.dialect.name == "sqlite":
            match = fts5_query(_selective(conn, query_terms(query)))
            if match is None:
                return []
            rows = conn.execute(_FTS_SEARCH, {"match": match, "bases": list(bases), "k": k})
        else:
            q = tsquery(query)
            if q is None:
                return []
            rows = conn.execute(_postgres_search(q, bases, k))
        return [Passage(r[0], r[1], r[2], r[3], r[4], r[5], float(r[6])) for r in rows]


def _postgres_search(q: str, bases: Sequence[str], k: int) -> Select[Any]:
    """`keyword_search` on PostgreSQL: `tsv @@ to_tsquery('english', q)` ranked by
    ts_rank_cd. `tsv` is the generated column `_keyword_index` adds, not in the metadata
    (SQLite's kb_chunks has none); the PostgreSQL types are imported here, only there."""
    from sqlalchemy.dialects.postgresql import REGCONFIG, TSVECTOR

    tsv: ColumnClause[Any] = ColumnClause("tsv", TSVECTOR, _selectable=kb_chunks)
    found = func.to_tsquery(literal("english", REGCONFIG), q)
    score = func.ts_rank_cd(tsv, found).label("score")
    return (
        select(*_PASSAGE_COLUMNS, score)
        .select_from(_WITH_DOCUMENT)
        .where(tsv.op("@@")(found), _C.base.in_(list(bases)))
        .order_by(score.desc(), _C.id)
        .limit(k)
    )


def _selective(conn: PluginConnection, terms: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """`terms` without those held by more than COMMON of the passages, when a rarer one is
    left. A term's stem (what the index holds) comes from FTS5's own tokenizer, run over the
    terms in a per-connection temporary table, so Python never has to stem like porter."""
    words = [t for t, prefix in terms if not prefix]
    if len(words) < 2:
        return terms
    total = conn.execute(_PASSAGES).scalar_one()
    if total < COMMON_FROM:
        return terms
    conn.create_virtual(kb_query, QUERY_FTS)
    conn.create_virtual(kb_query_terms, QUERY_VOCAB)
    conn.execute(_QUERY_CLEAR)
    conn.execute(_QUERY_ADD, [{"rowid": i, "w": w} for i, w in enumerate(words)])
    stems: dict[int, list[str]] = {}
    for term, doc in conn.execute(_QUERY_STEMS):
        stems.setdefault(int(doc), []).append(term)
    conn.execute(_QUERY_CLEAR)
    held: dict[str, int] = {}
    for i, w in enumerate(words):
        counts = [conn.execute(_HELD_BY, {"t": t}).scalar() or 0 for t in stems.get(i, [])]
        held[w] = max(counts, default=0)
    rare = [(t, p) for t, p in terms if p or held.get(t, 0) <= COMMON * total]
    # Only a rare term the index holds may stand for the common ones: a question's words that
    # occur nowhere (`会在`, `在哪`) are rare too, and left alone they find nothing.
    return rare if any(not p and held.get(t, 0) > 0 for t, p in rare) else terms


def passages_by_id(db: PluginDatabase, ids: Sequence[int]) -> dict[int, Passage]:
    if not ids:
        return {}
    stmt = select(*_PASSAGE_COLUMNS).select_from(_WITH_DOCUMENT).where(_C.id.in_(list(ids)))
    with db.connect() as conn:
        return {r[0]: Passage(r[0], r[1], r[2], r[3], r[4], r[5], 0.0) for r in conn.execute(stmt)}


def counts(db: PluginDatabase) -> dict[str, tuple[int, int]]:
    """(documents, passages) per base."""
    with db.connect() as conn:
        rows = conn.execute(
            select(_D.base, func.count(), func.coalesce(func.sum(_D.chunks), 0)).group_by(_D.base)
        )
        return {r[0]: (int(r[1]), int(r[2])) for r in rows}
