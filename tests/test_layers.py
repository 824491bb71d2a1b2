"""The dependency picture of README's "Layout" is a fact: imports point down the layers, built-ins
use only the public plugin API, and no two modules import each other (directly or round a
cycle). Every import counts, including those under TYPE_CHECKING and inside functions.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Top to bottom; a module may import only from its own layer's package or from lower layers.
#: Layers sharing a number are siblings that must not import each other.
LAYERS: dict[str, int] = {
    "bot": 7,  # bot.py and check_system.py: thin entry points over the chatfn command
    "check_system": 7,
    "chatfn": 6,  # the command and the admin console: compose channels, runtime, storage, models
    "chatfn.testing": 6,  # the harness composes a whole bot, as chatfn.run does
    "chatfn.channels": 5,
    "chatfn.runtime": 4,
    "function_calls": 3,
    "chatfn.storage": 2,
    "providers": 2,
    "chatfn.common": 1,
}
#: The distribution's three top-level packages (tests/test_packaging.py checks the wheel has
#: no other): everything of the application is under `chatfn`.
PACKAGES = ("providers", "function_calls", "chatfn")
#: The one allowed upward import: the harness's old address forwards to `chatfn.testing`
#: (lazily, at attribute access) for plugin tests written before it moved.
SHIMS = {"function_calls.testing": "chatfn.testing"}
BUILTINS = "function_calls.builtins"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    files = [root / "bot.py", root / "check_system.py"]
    for package in PACKAGES:
        files += sorted((root / package).rglob("*.py"))
    return {module_name(f, root): f for f in files}


def imports_of(name: str, path: Path, known: set[str]) -> Iterator[tuple[str, int]]:
    """(imported project module, line) for every import statement in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import sub` imports the submodule when there is one.
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        for target in targets:
            resolved = _resolve(target, known)
            if resolved is not None and resolved != name:
                yield resolved, node.lineno


def _resolve(target: str, known: set[str]) -> str | None:
    parts = target.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return None


def layer_of(module: str) -> tuple[str, int]:
    best = max((k for k in LAYERS if module == k or module.startswith(k + ".")), key=len)
    return best, LAYERS[best]


def graph(root: Path = ROOT) -> dict[str, dict[str, int]]:
    modules = project_modules(root)
    known = set(modules)
    return {name: dict(imports_of(name, path, known)) for name, path in modules.items()}


def violations(edges: dict[str, dict[str, int]]) -> list[str]:
    found = []
    for source, targets in edges.items():
        src_layer, src_rank = layer_of(source)
        for target, line in targets.items():
            dst_layer, dst_rank = layer_of(target)
            if src_layer == dst_layer or SHIMS.get(source) == target:
                continue
            if dst_rank >= src_rank:
                found.append(f"{source}:{line} imports {target} ({src_layer} -> {dst_layer})")
    return found


def builtin_violations(edges: dict[str, dict[str, int]]) -> list[str]:
    """Built-ins import only `function_calls` (the plugin API) and their own package."""
    found = []
    for source, targets in edges.items():
        if not source.startswith(BUILTINS + "."):
            continue
        own = ".".join(source.split(".")[:3])
        for target, line in targets.items():
            if target == "function_calls" or target == own or target.startswith(own + "."):
                continue
            found.append(f"{source}:{line} imports {target}: built-ins use only the plugin API")
    return found


def core_imports_of_builtins(edges: dict[str, dict[str, int]]) -> list[str]:
    """No module outside `function_calls/builtins/` imports a built-in: the core reaches them
    only through the doors of their `Plugin(...)` declarations (texts, per-chat keys, console
    views, health, checks), as it reaches a third-party plugin."""
    return [
        f"{source}:{line} imports the built-in {target}"
        for source, targets in edges.items()
        if source != BUILTINS and not source.startswith(BUILTINS + ".")
        for target, line in targets.items()
        if target == BUILTINS or target.startswith(BUILTINS + ".")
    ]


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def package_edges(edges: dict[str, dict[str, int]]) -> set[tuple[str, str]]:
    """The picture README draws: which layer imports which."""
    pairs = set()
    for source, targets in edges.items():
        for target in targets:
            a, b = layer_of(source)[0], layer_of(target)[0]
            if a != b:
                pairs.add((a, b))
    return pairs


# -- the tree as it is --------------------------------------------------------------------------
def test_imports_point_down_the_layers() -> None:
    assert violations(graph()) == []


def test_builtins_use_only_the_plugin_api() -> None:
    assert builtin_violations(graph()) == []


def test_no_module_outside_the_builtins_imports_a_builtin() -> None:
    assert core_imports_of_builtins(graph()) == []
    # and the check sees one (a console page reading a built-in's table, as it once did)
    edges = {
        "chatfn.runtime.console.ops": {"function_calls.builtins.reminders.service": 78},
        "function_calls.builtins.reminders": {"function_calls.builtins.reminders.service": 7},
    }
    assert core_imports_of_builtins(edges) == [
        "chatfn.runtime.console.ops:78 imports the built-in "
        "function_calls.builtins.reminders.service"
    ]


def test_no_import_cycles_between_modules() -> None:
    assert cycles(graph()) == []


#: What a channel may use of the runtime: its one narrow interface (ChannelHost, ChannelSpec)
#: and the event-stream types the HTTP channel reads the outbox with. Never `runtime.bot`.
#: And `runtime.console`, the admin console's reads and changes, which the HTTP channel serves
#: as a web front (chatfn/channels/http/admin): the web there, the bot here.
CHANNEL_RUNTIME = (
    "chatfn.runtime.channel_host",
    "chatfn.runtime.event_stream",
    "chatfn.runtime.console",
)


def channel_violations(edges: dict[str, dict[str, int]]) -> list[str]:
    """Channels know nothing of models or the tool loop: they speak `common.messages` and talk
    to the runtime through `runtime.channel_host` only (never the Bot, its delivery or its
    cluster switch)."""
    return [
        f"{source}:{line} imports {target}"
        for source, targets in edges.items()
        if source.startswith("chatfn.channels")
        for target, line in targets.items()
        if target.startswith(("function_calls", "providers", "chatfn.storage"))
        or (target.startswith("chatfn.runtime") and target not in CHANNEL_RUNTIME)
    ]


def test_channels_know_nothing_of_models_or_the_tool_loop() -> None:
    assert channel_violations(graph()) == []


def test_a_channel_importing_the_core_fails(tmp_path: Path) -> None:
    root = _tree(
        tmp_path, {"chatfn/channels/http.py": "from function_calls import tool_function\n"}
    )
    assert channel_violations(graph(root)) == ["chatfn.channels.http:1 imports function_calls"]


def test_a_channel_importing_the_bot_fails(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "chatfn/runtime/bot.py": "",
            "chatfn/runtime/channel_host.py": "",
            "chatfn/channels/x/__init__.py": (
                "from chatfn.runtime.channel_host import ChannelSpec\n"
            ),
            "chatfn/channels/x/channel.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from chatfn.runtime.bot import Bot\n",
        },
    )
    assert channel_violations(graph(root)) == [
        "chatfn.channels.x.channel:3 imports chatfn.runtime.bot"
    ]


# -- the checks themselves catch what they are for ------------------------------------------------
def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for package in PACKAGES:
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "bot.py").write_text("")
    (tmp_path / "check_system.py").write_text("")
    for rel, text in files.items():
        file = tmp_path / rel
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)
        for folder in file.parents:  # every folder on the way is a package
            if folder == tmp_path:
                break
            (folder / "__init__.py").touch()
    return tmp_path


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"function_calls/llm.py": "import chatfn.runtime.settings\n"},
            "function_calls -> chatfn.runtime",
        ),
        (
            {
                "providers/base.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from function_calls.context import X\n"
            },
            "providers -> function_calls",
        ),
        (
            {"chatfn/common/messages.py": "def f():\n    from chatfn.storage import db\n"},
            "chatfn.common -> chatfn.storage",
        ),
        (
            {"chatfn/runtime/bot.py": "from chatfn.channels.base import Channel\n"},
            "chatfn.runtime -> chatfn.channels",
        ),
        ({"chatfn/storage/db.py": "from providers import types\n"}, "chatfn.storage -> providers"),
    ],
)
def test_an_import_against_the_direction_fails(
    tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    extra = {
        "chatfn/runtime/settings.py": "",
        "function_calls/context.py": "",
        "chatfn/storage/db.py": "",
        "chatfn/channels/base.py": "",
        "providers/types.py": "",
    }
    root = _tree(tmp_path, {**extra, **files})
    found = violations(graph(root))
    assert any(expected in v for v in found), found


def test_a_builtin_reaching_past_the_plugin_api_fails(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "function_calls/executor.py": "",
            "function_calls/builtins/__init__.py": "",
            "function_calls/builtins/x/__init__.py": "from function_calls.executor import run\n"
            "from function_calls import tool_function\nfrom . import helpers\n",
            "function_calls/builtins/x/helpers.py": "",
        },
    )
    found = builtin_violations(graph(root))
    assert found == [
        "function_calls.builtins.x:1 imports function_calls.executor: built-ins use only the "
        "plugin API"
    ]


def test_a_cycle_fails(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "chatfn/runtime/bot.py": "from chatfn.runtime import settings\n",
            "chatfn/runtime/settings.py": "def f():\n    from chatfn.runtime.bot import Bot\n",
        },
    )
    assert cycles(graph(root)) == [["chatfn.runtime.bot", "chatfn.runtime.settings"]]


def test_readme_draws_the_enforced_picture() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "channels -> runtime -> function_calls -> storage | providers -> common" in readme
    # Every edge of the real graph runs down that line.
    order = [
        "bot",
        "chatfn",
        "chatfn.channels",
        "chatfn.runtime",
        "function_calls",
        "chatfn.storage",
        "providers",
        "chatfn.common",
    ]
    for a, b in package_edges(graph()):
        if a in ("check_system", "chatfn.testing"):
            continue
        if SHIMS.get(a) == b or a == "function_calls.testing":
            continue
        assert order.index(a) < order.index(b) or {a, b} <= {"chatfn.storage", "providers"}, (a, b)


# -- nor names one: no built-in's table, settings section or health entry in the core ------------
#: The console's static files: their scripts and words are the core's, as its modules are.
CONSOLE_STATIC = ("chatfn/channels/http/admin/static/js", "chatfn/channels/http/admin/static/i18n")
#: The frozen migration history is the database's past, not a door: revision 0001 created the
#: reminders table a 0.1 database may lack (chatfn/storage/migrations/baseline_tables.py).
FROZEN = "chatfn.storage.migrations"
#: Where the core uses a word a built-in's section also is, for something of its own.
CORE_OWN: dict[tuple[str, str], str] = {
    ("chatfn.channels.http", "mcp"): "`channels.http.mcp`, the HTTP channel's switch for /mcp",
    ("chatfn.channels.mcp.web", "mcp"): "the same switch, read where /mcp is mounted",
}
RECEIVERS = ("settings", "config", "core", "cfg", "_settings")


def builtin_identities(root: Path = ROOT) -> dict[str, set[str]]:
    """What names a built-in, read from its source: "section" (its `Plugin(...)` config
    section: its name unless `section=`), "table" (each `Table("name", ...)` it declares),
    "health" (the top-level keys of its `@plugin.health` answer)."""
    found: dict[str, set[str]] = {"section": set(), "table": set(), "health": set()}
    for path in sorted((root / "function_calls" / "builtins").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                first = node.args[0] if node.args else None
                name = first.value if isinstance(first, ast.Constant) else None
                if node.func.id == "Plugin" and isinstance(name, str):
                    sections = [k.value for k in node.keywords if k.arg == "section"]
                    found["section"].add(
                        sections[0].value
                        if sections and isinstance(sections[0], ast.Constant)
                        else name
                    )
                elif node.func.id == "Table" and isinstance(name, str):
                    found["table"].add(name)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                isinstance(d, ast.Attribute) and d.attr == "health" for d in node.decorator_list
            ):
                for ret in ast.walk(node):
                    if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Dict):
                        found["health"].update(
                            k.value for k in ret.value.keys if isinstance(k, ast.Constant)
                        )
    return found


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _core_own(module: str, word: str) -> bool:
    return any(w == word and (module == m or module.startswith(m + ".")) for m, w in CORE_OWN)


def _tail(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")


def core_names_of_builtins(root: Path = ROOT) -> list[str]:
    """The core reaches a built-in only through its `Plugin(...)` doors, so it names none of
    its tables, reads none of its settings sections (`settings.<section>`,
    `getattr(settings, "<section>")`) and draws none of its health entries by name (the
    console's scripts and words included)."""
    ids = builtin_identities(root)
    tables, sections, health = ids["table"], ids["section"], ids["health"]
    found = []
    for name, path in project_modules(root).items():
        if name.startswith((BUILTINS, FROZEN)):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            word, what = None, ""
            if isinstance(node, ast.Constant) and id(node) not in docs:
                if node.value in tables:
                    word, what = node.value, "the built-in table"
                elif node.value in health:
                    word, what = node.value, "the built-in health entry"
            elif (
                isinstance(node, ast.Call)
                and _tail(node.func) == "getattr"
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in sections
            ):
                word, what = node.args[1].value, "the built-in settings section"
            elif (
                isinstance(node, ast.Attribute)
                and node.attr in sections
                and _tail(node.value).endswith(RECEIVERS)
            ):
                word, what = node.attr, "the built-in settings section"
            if word is not None and not _core_own(name, word):
                found.append(f"{name}:{node.lineno} names {what} {word!r}")
    for folder in CONSOLE_STATIC:
        for path in sorted((root / folder).rglob("*")) if (root / folder).is_dir() else ():
            if path.suffix not in (".js", ".json"):
                continue
            text = path.read_text(encoding="utf-8")
            rel = path.relative_to(root).as_posix()
            for word in sorted(health):
                if re.search(rf"\b{re.escape(word)}\b", text):
                    found.append(f"{rel} names the built-in health entry {word!r}")
            if path.suffix == ".json":
                for key in json.loads(text):
                    if key.split(".")[0] in sections:
                        found.append(f"{rel} holds the built-in's word {key!r}")
    return sorted(found)


def test_the_core_names_no_builtin_table_section_or_health_entry() -> None:
    assert core_names_of_builtins() == []


def test_a_core_module_naming_a_builtin_fails(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "function_calls/builtins/notes/__init__.py": "plugin = Plugin('notes')\n"
            "Table('notes_items', metadata)\n"
            "@plugin.health\ndef queue(host, detail):\n    return {'notes_queue': 0}\n",
            "chatfn/runtime/names.py": "def f(settings):\n    return getattr(settings, 'notes')\n"
            "def g(settings):\n    return settings.notes.expose\n",
            "chatfn/storage/console/names.py": '"""The notes_items."""\nT = Table("notes_items")\n',
            "chatfn/channels/http/admin/static/js/pages/overview.js": "data.notes_queue\n",
            "chatfn/channels/http/admin/static/i18n/en.json": '{"notes.title": "Notes"}',
        },
    )
    assert builtin_identities(root) == {
        "section": {"notes"},
        "table": {"notes_items"},
        "health": {"notes_queue"},
    }
    assert core_names_of_builtins(root) == [
        "chatfn.runtime.names:2 names the built-in settings section 'notes'",
        "chatfn.runtime.names:4 names the built-in settings section 'notes'",
        "chatfn.storage.console.names:2 names the built-in table 'notes_items'",
        "chatfn/channels/http/admin/static/i18n/en.json holds the built-in's word 'notes.title'",
        "chatfn/channels/http/admin/static/js/pages/overview.js names the built-in health entry "
        "'notes_queue'",
    ]
