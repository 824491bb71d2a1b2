"""Where passage vectors live, and the nearest ones to a query's.

Three backends behind one interface, chosen from the database and `knowledge.vector_backend`
(`auto` by default), so moving a bot from SQLite to PostgreSQL changes no code:

- `sqlite-vec`: a `vec0` virtual table per base in the bot's SQLite file (cosine distance,
  exact KNN in C). Python's own `sqlite3` can load it only where it was built with extension
  loading; where not (this project's CI Python, for one) the same file is opened through
  `pysqlite3` (the `knowledge` extra), a second connection beside the bot's.
- `pgvector`: a `vector(dim)` column with an HNSW cosine index, when `CREATE EXTENSION
  vector` succeeds on the bot's PostgreSQL.
- `table`: the fallback anywhere: float32 vectors in a plain table (`kb_vectors`), the cosine
  computed in Python (NumPy when installed), the matrix of a base kept in memory until the
  base changes (`kb_meta` holds a version per base, so another process's writes are seen).

Every method is synchronous (called through `Storage.run`).
"""

from __future__ import annotations

import array
import math
import re
import sqlite3
from collections.abc import Sequence
from typing import Any, Protocol

from loguru import logger
from sqlalchemy import (
    Column,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    bindparam,
    create_engine,
    delete,
    event,
    insert,
    select,
    text,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from function_calls import ConfigError, create_missing
from function_calls.builtins.knowledge.store import get_meta, set_meta

Hit = tuple[int, float]  # (passage id, cosine similarity)

vector_metadata = MetaData()
kb_vectors = Table(
    "kb_vectors",
    vector_metadata,
    Column("chunk_id", Integer, primary_key=True),
    Column("base", String(32), nullable=False, index=True),
    Column("vector", LargeBinary, nullable=False),  # float32, little-endian
)
_SAFE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


def pack(vector: Sequence[float]) -> bytes:
    return array.array("f", vector).tobytes()


def unpack(blob: bytes) -> list[float]:
    return array.array("f", blob).tolist()


def _table_name(prefix: str, base: str) -> str:
    if not _SAFE.match(base):  # settings validate base names; never trust them in SQL anyway
        raise ValueError(f"bad base name {base!r}")
    return f"{prefix}_{base}"


class VectorIndex(Protocol):
    name: str

    def ensure(self, base: str, dim: int) -> None:
        """Make room for `base`'s vectors of `dim` dimensions (dropping older ones of another
        dimension: a changed embedding model means every passage is embedded again)."""
        ...

    def add(self, base: str, items: Sequence[tuple[int, Sequence[float]]]) -> None: ...

    def remove(self, base: str, ids: Sequence[int]) -> None: ...

    def clear(self, base: str) -> None: ...

    def nearest(self, base: str, vector: Sequence[float], k: int) -> list[Hit]: ...


class TableVectors:
    """Vectors in `kb_vectors`, cosine in Python: needs nothing but the bot's database."""

    name = "table"

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._cache: dict[str, tuple[str, list[int], Any]] = {}

    def ensure(self, base: str, dim: int) -> None:
        create_missing(self.engine, vector_metadata)

    def _bump(self, base: str) -> None:
        version = int(get_meta(self.engine, f"vectors:{base}") or "0") + 1
        set_meta(self.engine, f"vectors:{base}", str(version))

    def add(self, base: str, items: Sequence[tuple[int, Sequence[float]]]) -> None:
        if not items:
            return
        with self.engine.begin() as conn:
            ids = [i for i, _ in items]
            conn.execute(delete(kb_vectors).where(kb_vectors.c.chunk_id.in_(ids)))
            conn.execute(
                insert(kb_vectors),
                [{"chunk_id": i, "base": base, "vector": pack(v)} for i, v in items],
            )
        self._bump(base)

    def remove(self, base: str, ids: Sequence[int]) -> None:
        if ids:
            with self.engine.begin() as conn:
                conn.execute(delete(kb_vectors).where(kb_vectors.c.chunk_id.in_(list(ids))))
            self._bump(base)

    def clear(self, base: str) -> None:
        create_missing(self.engine, vector_metadata)
        with self.engine.begin() as conn:
            conn.execute(delete(kb_vectors).where(kb_vectors.c.base == base))
        self._bump(base)

    def _matrix(self, base: str) -> tuple[list[int], Any]:
        version = get_meta(self.engine, f"vectors:{base}") or "0"
        cached = self._cache.get(base)
        if cached is not None and cached[0] == version:
            return cached[1], cached[2]
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(kb_vectors.c.chunk_id, kb_vectors.c.vector).where(kb_vectors.c.base == base)
            ).all()
        ids = [r[0] for r in rows]
        try:
            import numpy as np

            matrix: Any = (
                np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
                if rows
                else np.zeros((0, 0), dtype=np.float32)
            )
            norms = np.linalg.norm(matrix, axis=1, keepdims=True) if rows else None
            if norms is not None:
                matrix = matrix / np.where(norms == 0, 1, norms)
        except ImportError:
            matrix = [_normed(unpack(r[1])) for r in rows]
        self._cache[base] = (version, ids, matrix)
        return ids, matrix

    def nearest(self, base: str, vector: Sequence[float], k: int) -> list[Hit]:
        ids, matrix = self._matrix(base)
        if not ids:
            return []
        query = _normed(list(vector))
        try:
            import numpy as np

            sims = matrix @ np.asarray(query, dtype=np.float32)
            top = np.argsort(-sims)[:k]
            return [(ids[i], float(sims[i])) for i in top]
        except ImportError:
            scored = [
                (i, sum(a * b for a, b in zip(v, query, strict=False)))
                for i, v in zip(ids, matrix, strict=True)
            ]
            return sorted(scored, key=lambda h: -h[1])[:k]


