"""The WeCom channel in `mode: aibot` beyond the contract: the stream growing as the model
writes and finishing with the answer (WeCom's refresh callbacks), one stream per msgid
across redeliveries, the response_url for what does not fit the stream (once per URL), and
the callback's refusals with the robot's receive id ""."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("cryptography")

from chatfn.common.messages import DeliveryRefused, OutgoingMessage  # noqa: E402
from chatfn.runtime.bot import Bot  # noqa: E402
from chatfn.runtime.settings import parse_settings  # noqa: E402
from chatfn.testing import ScriptedModel  # noqa: E402
from providers.types import LLMResponse, ModelCapabilities, Usage  # noqa: E402
from tests.channels.contract import _echo, contract_registry  # noqa: E402
from tests.channels.wecom.wecom_driver import AibotDriver  # noqa: E402
from tests.channels.wecom.wecom_fake import FakeAibot  # noqa: E402
from tests.kit import until  # noqa: E402


class SlowStreamingModel(ScriptedModel):
    """Streams "partial " at once and the rest once `gate` is set."""

    def __init__(self, gate: asyncio.Event) -> None:
        super().__init__([_echo], repeat_last=True, capabilities=ModelCapabilities(streaming=True))
        self.gate = gate

    async def stream(self, messages: Sequence[Any], tools: Any = None) -> Any:
        from chatfn.common.messages import StreamEvent

        yield StreamEvent(type="text", text="partial ")
        await self.gate.wait()
        yield StreamEvent(type="text", text="rest")
        response = LLMResponse(content="partial rest", finish_reason="stop", usage=Usage(1, 1))
        yield StreamEvent(type="done", response=response)


async def user_texts(bot: Bot, chat_id: str) -> list[str]:
    from sqlalchemy import select

    from chatfn.storage.models import messages_table as m

    query = select(m.c.text).where(
        m.c.platform == "wecom", m.c.chat_id == chat_id, m.c.role == "user"
    )

    def read() -> list[str]:
        with bot.storage.engine.connect() as conn:
            return [r.text for r in conn.execute(query)]

    return await bot.storage.run(read)


@pytest.fixture
async def fake() -> AsyncIterator[FakeAibot]:
    async with FakeAibot() as server:
        yield server


async def start(fake: FakeAibot, tmp_path: Path, model: Any = None) -> tuple[AibotDriver, Bot]:
    driver = AibotDriver(fake)
    settings = parse_settings(
        {
            "bot": {"fetch": {"allow_networks": ["127.0.0.0/8"]}},  # the local WeCom's images
            "storage": {"url": f"sqlite:///{tmp_path / 'aibot.db'}"},
            "plugins": {"paths": []},
            "channels": {"wecom": driver.channel_settings()},
        },
        base_dir=tmp_path,
    )
    bot = Bot(
        settings,
        registry=contract_registry(),
        model=model or ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    await driver.attach(bot.channel_host, settings.channels.wecom)  # type: ignore[attr-defined]
    await bot.start()
    return driver, bot


@pytest.fixture
async def robot(fake: FakeAibot, tmp_path: Path) -> AsyncIterator[tuple[AibotDriver, Bot]]:
    driver, bot = await start(fake, tmp_path)
    try:
        yield driver, bot
    finally:
        await driver.detach()
        await bot.aclose()


async def test_the_stream_grows_then_finishes_with_the_answer(
    fake: FakeAibot, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    driver, bot = await start(fake, tmp_path, SlowStreamingModel(gate))
    try:
        assert await fake.say(fake.message("u1", "tell me")) == 200
        await until(lambda: any(f["stream"]["content"] for f in fake.streams_seen), 10)
        partial = next(f for f in fake.streams_seen if f["stream"]["content"])
        assert partial["stream"]["finish"] is False
        assert partial["stream"]["content"].startswith("partial")
        gate.set()
        [answer] = await fake.wait_sent("u1", 1)
        assert answer.content == "partial rest"
        assert fake.streams_seen[-1]["stream"]["finish"] is True
        assert len({f["stream"]["id"] for f in fake.streams_seen}) == 1
    finally:
        await driver.detach()
        await bot.aclose()


async def test_a_redelivered_msgid_is_one_stream(robot: tuple[AibotDriver, Bot]) -> None:
    driver, bot = robot
    fake = driver.fake
    message = fake.message("u2", "once")
    answers = []
    for _ in range(3):  # WeCom's tries of one msgid (each signed afresh)
        query, body = fake.sealed_json(message)
        status, text = await fake.post(query, body)
        assert status == 200
        answers.append(fake.read_answer(query, text))
    assert len({a["stream"]["id"] for a in answers if a is not None}) == 1
    stream = driver.channel.open_streams.by_msgid[message["msgid"]]
    await until(lambda: stream.finished, 5)
    assert stream.content == "echo: once"
    assert await user_texts(bot, "private:u2") == ["once"]


async def test_forged_and_foreign_callbacks_are_refused(robot: tuple[AibotDriver, Bot]) -> None:
    fake = robot[0].fake
    assert await fake.verify_url("echo-42") == (200, "echo-42")
    assert (await fake.verify_url("echo-42", forge=True))[0] == 401
    query, body = fake.sealed_json(fake.message("u3", "hi"))
    assert (await fake.post({**query, "msg_signature": "0" * 40}, body))[0] == 401
    assert (await fake.post(query, "not json"))[0] == 400
    fake.crypt.receive_id = fake.corp_id  # the app's receive id, not the robot's ""
    query, body = fake.sealed_json(fake.message("u3", "hi"))
    fake.crypt.receive_id = ""
    assert (await fake.post(query, body))[0] == 401
    assert fake.sent == {}


async def test_what_does_not_fit_the_stream_goes_to_the_response_url_once(
    robot: tuple[AibotDriver, Bot],
) -> None:
    driver, _ = robot
    fake = driver.fake
    message = fake.message("u4", "first", group="g4")
    assert await fake.say(message) == 200
    [answer] = await fake.wait_sent("g4", 1)
    assert answer.msgtype == "stream" and answer.content == "echo: first"
    channel = driver.channel
    # A reminder in the chat: the newest message's response_url, once.
    await channel.send(OutgoingMessage("wecom", "group:g4", "a **reminder**", is_group=True))
    sent = await fake.wait_sent("g4", 2)
    assert (sent[1].msgtype, sent[1].content) == ("markdown", "a **reminder**")
    with pytest.raises(DeliveryRefused, match="no message of group:g4 left"):
        await channel.send(OutgoingMessage("wecom", "group:g4", "another", is_group=True))


async def test_a_long_answer_fills_the_stream_then_the_response_url(
    fake: FakeAibot, tmp_path: Path
) -> None:
    from tests.channels.held_model import HeldModel

    driver, bot = await start(fake, tmp_path, HeldModel(_echo, asyncio.Event()))
    try:
        message = fake.message("u5", "hold")  # the model's own answer never comes
        query, body = fake.sealed_json(message)
        status, text = await fake.post(query, body)
        assert status == 200 and fake.read_answer(query, text) is not None
        long = "\n\n".join(["长" * 5000] * 2)  # 30000 bytes: two parts
        out = OutgoingMessage("wecom", "private:u5", long, reply_to=str(message["msgid"]))
        await driver.channel.send(out)
        stream = driver.channel.open_streams.by_msgid[message["msgid"]]
        assert stream.finished and stream.content == "长" * 5000
        [rest] = await fake.wait_sent("u5", 1)
        assert rest.msgtype == "markdown" and rest.content == "长" * 5000
    finally:
        await driver.detach()
        await bot.aclose()


async def test_images_are_fetched_and_decrypted(robot: tuple[AibotDriver, Bot]) -> None:
    from tests.channels.contract import PNG

    driver, bot = robot
    fake = driver.fake
    assert await fake.say(fake.image_message("u6", PNG, "look at this")) == 200
    await fake.wait_sent("u6", 1)
    [text] = await user_texts(bot, "private:u6")
    assert text.startswith("look at this") and "[image: " in text
    assert await fake.say(fake.image_message("u7", PNG)) == 200
    await fake.wait_sent("u7", 1)
    assert "[image: " in (await user_texts(bot, "private:u7"))[0]
    # A file that is not encrypted with the robot's key: not read, the text still is.
    message = fake.image_message("u8", PNG, "and this")
    fake.plain_images.update(fake.media)
    assert await fake.say(message) == 200
    await fake.wait_sent("u8", 1)
    assert await user_texts(bot, "private:u8") == ["and this"]
