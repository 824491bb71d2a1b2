"""Issue 37 §2: the knowledge built-in reaches the database the way a third-party plugin has to,
through `plugin.database(host)`: it never holds the bot's `Storage` or an engine, its
statements are Core on its declared tables (SQL text only in its schema step, run by the
runtime), and the view it has refuses what its declaration does not name, its typed DDL doors
(`create_virtual`, `drop`) included."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, Text, select
from sqlalchemy.engine import Engine

from chatfn.storage.db import Storage
from chatfn.storage.models import messages_table
from function_calls import Fts5, Fts5Vocab, PluginDatabase, TableRefused, Vec0
from function_calls.builtins import knowledge
from function_calls.builtins.knowledge.store import kb_chunks, kb_fts
from tests.fakes.embeddings import EmbeddingServer
from tests.function_calls.builtins.conftest import MakeBot
from tests.function_calls.builtins.test_knowledge_hybrid import (
    embeddings,  # noqa: F401 (the fixture)
    hybrid_config,
    started,
)

PACKAGE = Path(knowledge.__file__).parent
# The plugin's schema steps (its `Tables(after=...)`), run by the runtime in its schema
# transaction: the only code of the package that may hold a plain connection and write DDL
# SQLAlchemy has no construct for (a generated column, an extension).
SCHEMA_STEPS = {"_keyword_index", "pgvector_step"}
FORBIDDEN_NAMES = {"Storage", "Engine", "create_engine", "create_missing"}


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """(enclosing function's name, node) for every node of a module."""

    def walk(node: ast.AST, where: str) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef) else where
            yield inner, child
            yield from walk(child, inner)

    yield from walk(tree, "")


def test_the_knowledge_package_never_reaches_for_the_storage_or_an_engine() -> None:
    wrong: list[str] = []
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text())
        for where, node in _functions(tree):
            line = f"{path.name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom):
                names = {a.name for a in node.names}
                if (node.module or "").startswith("chatfn") or names & FORBIDDEN_NAMES:
                    wrong.append(f"{line} imports {node.module}: {sorted(names)}")
            if isinstance(node, ast.Attribute) and node.attr in ("storage", "engine"):
                wrong.append(f"{line} uses .{node.attr}")
            if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
                wrong.append(f"{line} uses {node.id}")
            called = node.func if isinstance(node, ast.Call) else None
            name = getattr(called, "id", None) or getattr(called, "attr", None)
            if name in ("text", "exec_driver_sql") and where not in SCHEMA_STEPS:
                wrong.append(f"{line} writes SQL text in {where or 'the module'}")
    assert wrong == []


def _held(obj: Any, seen: set[int]) -> Iterator[Any]:
    """Every object `obj` holds in its attributes, containers followed, a plugin database
    view not looked into (it holds the storage: that is its job)."""
    if id(obj) in seen or isinstance(obj, PluginDatabase):
        return
    seen.add(id(obj))
    yield obj
    if isinstance(obj, dict):
        items: list[Any] = [*obj.keys(), *obj.values()]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        items = list(obj)
    elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("function_calls"):
        items = list(vars(obj).values())
    else:
        items = []
    for item in items:
        yield from _held(item, seen)


async def test_the_service_holds_only_its_plugins_database_view(
    make_bot: MakeBot,
    tmp_path: Path,
    embeddings: EmbeddingServer,  # noqa: F811
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    service = await started(make_bot, hybrid_config(docs, embeddings, vector_backend="sqlite-vec"))
    assert service.vectors is not None and service.vectors.name == "sqlite-vec"
    held = list(_held(service, set()))
    assert [type(o).__name__ for o in held if isinstance(o, (Storage, Engine))] == []
    assert isinstance(service.db, PluginDatabase) and service.db.plugin == "knowledge"
    vectors_db = getattr(service.vectors, "db")  # noqa: B009 (not on the protocol)
    assert isinstance(vectors_db, PluginDatabase) and vectors_db.allowed == service.db.allowed
    assert {"kb_documents", "kb_chunks", "kb_fts", "temp.kb_query", "kb_vec_faq"} <= set(
        service.db.allowed
    )
    assert not {"messages", "plugin_schema"} & set(service.db.allowed)
    assert (await service.search("refund", ["faq"]))[0].source.endswith(".md")


async def test_its_view_refuses_what_its_declaration_does_not_name(
    make_bot: MakeBot,
    tmp_path: Path,
    embeddings: EmbeddingServer,  # noqa: F811
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    service = await started(make_bot, hybrid_config(docs, embeddings))
    db = service.db
    stranger = Table("someone_fts", MetaData(), Column("rowid", Integer), Column("body", Text))
    attempts = [
        lambda c: c.execute(select(messages_table.c.text)),
        lambda c: c.execute(
            select(kb_chunks.c.text).join(messages_table, messages_table.c.id == kb_chunks.c.id)
        ),
        lambda c: c.create_virtual(stranger, Fts5(("body",))),
        lambda c: c.create_virtual(
            Table("kb_fts_vocab", MetaData(), Column("term", Text)), Fts5Vocab(stranger)
        ),
        lambda c: c.create_virtual(stranger, Vec0("embedding", 3)),
        lambda c: c.drop(messages_table),
        lambda c: c.create(messages_table),
    ]
    for attempt in attempts:

        def run(a: Any = attempt) -> None:
            with db.begin() as conn:
                a(conn)

        with pytest.raises(TableRefused):
            await db.run(run)
    assert (await service.search("refund", ["faq"]))[0].source.endswith(".md")  # index intact


@pytest.mark.parametrize(
    "module",
    [
        lambda: Fts5(("body",), tokenize="porter'); DROP TABLE messages; --"),
        lambda: Fts5(("body); DROP TABLE messages; --",)),
        lambda: Vec0("embedding", -3),
        lambda: Vec0("embedding", 3, "cosine) --"),  # type: ignore[arg-type]
    ],
)
def test_a_virtual_table_module_is_built_from_checked_parts(module: Any) -> None:
    from function_calls.plugin_ddl import virtual_table_sql

    with pytest.raises(ValueError):
        virtual_table_sql(kb_fts, module())
