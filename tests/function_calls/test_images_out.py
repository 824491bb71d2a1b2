"""A function's images reach the chat: `FunctionResult.images` go with its last message (or
alone), through the outbox (kept across a restart, as the text is), and are noted in the
history. The platforms' own image messages are tested by the channel contract."""

from __future__ import annotations

from pathlib import Path

from chatfn.testing import TestBot
from function_calls import FunctionResult, MessageContext, tool_function
from function_calls.registry import Registry

URL = "https://example.com/cat.png"
INLINE = "data:image/png;base64,iVBORw0KGgo="


def _registry() -> Registry:
    registry = Registry()
    with registry.collecting():

        @tool_function(name="cats", description="Two captions and two pictures.")
        def cats(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=["first", "second"], images=[URL, INLINE])

        @tool_function(name="bare", description="A picture alone.")
        def bare(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(images=[URL])

    return registry


async def test_images_go_with_the_last_message_and_survive_in_the_outbox(
    tmp_path: Path,
) -> None:
    tb = TestBot(tmp_path, registry=_registry())
    try:
        sent = await tb.send_raw("/cats")
        assert [(m.text, m.images) for m in sent] == [("first", []), ("second", [URL, INLINE])]
        [alone] = await tb.send_raw("/bare")
        assert (alone.text, alone.images) == ("", [URL])
        kept = [out for out, _state in await tb.bot.outbox.since(0)]
        assert [(m.text, m.images) for m in kept] == [
            ("first", []),
            ("second", [URL, INLINE]),
            ("", [URL]),
        ]
        rows = tb.bot.storage.recent_messages("test", "private:alice", 10)
        texts = [r.text for r in rows if r.role == "assistant"]
        assert texts[1] == f"second\n[image: {URL}]\n[image: image/png, 9 bytes inline]"
        assert texts[2] == f"[image: {URL}]"
    finally:
        await tb.aclose()