def _normed(v: list[float]) -> list[float]:
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


def _loadable_sqlite() -> Any | None:
    """A DB-API sqlite module that can load extensions: the standard one when built so, else
    pysqlite3 (bundles its own SQLite with extension loading on); None when neither."""
    probe = sqlite3.connect(":memory:")
    try:
        if hasattr(probe, "enable_load_extension"):
            return sqlite3
    finally:
        probe.close()
    try:
        from pysqlite3 import dbapi2
    except ImportError:
        return None
    return dbapi2


def sqlite_vec_engine(url: str) -> Engine | None:
    """A second engine on the bot's SQLite file with sqlite-vec loaded on every connection;
    None when sqlite-vec or a loadable sqlite module is missing, or the database is in
    memory (a second connection would see another database)."""
    if ":memory:" in url or url.rstrip("/") in ("sqlite:", "sqlite:/"):
        return None
    try:
        import sqlite_vec
    except ImportError:
        return None
    module = _loadable_sqlite()
    if module is None:
        return None
    engine = create_engine(url, module=module)

    @event.listens_for(engine, "connect")
    def _load(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.enable_load_extension(True)
        sqlite_vec.load(dbapi_conn)
        dbapi_conn.enable_load_extension(False)
        dbapi_conn.execute("PRAGMA busy_timeout=2000")

    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT vec_version()"))
    except Exception as exc:  # a build that cannot load it: the caller falls back, logged
        logger.warning("knowledge: sqlite-vec did not load ({}); vectors in a table", exc)
        engine.dispose()
        return None
    return engine


class SqliteVecVectors:
    """A `vec0` table per base (`kb_vec_<base>`), cosine distance, in the bot's SQLite file."""

    name = "sqlite-vec"

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def ensure(self, base: str, dim: int) -> None:
        table = _table_name("kb_vec", base)
        with self.engine.begin() as conn:
            sql = conn.execute(
                text("SELECT sql FROM sqlite_master WHERE name = :n"), {"n": table}
            ).scalar()
            if sql is not None and f"float[{dim}]" not in sql:
                conn.execute(text(f"DROP TABLE {table}"))
            conn.execute(
                text(
                    f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING vec0("
                    f"embedding float[{dim}] distance_metric=cosine)"
                )
            )

    def add(self, base: str, items: Sequence[tuple[int, Sequence[float]]]) -> None:
        if not items:
            return
        table = _table_name("kb_vec", base)
        with self.engine.begin() as conn:
            conn.execute(
                text(f"DELETE FROM {table} WHERE rowid = :id"), [{"id": i} for i, _ in items]
            )
            conn.execute(
                text(f"INSERT INTO {table}(rowid, embedding) VALUES (:id, :v)"),
                [{"id": i, "v": pack(v)} for i, v in items],
            )

    def remove(self, base: str, ids: Sequence[int]) -> None:
        if ids:
            table = _table_name("kb_vec", base)
            with self.engine.begin() as conn:
                conn.execute(
                    text(f"DELETE FROM {table} WHERE rowid = :id"), [{"id": i} for i in ids]
                )

    def clear(self, base: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(text(f"DROP TABLE IF EXISTS {_table_name('kb_vec', base)}"))

    def nearest(self, base: str, vector: Sequence[float], k: int) -> list[Hit]:
        table = _table_name("kb_vec", base)
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT rowid, distance FROM {table} WHERE embedding MATCH :v AND k = :k "
                    "ORDER BY distance"
                ),
                {"v": pack(vector), "k": k},
            ).all()
        return [(int(r[0]), 1.0 - float(r[1])) for r in rows]


def pgvector_available(engine: Engine) -> bool:
    """Whether the `vector` extension is (or can now be) installed in the bot's database."""
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
        return True
    except DBAPIError as exc:
        logger.info("knowledge: pgvector not available ({}); vectors in a table", exc.orig)
        return False


class PgVectorVectors:
    """A table per base (`kb_pgvec_<base>`) with a `vector(dim)` column and an HNSW cosine
    index, on the bot's PostgreSQL."""

    name = "pgvector"

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def ensure(self, base: str, dim: int) -> None:
        table = _table_name("kb_pgvec", base)
        with self.engine.begin() as conn:
            found = conn.execute(
                text(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                    "WHERE attrelid = to_regclass(:t) AND attname = 'embedding'"
                ),
                {"t": table},
            ).scalar()
            if found is not None and found != f"vector({dim})":
                conn.execute(text(f"DROP TABLE {table}"))
            conn.execute(
                text(
                    f"CREATE TABLE IF NOT EXISTS {table} (chunk_id bigint PRIMARY KEY, "
                    f"embedding vector({dim}) NOT NULL)"
                )
            )
            conn.execute(
                text(
                    f"CREATE INDEX IF NOT EXISTS ix_{table}_hnsw ON {table} "
                    "USING hnsw (embedding vector_cosine_ops)"
                )
            )

    @staticmethod
    def _literal(v: Sequence[float]) -> str:
        return "[" + ",".join(repr(float(x)) for x in v) + "]"

    def add(self, base: str, items: Sequence[tuple[int, Sequence[float]]]) -> None:
        if not items:
            return
        table = _table_name("kb_pgvec", base)
        with self.engine.begin() as conn:
            conn.execute(
                text(
                    f"INSERT INTO {table}(chunk_id, embedding) VALUES (:id, CAST(:v AS vector)) "
                    "ON CONFLICT (chunk_id) DO UPDATE SET embedding = EXCLUDED.embedding"
                ),
                [{"id": i, "v": self._literal(v)} for i, v in items],
            )

    def remove(self, base: str, ids: Sequence[int]) -> None:
        if ids:
            table = _table_name("kb_pgvec", base)
            stmt = text(f"DELETE FROM {table} WHERE chunk_id IN :ids").bindparams(
                bindparam("ids", expanding=True)
            )
            with self.engine.begin() as conn:
                conn.execute(stmt, {"ids": list(ids)})

    def clear(self, base: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(text(f"DROP TABLE IF EXISTS {_table_name('kb_pgvec', base)}"))

    def nearest(self, base: str, vector: Sequence[float], k: int) -> list[Hit]:
        table = _table_name("kb_pgvec", base)
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT chunk_id, embedding <=> CAST(:v AS vector) AS d FROM {table} "
                    "ORDER BY d LIMIT :k"
                ),
                {"v": self._literal(vector), "k": k},
            ).all()
        return [(int(r[0]), 1.0 - float(r[1])) for r in rows]


def choose(engine: Engine, url: str, wanted: str) -> VectorIndex:
    """The backend for this database and `knowledge.vector_backend` (see the module doc).
    An explicit choice that cannot work stops the bot naming the key; `auto` falls back."""
    dialect = engine.dialect.name
    if wanted in ("auto", "sqlite-vec") and dialect == "sqlite":
        vec_engine = sqlite_vec_engine(url)
        if vec_engine is not None:
            return SqliteVecVectors(vec_engine)
        if wanted == "sqlite-vec":
            raise ConfigError(
                "knowledge.vector_backend: sqlite-vec cannot be loaded here (an in-memory "
                'database, or the packages missing: pip install "chatfn[knowledge]")'
            )
    if wanted in ("auto", "pgvector") and dialect == "postgresql":
        if pgvector_available(engine):
            return PgVectorVectors(engine)
        if wanted == "pgvector":
            raise ConfigError(
                "knowledge.vector_backend: pgvector: `CREATE EXTENSION vector` failed on this "
                "PostgreSQL (install the extension there, or use vector_backend: table)"
            )
    if wanted in ("sqlite-vec", "pgvector"):
        raise ConfigError(f"knowledge.vector_backend: {wanted} does not work on {dialect}")
    return TableVectors(engine)
