"""What a person reads in a `language: zh` chat when a command goes wrong: the validation
message (prefix and pydantic's problem), a refusal ending in "。", and web search's reason."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from chatfn.testing import TestBot
from function_calls.builtins.web_search.client import SearchError
from function_calls.context import MessageContext
from function_calls.registry import Registry, tool_function
from function_calls.spec import FunctionResult


class CountArgs(BaseModel):
    n: int = Field(ge=1, le=5)


def _registry() -> Registry:
    registry = Registry()
    with registry.collecting():

        @tool_function(description="Count to n.")
        async def count(ctx: MessageContext, args: CountArgs) -> FunctionResult:
            return FunctionResult(messages=[str(args.n)])

        @tool_function(description="Admins only.", admin_only=True)
        async def secret(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=["s"])

    return registry


async def test_invalid_arguments_and_refusals_in_chinese(tmp_path: Path) -> None:
    tb = TestBot(tmp_path, config={"bot": {"language": "zh"}}, registry=_registry(), builtins=False)
    try:
        [bad] = await tb.send("/count n=9")
        assert bad.startswith("/count 的参数无效：n: 应不大于 5。\n用法："), bad
        [word] = await tb.send("/count n=many")
        assert word.startswith("/count 的参数无效：n: 应为整数。"), word
        [refused] = await tb.send("/secret")
        assert refused == "secret 仅限管理员使用。"
    finally:
        await tb.aclose()


async def test_the_same_in_english(tmp_path: Path) -> None:
    tb = TestBot(tmp_path, registry=_registry(), builtins=False)
    try:
        [bad] = await tb.send("/count n=9")
        assert bad.startswith("Invalid arguments for count: n: Input should be less than or equal")
        assert (await tb.send("/secret")) == ["secret is for admins only."]
    finally:
        await tb.aclose()


def test_web_search_reasons_in_both_languages() -> None:
    err = SearchError("auth", status=401)
    assert str(err).startswith("the search service rejected the API key (401)")
    assert err.text("zh") == "搜索服务拒绝了 API 密钥（401），请检查 web_search.api_key"
    assert SearchError("timeout").text("zh") == "搜索服务没有及时响应"


async def test_chat_admin_replies_in_chinese(tmp_path: Path) -> None:
    from providers.scripted import ScriptedModel

    config = {
        "bot": {"language": "zh", "admins": ["boss"]},
        "models": {"a": {"provider": "openai", "model": "m", "api_key": "k" * 8}},
    }
    tb = TestBot(tmp_path, config=config, model=ScriptedModel([]))
    try:
        assert await tb.send("/model nope", sender="boss") == [
            "没有名为 'nope' 的模型。已配置：a, scripted。"
        ]
        assert await tb.send("/reset", sender="boss") == [
            "已重新开始：我不会再看到此前在这里说过的内容。"
        ]
        [settings] = await tb.send("/settings", sender="boss")
        assert settings.startswith("private:boss 的设置：") and "全部" in settings
        [stats] = await tb.send("/stats", sender="boss")
        assert stats.startswith("private:boss 的统计：\n今天：")
    finally:
        await tb.aclose()
