"""check_system.py with Anthropic and Gemini models configured: every registered function's
schema is converted for every configured provider (a Gemini-only refusal names the function
and the provider), the model check builds the native adapters, and `--online` makes a tool
round trip over each native protocol against a local scripted server."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.check_system.test_check_system import BASE, by_name, run
from tests.fakes.protocols import Turn, replies, tool_results
from tests.fakes.raw_replay import RawReplayServer

NATIVE_MODELS = (
    "models:\n"
    "  claude: {provider: anthropic, model: claude-test, api_key: k}\n"
    "  gem: {provider: gemini, model: gemini-test, api_key: k}\n"
)

CLEAN_PLUGIN = """
from enum import Enum
from typing import Literal
from pydantic import BaseModel, Field
from function_calls.registry import tool_function
from function_calls.spec import FunctionResult

class Color(str, Enum):
    red = "red"
    blue = "blue"

class Item(BaseModel):
    name: str
    qty: int = Field(default=1, ge=1)

class OrderArgs(BaseModel):
    items: list[Item]
    color: Color | None = None
    size: Literal["s", "m", "l"] = "m"
    note: str | None = None

@tool_function(name="order", description="Place an order.")
def order(ctx, args: OrderArgs) -> FunctionResult:
    return FunctionResult(llm_content="ok")
"""

RECURSIVE_PLUGIN = """
from pydantic import BaseModel
from function_calls.registry import tool_function
from function_calls.spec import FunctionResult

class Node(BaseModel):
    name: str
    children: list["Node"] = []

class TreeArgs(BaseModel):
    root: Node

@tool_function(name="tree_save", description="Save a tree.")
def tree_save(ctx, args: TreeArgs) -> FunctionResult:
    return FunctionResult(llm_content="ok")
"""


def _plugins(tmp_path: Path, *sources: str) -> None:
    (tmp_path / "plugins").mkdir()
    for i, source in enumerate(sources):
        (tmp_path / "plugins" / f"p{i}.py").write_text(source)


def test_schemas_convert_for_anthropic_and_gemini(tmp_path: Path) -> None:
    _plugins(tmp_path, CLEAN_PLUGIN)
    code, report = run(tmp_path, BASE + NATIVE_MODELS)
    checks = by_name(report)
    assert code == 0, report
    schemas = checks["function schemas"]
    assert schemas["status"] == "ok"
    assert "convert for anthropic, gemini, openai" in schemas["detail"]
    assert "order" in schemas["detail"] and "help" in schemas["detail"]  # built-ins too
    assert checks["model"]["status"] == "ok"
    assert checks["model"]["detail"].startswith("claude: anthropic claude-test")


def test_a_schema_gemini_refuses_fails_naming_function_and_provider(tmp_path: Path) -> None:
    _plugins(tmp_path, CLEAN_PLUGIN, RECURSIVE_PLUGIN)
    code, report = run(tmp_path, BASE + NATIVE_MODELS)
    schemas = by_name(report)["function schemas"]
    assert code == 1 and schemas["status"] == "fail"
    assert "tree_save (gemini): gemini: recursive model 'Node'" in schemas["detail"]
    assert "(anthropic)" not in schemas["detail"] and "order" not in schemas["detail"]


def test_without_gemini_configured_the_recursive_schema_is_fine(tmp_path: Path) -> None:
    _plugins(tmp_path, RECURSIVE_PLUGIN)
    config = BASE + "models:\n  claude: {provider: anthropic, model: claude-test, api_key: k}\n"
    code, report = run(tmp_path, config)
    assert code == 0 and by_name(report)["function schemas"]["status"] == "ok"


async def test_online_round_trip_over_native_protocols(tmp_path: Path) -> None:
    (tmp_path / "plugins").mkdir()
    turns = [Turn(calls=[("get_magic_number", {})]), Turn(text="The magic number is 42.")]
    async with RawReplayServer() as claude, RawReplayServer() as gem:
        claude.queue = list(replies("anthropic", turns, stream=False))
        gem.queue = list(replies("gemini", turns, stream=False))
        config = BASE + (
            "models:\n"
            f"  claude: {{provider: anthropic, model: claude-test, api_key: k, "
            f"base_url: '{claude.url}'}}\n"
            f"  gem: {{provider: gemini, model: gemini-test, api_key: k, "
            f"base_url: '{gem.url}'}}\n"
        )
        code, report = await asyncio.to_thread(run, tmp_path, config, "--online")
    assert code == 0, report
    for name in ("online claude", "online gem"):
        check = by_name(report)[name]
        assert check["status"] == "ok" and "tool round trip" in check["detail"], check
    [anthropic_result] = tool_results("anthropic", claude.received[1].body)
    assert (anthropic_result.call_id, anthropic_result.content) == ("toolu_1_0", "42")
    [gemini_result] = tool_results("gemini", gem.received[1].body)
    assert (gemini_result.name, gemini_result.content) == ("get_magic_number", "42")
    assert gemini_result.is_error is False


LOSSY_PLUGIN = """
from pydantic import BaseModel
from function_calls.registry import tool_function
from function_calls.spec import FunctionResult

class TagArgs(BaseModel):
    labels: dict[str, str]

@tool_function(name="tag", description="Tag things.")
def tag(ctx, args: TagArgs) -> FunctionResult:
    return FunctionResult(llm_content="ok")
"""


def test_a_lossy_gemini_rewrite_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    _plugins(tmp_path, LOSSY_PLUGIN)
    code, report = run(tmp_path, BASE + NATIVE_MODELS)
    schemas = by_name(report)["function schemas"]
    assert code == 0 and schemas["status"] == "warn"
    assert schemas["detail"].startswith("accepted, but: tag (gemini)")
