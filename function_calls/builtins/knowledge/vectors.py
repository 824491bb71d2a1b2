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

Every method is synchronous (called through the plugin database view's `run`) and reaches the
database only through that view: each base's vector table is declared (`declared_tables`, the
plugin's `Tables(on_demand=...)`) and made through the view's typed `create` / `create_virtual`,
its statements are SQLAlchemy Core (`MATCH` and `<=>` as `.op`, pgvector's type a
`UserDefinedType`).
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
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    bindparam,
    cast,
    delete,
    func,
    insert,
    select,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import NullType, UserDefinedType

from function_calls import ConfigError, PluginDatabase, Vec0
from function_calls.builtins.knowledge.settings import KnowledgeSettings
from function_calls.builtins.knowledge.store import get_meta, set_meta, set_meta_in

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


class Vector(UserDefinedType[Any]):
    """pgvector's `vector(dim)` (`vector` in a cast), without its Python package."""

    cache_ok = True

    def __init__(self, dim: int | None = None) -> None:
        self.dim = dim

    def get_col_spec(self, **_kw: Any) -> str:
        return f"vector({self.dim})" if self.dim else "vector"


def vec_table(base: str) -> Table:
    """sqlite-vec's `kb_vec_<base>` (`vec0`): the columns its statements use (`distance` and
    `k` are vec0's hidden columns)."""
    return Table(
        _table_name("kb_vec", base),
        MetaData(),
        Column("rowid", Integer),
        Column("embedding", LargeBinary),
        Column("distance", Float),
        Column("k", Integer),
    )


def pgvec_table(base: str, dim: int | None = None) -> Table:
    """pgvector's `kb_pgvec_<base>`, its HNSW cosine index with it (`dim`: the column's, for
    CREATE; statements need none)."""
    name = _table_name("kb_pgvec", base)
    table = Table(
        name,
        MetaData(),
        Column("chunk_id", BigInteger, primary_key=True, autoincrement=False),
        Column("embedding", Vector(dim), nullable=False),
    )
    Index(
        f"ix_{name}_hnsw",
        table.c.embedding,
        postgresql_using="hnsw",
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    return table


def declared_tables(cfg: KnowledgeSettings) -> list[Table]:
    """The vector tables this configuration may use: `kb_vectors`, and each base with an
    embedding model's own (the plugin's `Tables(on_demand=...)`)."""
    with_model = [name for name, base in cfg.bases.items() if base.embedding_model]
    if not with_model:
        return []
    return [kb_vectors, *(t(b) for b in with_model for t in (vec_table, pgvec_table))]


_MISSING = -1  # `_stored_dim`: the table is not there


def _stored_dim(db: PluginDatabase, dims: ColumnElement[Any]) -> int | None:
    """The dimension of a vector table's first vector (`dims` of its column); None when it has
    none, `_MISSING` when the table is not there."""
    try:
        with db.connect() as conn:
            row = conn.execute(select(dims).limit(1)).first()
    except DBAPIError:
        return _MISSING
    return None if row is None else int(row[0])


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

    def __init__(self, db: PluginDatabase) -> None:
        self.db = db
        self._cache: dict[str, tuple[str, list[int], Any]] = {}

    def ensure(self, base: str, dim: int) -> None:
        with self.db.begin() as conn:
            conn.create(kb_vectors)

    def _bump(self, base: str) -> None:
        version = int(get_meta(self.db, f"vectors:{base}") or "0") + 1
        set_meta(self.db, f"vectors:{base}", str(version))

    def add(self, base: str, items: Sequence[tuple[int, Sequence[float]]]) -> None:
        if not items:
            return
        with self.db.begin() as conn:
            ids = [i for i, _ in items]
            conn.execute(delete(kb_vectors).where(kb_vectors.c.chunk_id.in_(ids)))
            conn.execute(
                insert(kb_vectors),
                [{"chunk_id": i, "base": base, "vector": pack(v)} for i, v in items],
            )
        self._bump(base)

    def remove(self, base: str, ids: Sequence[int]) -> None:
        if ids:
            with self.db.begin() as conn:
                conn.execute(delete(kb_vectors).where(kb_vectors.c.chunk_id.in_(list(ids))))
            self._bump(base)

    def clear(self, base: str) -> None:
        with self.db.begin() as conn:
            conn.create(kb_vectors)
            conn.execute(delete(kb_vectors).where(kb_vectors.c.base == base))
        self._bump(base)

    def _matrix(self, base: str) -> tuple[list[int], Any]:
        version = get_meta(self.db, f"vectors:{base}") or "0"
        cached = self._cache.get(base)
        if cached is not None and cached[0] == version:
            return cached[1], cached[2]
        with self.db.connect() as conn:
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


def sqlite_vec_view(db: PluginDatabase) -> PluginDatabase | None:
    """The plugin's view over a second engine on the bot's SQLite file with sqlite-vec loaded
    on every connection (`PluginDatabase.sqlite_extension`); None when sqlite-vec or a
    loadable sqlite module is missing, or the database is in memory (a second connection
    would see another database)."""
    if db.dialect_name != "sqlite" or db.in_memory:
        return None
    try:
        import sqlite_vec
    except ImportError:
        return None
    module = _loadable_sqlite()
    if module is None:
        return None
    view = db.sqlite_extension(module, sqlite_vec.load)
    try:
        with view.connect() as conn:
            conn.execute(select(func.vec_version()))
    except Exception as exc:  # a build that cannot load it: the caller falls back, logged
        logger.warning("knowledge: sqlite-vec did not load ({}); vectors in a table", exc)
        view.close()
        return None
    return view


class SqliteVecVectors:
    """A `vec0` table per base (`kb_vec_<base>`), cosine distance, in the bot's SQLite file."""

    name = "sqlite-vec"

    def __init__(self, db: PluginDatabase) -> None:
        self.db = db  # the sqlite-vec view (`sqlite_vec_view`)

    def ensure(self, base: str, dim: int) -> None:
        table = vec_table(base)
        have = _stored_dim(self.db, func.vec_length(table.c.embedding))
        with self.db.begin() as conn:
            if have != dim:  # another dimension, or none to tell by: made anew
                conn.drop(table)
            conn.create_virtual(table, Vec0("embedding", dim, "cosine"))

    def add(self, base: str, items: Sequence[tuple[int, Sequence[float]]]) -> None:
        if not items:
            return
        table = vec_table(base)
        with self.db.begin() as conn:
            conn.execute(
                delete(table).where(table.c.rowid == bindparam("id")),
                [{"id": i} for i, _ in items],
            )
            conn.execute(insert(table), [{"rowid": i, "embedding": pack(v)} for i, v in items])

    def remove(self, base: str, ids: Sequence[int]) -> None:
        if ids:
            table = vec_table(base)
            with self.db.begin() as conn:
                conn.execute(
                    delete(table).where(table.c.rowid == bindparam("id")),
                    [{"id": i} for i in ids],
                )

    def clear(self, base: str) -> None:
        with self.db.begin() as conn:
            conn.drop(vec_table(base))

    def nearest(self, base: str, vector: Sequence[float], k: int) -> list[Hit]:
        table = vec_table(base)
        stmt = (
            select(table.c.rowid, table.c.distance)
            .where(table.c.embedding.op("MATCH")(pack(vector)), table.c.k == k)
            .order_by(table.c.distance)
        )
        with self.db.connect() as conn:
            rows = conn.execute(stmt).all()
        return [(int(r[0]), 1.0 - float(r[1])) for r in rows]


PGVECTOR = "pgvector"  # kb_meta: whether `CREATE EXTENSION vector` worked ("yes", or why not)


def pgvector_step(conn: Connection) -> None:
    """Part of the plugin's schema step on PostgreSQL when a base has an embedding model and
    `vector_backend` may be pgvector: install the `vector` extension if it can be (in a
    savepoint: where it cannot, the rest of the schema still commits), and say in `kb_meta`
    whether it is there, for `choose`. An extension is not a table: installing one is the
    schema step's, run by the runtime, never a search's."""
    if conn.dialect.name != "postgresql":
        return
    try:
        with conn.begin_nested():
            conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")
        outcome = "yes"
    except DBAPIError as exc:
        outcome = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
    set_meta_in(conn, PGVECTOR, outcome)


def pgvector_available(db: PluginDatabase) -> bool:
    """Whether the `vector` extension was installed by the schema step (`pgvector_step`)."""
    outcome = get_meta(db, PGVECTOR)
    if outcome == "yes":
        return True
    logger.info("knowledge: pgvector not available ({}); vectors in a table", outcome)
    return False


class PgVectorVectors:
    """A table per base (`kb_pgvec_<base>`) with a `vector(dim)` column and an HNSW cosine
    index, on the bot's PostgreSQL."""

    name = "pgvector"

    def __init__(self, db: PluginDatabase) -> None:
        self.db = db

    def ensure(self, base: str, dim: int) -> None:
        table = pgvec_table(base, dim)
        have = _stored_dim(self.db, func.vector_dims(table.c.embedding))
        with self.db.begin() as conn:
            if have != dim:  # another dimension, or none to tell by: made anew
                conn.drop(table)
            conn.create(table)

    @staticmethod
    def _literal(v: Sequence[float]) -> str:
        return "[" + ",".join(repr(float(x)) for x in v) + "]"

    def add(self, base: str, items: Sequence[tuple[int, Sequence[float]]]) -> None:
        if not items:
            return
        from sqlalchemy.dialects.postgresql import insert as pg_insert  # only on PostgreSQL

        table = pgvec_table(base)
        stmt = pg_insert(table).values(
            chunk_id=bindparam("id"), embedding=cast(bindparam("v"), Vector())
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[table.c.chunk_id], set_={"embedding": stmt.excluded.embedding}
        )
        with self.db.begin() as conn:
            conn.execute(stmt, [{"id": i, "v": self._literal(v)} for i, v in items])

    def remove(self, base: str, ids: Sequence[int]) -> None:
        if ids:
            table = pgvec_table(base)
            with self.db.begin() as conn:
                conn.execute(delete(table).where(table.c.chunk_id.in_(list(ids))))

    def clear(self, base: str) -> None:
        with self.db.begin() as conn:
            conn.drop(pgvec_table(base))

    def nearest(self, base: str, vector: Sequence[float], k: int) -> list[Hit]:
        table = pgvec_table(base)
        query = cast(bindparam("v", self._literal(vector), type_=NullType()), Vector())
        distance = table.c.embedding.op("<=>", return_type=Float)(query).label("d")
        stmt = select(table.c.chunk_id, distance).order_by(distance).limit(k)
        with self.db.connect() as conn:
            rows = conn.execute(stmt).all()
        return [(int(r[0]), 1.0 - float(r[1])) for r in rows]


def choose(db: PluginDatabase, wanted: str) -> VectorIndex:
    """The backend for this database and `knowledge.vector_backend` (see the module doc).
    An explicit choice that cannot work stops the bot naming the key; `auto` falls back."""
    dialect = db.dialect_name
    if wanted in ("auto", "sqlite-vec") and dialect == "sqlite":
        vec_db = sqlite_vec_view(db)
        if vec_db is not None:
            return SqliteVecVectors(vec_db)
        if wanted == "sqlite-vec":
            raise ConfigError(
                "knowledge.vector_backend: sqlite-vec cannot be loaded here (an in-memory "
                'database, or the packages missing: pip install "chatfn[knowledge]")'
            )
    if wanted in ("auto", "pgvector") and dialect == "postgresql":
        if pgvector_available(db):
            return PgVectorVectors(db)
        if wanted == "pgvector":
            raise ConfigError(
                "knowledge.vector_backend: pgvector: `CREATE EXTENSION vector` failed on this "
                "PostgreSQL (install the extension there, or use vector_backend: table)"
            )
    if wanted in ("sqlite-vec", "pgvector"):
        raise ConfigError(f"knowledge.vector_backend: {wanted} does not work on {dialect}")
    return TableVectors(db)
