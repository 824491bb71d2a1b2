"""The `testbot` fixture works the way README shows under pytest-asyncio's default (strict)
mode too (issue 39, "No surprises"): a plugin author's project with no asyncio setting runs
`async def test_x(testbot)` instead of skipping it as "not natively supported"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PLUGIN = """
from pydantic import BaseModel
from function_calls import FunctionResult, MessageContext, tool_function


class Args(BaseModel):
    name: str


@tool_function(name="hello", description="Greet someone.", scope="both")
async def hello(ctx: MessageContext, args: Args) -> FunctionResult:
    return FunctionResult(messages=[f"hi {args.name}"])
"""

TESTS = """
import pytest


async def test_hello(testbot):
    tb = await testbot(plugins=["plugins/hello.py"])
    assert await tb.send("/hello Ann") == ["hi Ann"]


async def test_without_the_fixture_is_left_to_the_asyncio_mode():
    pass
"""


def test_testbot_runs_in_pytest_asyncios_strict_mode(tmp_path: Path) -> None:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "hello.py").write_text(PLUGIN)
    (tmp_path / "test_hello.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = strict\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:xdist", "-rA"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert "PASSED test_hello.py::test_hello" in out, out
    # a coroutine test without testbot is still pytest-asyncio's business (strict: not run)
    assert "test_without_the_fixture_is_left_to_the_asyncio_mode" in out
    assert "PASSED test_hello.py::test_without" not in out
