"""AutoToolsModel: one downgrade on ToolsNotSupported, for good; never for native_tools true."""

from __future__ import annotations

import pytest

from providers.base import collect
from providers.errors import ProviderBadRequest, ToolsNotSupported
from providers.text_tools.downgrade import AutoToolsModel
from providers.types import Message, ToolDefinition

from .fake_model import FakeModel

TOOL = ToolDefinition("f", "Do f.", {"type": "object", "properties": {}})
MSGS = [Message(role="user", content="do f")]
CALL = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'


@pytest.mark.parametrize("mode", [True, False])
def test_only_auto_models_can_be_wrapped(mode) -> None:
    with pytest.raises(ValueError):
        AutoToolsModel(FakeModel([], native_tools=mode))


async def test_native_calls_pass_through_while_supported() -> None:
    inner = FakeModel(["plain"], native_tools="auto")
    model = AutoToolsModel(inner)
    assert (await model.complete(MSGS, [TOOL])).content == "plain"
    assert inner.sent[0][1] == [TOOL] and not model.downgraded


async def test_downgrade_once_retries_the_same_request_and_stays(monkeypatch) -> None:
    warnings: list[str] = []
    from providers.text_tools import downgrade

    monkeypatch.setattr(downgrade.logger, "warning", lambda msg, *a: warnings.append(msg))
    inner = FakeModel([CALL, CALL], native_tools="auto", refuse_tools=True)
    model = AutoToolsModel(inner)
    first = await model.complete(MSGS, [TOOL])
    assert model.downgraded and [c.name for c in first.tool_calls] == ["f"]
    # the refused native request, then the same request in prompt mode
    assert [tools for _, tools in inner.sent] == [[TOOL], None]
    assert inner.sent[1][0][-1].content == "do f"
    second = await collect(model.stream(MSGS, [TOOL]))
    assert [c.name for c in second.tool_calls] == ["f"]
    assert [tools for _, tools in inner.sent] == [[TOOL], None, None]  # no native retry
    assert len(warnings) == 1
    assert model.capabilities.native_tools is False


async def test_streaming_request_is_downgraded_and_retried() -> None:
    inner = FakeModel([CALL], native_tools="auto", refuse_tools=True)
    model = AutoToolsModel(inner)
    response = await collect(model.stream(MSGS, [TOOL]))
    assert model.downgraded and [c.name for c in response.tool_calls] == ["f"]


async def test_other_errors_do_not_downgrade() -> None:
    inner = FakeModel([], native_tools="auto")

    async def refuse(messages, tools=None):
        raise ProviderBadRequest("context too long", status=400)

    inner.complete = refuse  # type: ignore[method-assign]
    model = AutoToolsModel(inner)
    with pytest.raises(ProviderBadRequest):
        await model.complete(MSGS, [TOOL])
    assert not model.downgraded


async def test_tools_not_supported_without_tools_is_not_a_reason_to_downgrade() -> None:
    inner = FakeModel([], native_tools="auto")

    async def refuse(messages, tools=None):
        raise ToolsNotSupported("odd", status=400)

    inner.complete = refuse  # type: ignore[method-assign]
    model = AutoToolsModel(inner)
    with pytest.raises(ToolsNotSupported):
        await model.complete(MSGS, None)
    assert not model.downgraded
