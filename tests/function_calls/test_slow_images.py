"""Issue 34, item 1: slow image downloads stop nothing but their own turns.

Messages carry image URLs on a server that sends a PNG header, declares 5 MB, then one byte a
second for as long as the client stays. More downloads are in flight than asyncio's default
executor has threads (`min(32, cpus + 4)`): when each held a thread (urllib in
`asyncio.to_thread`), a synchronous function, the default executor's other users (the admin
password check, DNS lookups) and a fast image in another chat waited until the slow server let
go. Now the downloads are asynchronous and end at their deadline, and synchronous functions run
on a pool of their own (chatfn/common/blocking.py)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from chatfn.common.messages import IncomingMessage, OutgoingMessage
from chatfn.testing import TestBot
from function_calls import MessageContext, tool_function
from function_calls.registry import Registry
from providers.scripted import ScriptedModel, say
from providers.types import ModelCapabilities
from tests.fakes.images import png
from tests.fakes.slow_files import SlowFiles
from tests.kit import until

VISION = ModelCapabilities(streaming=False, vision=True)
# asyncio's default executor on this machine; two more slow downloads than it has threads.
DEFAULT_THREADS = min(32, (os.cpu_count() or 1) + 4)
SLOW_MESSAGES = (DEFAULT_THREADS + 2 + 3) // 4
PROMPT = 5.0  # seconds within which the other chats are answered


def _registry() -> Registry:
    registry = Registry()
    with registry.collecting():

        @tool_function(name="ping", description="A synchronous function.")
        def ping(ctx: MessageContext) -> str:
            return "pong"

    return registry


def _message(chat: str, text: str, images: list[str] | None = None) -> IncomingMessage:
    return IncomingMessage(
        platform="test",
        chat_id=f"private:{chat}",
        sender_id=chat,
        sender_name=chat,
        text=text,
        message_id=f"{chat}-{time.monotonic_ns()}",
        images=images or [],
    )


async def _send(tb: TestBot, msg: IncomingMessage) -> list[str]:
    async def collect(_out: OutgoingMessage) -> None:
        return None

    sent = await tb.bot.handle(msg, collect)
    return [m.text for m in sent]


async def test_slow_images_do_not_stop_other_chats(tmp_path: Path) -> None:
    model = ScriptedModel([say("hello"), say("a cat")], capabilities=VISION)
    async with SlowFiles(interval=1.0) as files:
        tb = TestBot(
            tmp_path,
            model=model,
            registry=_registry(),
            builtins=False,
            config={"bot": {"fetch": {"allow_networks": ["127.0.0.0/8"]}}},
        )
        slow = []
        for m in range(SLOW_MESSAGES):
            urls = [f"{files.url}/trickle/{m}-{i}.png" for i in range(4)]
            slow.append(asyncio.create_task(_send(tb, _message(f"slow{m}", "look", urls))))
        try:
            await until(
                lambda: files.trickling >= DEFAULT_THREADS, 10, "the slow downloads did not start"
            )
            async with asyncio.timeout(PROMPT):
                assert await _send(tb, _message("carol", "hi")) == ["hello"]
            async with asyncio.timeout(PROMPT):
                assert await _send(tb, _message("dave", "/ping")) == ["pong"]
            async with asyncio.timeout(PROMPT):  # the default executor is free
                assert await asyncio.to_thread(lambda: "free") == "free"
            async with asyncio.timeout(PROMPT):
                cat = _message("erin", "what is it?", [f"{files.url}/cat.png"])
                assert await _send(tb, cat) == ["a cat"]
            user = [m for m in model.requests[-1].messages if m.role == "user"][-1]
            assert [i.data for i in user.images] == [png()]
            assert files.trickling == SLOW_MESSAGES * 4  # all still held by the slow server
        finally:
            await files.stop()  # the slow server lets go: the slow turns fail, quickly
            async with asyncio.timeout(PROMPT):
                answers = await asyncio.gather(*slow)
            await tb.aclose()
    assert answers == [["I could not download that image."]] * SLOW_MESSAGES


async def test_a_trickling_image_ends_at_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A download is bounded in total time, not per read: the turn answers at the deadline
    and the connection is closed (the server sees its client go)."""
    from function_calls import images

    monkeypatch.setattr(images, "TIMEOUT", 0.5)
    model = ScriptedModel([], capabilities=VISION)
    async with SlowFiles(interval=0.05) as files:
        tb = TestBot(
            tmp_path,
            model=model,
            builtins=False,
            config={"bot": {"fetch": {"allow_networks": ["127.0.0.0/8"]}}},
        )
        try:
            started = time.monotonic()
            urls = [f"{files.url}/trickle/{i}.png" for i in range(4)]
            answer = await _send(tb, _message("frank", "look", urls))
            assert time.monotonic() - started < 2
            assert answer == ["I could not download that image."]
            await until(
                lambda: files.trickling == 0 and files.dropped == 4,
                2,
                "the slow downloads did not start",
            )
        finally:
            await tb.aclose()
    assert model.requests == []
