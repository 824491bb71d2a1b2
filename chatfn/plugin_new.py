"""`chatfn plugin new NAME`: a plugin package skeleton that installs and passes its own test as
written: pyproject.toml with the `chatfn.plugins` entry point, one function, its test on the
`testbot` fixture, and a README. tests/chatfn/test_plugin_cli.py builds its wheel, installs it
into a fresh environment and runs that test there."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.version import Version

from chatfn.common.version import __version__

NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")

PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "{name}: a chatfn plugin."
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["chatfn{range}"]

[project.optional-dependencies]
test = ["pytest>=8.0", "pytest-asyncio>=0.23"]

# How chatfn finds the plugin once it is installed (chatfn/runtime/plugin_registry.py).
[project.entry-points."chatfn.plugins"]
{name} = "{module}"

[tool.setuptools]
packages = ["{module}"]

[tool.pytest.ini_options]
asyncio_mode = "auto"
asyncio_default_fixture_loop_scope = "function"
testpaths = ["tests"]
"""

MODULE = '''\
"""{name}: a chatfn plugin. Its functions are the model's tools and slash commands."""

from pydantic import BaseModel, Field

from function_calls import FunctionResult, MessageContext, Plugin, tool_function

plugin = Plugin(
    "{name}",
    description="Greets people.",
    chatfn="{range}",
    # What it asks for, shown before `chatfn plugin install` installs it: any of
    # "network", "filesystem", "admin", "model".
    permissions=(),
)


class HelloArgs(BaseModel):
    who: str = Field(default="world", description="Whom to greet")


@tool_function(
    name="{name}_hello",
    description="Greet someone by name.",
    examples=["/{name}_hello who=Ada"],
)
async def hello(ctx: MessageContext, args: HelloArgs) -> FunctionResult:
    return FunctionResult(messages=[f"Hello, {{args.who}}!"])
'''

TEST = '''\
"""The plugin, installed, in a real bot (the `testbot` fixture comes with chatfn)."""


async def test_hello(testbot):
    tb = await testbot()
    assert "{name}" in {{p.name for p in tb.bot.plugins}}
    assert await tb.send("/{name}_hello who=Ada") == ["Hello, Ada!"]
'''

README = """\
# {dist}

A chatfn plugin: `/{name}_hello who=Ada`, or ask the model to greet someone.

    pip install -e ".[test]"      # or: chatfn plugin install .  (in the bot's environment)
    python -m pytest               # the plugin's test on chatfn's testbot fixture

chatfn finds it through its `chatfn.plugins` entry point (pyproject.toml) at start;
`plugins.disabled: [{name}]` in the bot's config leaves it out. `chatfn check` shows it.
"""


def default_range(version: str = __version__) -> str:
    """`>=X.Y,<X.(Y+1)` of the running chatfn: what a new plugin is written against."""
    v = Version(version)
    return f">={v.major}.{v.minor},<{v.major}.{v.minor + 1}"


def write_skeleton(name: str, where: Path) -> Path:
    """Write the package folder `chatfn-<name>` under `where`; ValueError for a bad name or a
    folder that exists (never overwritten)."""
    if not NAME.match(name):
        raise ValueError(
            f"plugin name {name!r}: lower-case letters, digits and _, starting with a letter"
        )
    dist = f"chatfn-{name.replace('_', '-')}"
    module = f"chatfn_{name}"
    root = where / dist
    if root.exists():
        raise ValueError(f"{root} exists already")
    fill = {"name": name, "dist": dist, "module": module, "range": default_range()}
    (root / module).mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT.format(**fill), encoding="utf-8")
    (root / module / "__init__.py").write_text(MODULE.format(**fill), encoding="utf-8")
    (root / "tests" / f"test_{name}.py").write_text(TEST.format(**fill), encoding="utf-8")
    (root / "README.md").write_text(README.format(**fill), encoding="utf-8")
    return root
