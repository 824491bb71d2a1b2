"""Issue 37 §2: `MessageContext` is the plugin's view and the core's turn state an object of its
own. A plugin reaches the database through its declared tables (`plugin.database(ctx)`) and
the context's narrow doors (history, the chat's summary and stats), never the whole `Storage`;
the built-ins use only those doors; the turn state (`ctx.turn`, which holds the storage) is
the core's, and no built-in reads it; and no module attaches anything to a class or module of
another at import time."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from types import FunctionType, MethodType, ModuleType
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from chatfn.storage.db import Storage
from chatfn.testing import TestBot
from function_calls import MessageContext, PluginHost
from function_calls.context import TurnState

ROOT = Path(__file__).resolve().parents[2]

#: The contexts the test plugin's handler was given (the plugin module imports this list).
SEEN: list[MessageContext] = []

PLUGIN = textwrap.dedent(
    """
    from datetime import UTC, datetime, timedelta

    from function_calls import FunctionResult, MessageContext, tool_function
    from tests.function_calls.test_plugin_view import SEEN


    @tool_function(description="Keep the context it was given.")
    async def look(ctx: MessageContext) -> FunctionResult:
        SEEN.append(ctx)
        since = datetime.now(UTC) - timedelta(hours=1)
        earlier = [r.text for r in await ctx.history_since(since)]
        [today] = await ctx.chat_stats(since)
        try:
            every = f"{len(await ctx.usage_by_chat(since))} chats"
        except PermissionError:
            every = "refused"
        return FunctionResult(messages=[f"{earlier} {today.messages} {every}"])
    """
)


def _paths_to_storage(value: Any, path: str, depth: int, seen: set[int]) -> list[str]:
    """Where, through public attributes, items and fields, `value` holds a Storage or an
    Engine (functions and modules are not followed: their globals reach everything)."""
    if isinstance(value, Storage | Engine):
        return [path]
    if (
        depth == 0
        or id(value) in seen
        or value is None
        or isinstance(value, str | bytes | int | float | type | ModuleType)
        or isinstance(value, FunctionType | MethodType)
    ):
        return []
    seen.add(id(value))
    children: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        children = [(f"{path}[{k!r}]", v) for k, v in value.items()]
    elif isinstance(value, list | tuple | set | frozenset):
        children = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    else:
        names = set(getattr(value, "__dict__", {}))
        for cls in type(value).__mro__:
            names.update(getattr(cls, "__slots__", ()))
        children = [
            (f"{path}.{n}", getattr(value, n, None)) for n in sorted(names) if not n.startswith("_")
        ]
    return [p for name, v in children for p in _paths_to_storage(v, name, depth - 1, seen)]


@pytest.fixture
async def looked(tmp_path: Path) -> tuple[TestBot, list[str]]:
    path = tmp_path / "look.py"
    path.write_text(PLUGIN)
    SEEN.clear()
    tb = TestBot(tmp_path, plugins=[str(path)])
    try:
        # Not addressed to the bot in a group: stored, not answered.
        assert await tb.send("hello there", group="group:g1", sender="bob") == []
        replies = await tb.send("/look", group="group:g1", sender="bob")
        yield tb, replies  # type: ignore[misc]
    finally:
        await tb.aclose()


async def test_a_plugins_context_gives_no_path_to_the_whole_storage(
    looked: tuple[TestBot, list[str]],
) -> None:
    [ctx] = SEEN
    members = [n for n in dir(ctx) if not n.startswith("_") and n != "turn"]
    found: list[str] = []
    for name in members:
        try:
            value = getattr(ctx, name)
        except AttributeError:
            continue
        found += _paths_to_storage(value, f"ctx.{name}", 4, {id(ctx)})
    assert found == []
    with pytest.raises(AttributeError, match=r"plugin\.database\(ctx\)"):
        _ = ctx.storage
    # The hooks' view declares no storage either (the database is `plugin.database(host)`).
    assert not hasattr(PluginHost, "storage")


async def test_the_doors_read_this_chat_before_this_message(
    looked: tuple[TestBot, list[str]],
) -> None:
    _, replies = looked
    # The message before it (not this one), both counted in the chat's hour; every chat's
    # numbers are the bot admins' only.
    assert replies == ["['hello there'] 2 refused"]


async def test_a_bot_admin_reads_every_chats_usage(tmp_path: Path) -> None:
    path = tmp_path / "look.py"
    path.write_text(PLUGIN)
    SEEN.clear()
    tb = TestBot(tmp_path, plugins=[str(path)])
    try:
        await tb.send("hi", group="group:g1", sender="bob")
        [reply] = await tb.send("/look", sender="root", admin=True)
    finally:
        await tb.aclose()
    assert reply.endswith(" chats") and not reply.endswith(" 0 chats")


def _py(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


def test_no_builtin_reads_the_core_turn_state_or_the_storage() -> None:
    """The built-ins (and the example plugins) work through `MessageContext`'s own members:
    `ctx.turn` (the turn state, with the storage in it) and private members are the core's."""
    offenders = []
    for path in _py("function_calls/builtins", "plugins"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and (
                node.attr in {"turn", "storage", "_storage", "_door"}
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
    assert offenders == []
    # What the core keeps there, and the plugin's view does not offer.
    assert "storage" in TurnState.__dataclass_fields__
    assert "storage" not in MessageContext.__slots__


def _imported(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements that run when the module is imported (not in a def or class)."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        out.append(stmt)
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                out += _module_level(inner)
        for handler in getattr(stmt, "handlers", []):
            out += _module_level(handler.body)
    return out


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def _attachments(source: str) -> list[tuple[int, str]]:
    """`Name.attr = ...`, `setattr(Name, ...)` or `delattr(Name, ...)` at module level, where
    `Name` is imported: an attribute attached to another module's class (or module) when
    this one is imported."""
    tree = ast.parse(source)
    imported = _imported(tree)
    found = []
    for stmt in _module_level(tree.body):
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                targets += t.elts if isinstance(t, ast.Tuple) else [t]
        elif isinstance(stmt, ast.AugAssign | ast.AnnAssign):
            targets = [stmt.target]
        elif (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name)
            and stmt.value.func.id in {"setattr", "delattr"}
            and stmt.value.args
        ):
            targets = [ast.Attribute(stmt.value.args[0], "?", ast.Store())]
        for target in targets:
            root = _root(target)
            if isinstance(target, ast.Attribute) and isinstance(root, ast.Name):
                if root.id in imported:
                    found.append((stmt.lineno, ast.unparse(target)))
    return found


def test_the_scan_finds_an_attachment() -> None:
    source = textwrap.dedent(
        """
        import pkg.mod
        from x import Klass
        from y import other as alias
        local = object()
        local.ok = 1
        if True:
            Klass.method = len
        try:
            pkg.mod.HOOK = print
        except ImportError:
            setattr(alias, "name", 2)

        def later():
            Klass.fine = 3
        """
    )
    assert _attachments(source) == [
        (8, "Klass.method"),
        (10, "pkg.mod.HOOK"),
        (12, "alias.?"),
    ]


def test_no_module_attaches_to_another_modules_class_at_import() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {target}"
        for path in _py("chatfn", "function_calls", "providers")
        for line, target in _attachments(path.read_text())
    ]
    assert offenders == []
