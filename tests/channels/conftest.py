"""Fixtures for channel tests: a real Bot on a temporary SQLite file, with test functions on a
fresh Registry and a scripted model, and a OneBot channel listening on a free port."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from loguru import logger
from pydantic import BaseModel

from chatfn.channels.onebot.channel import OneBotChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from function_calls.context import MessageContext
from function_calls.registry import Registry, tool_function
from function_calls.spec import FunctionResult
from providers.base import ChatModel
from tests.fakes.images import png
from tests.fakes.raw_replay import RawReplayServer
from tests.kit import serve  # noqa: F401 - the channel tests' old address for it

# The contract kit holds the asserts of every channel's contract tests: shown in full.
pytest.register_assert_rewrite("tests.channels.contract")

TOKEN = "sim-secret-token"


@pytest.fixture
def logs() -> Iterator[list[str]]:
    """The log lines written while the test runs, INFO and up, as "LEVEL message"."""
    lines: list[str] = []
    sink = logger.add(
        lambda m: lines.append(str(m).rstrip()), level="INFO", format="{level} {message}"
    )
    yield lines
    logger.remove(sink)


ESSAY = [f"line {i:03d} " + "x" * 40 for i in range(60)]


class RollArgs(BaseModel):
    sides: int = 6


class EchoArgs(BaseModel):
    text: str


def make_registry() -> Registry:
    """Functions the channel tests trigger: `roll` (through the model), `echo` and `quote`
    (slash commands, no model)."""
    registry = Registry()
    with registry.collecting():

        @tool_function(description="Roll a die with the given number of sides.")
        async def roll(ctx: MessageContext, args: RollArgs) -> FunctionResult:
            return FunctionResult(
                messages=[f"rolled a d{args.sides}: {args.sides}"], at=ctx.message.sender_id
            )

        @tool_function(description="Repeat the text.")
        async def echo(ctx: MessageContext, args: EchoArgs) -> FunctionResult:
            return FunctionResult(messages=[args.text])

        @tool_function(description="Write a long text (60 lines of 50 characters).")
        async def essay(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=["\n".join(ESSAY)], at=ctx.message.sender_id)

        @tool_function(description="Show the quoted message.")
        async def quote(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=[f"quoted: {ctx.message.quoted_text}"])

    return registry


MakeOneBot = Callable[..., Awaitable[tuple[Bot, OneBotChannel, str]]]


@pytest.fixture
async def make_onebot(tmp_path: Path) -> AsyncIterator[MakeOneBot]:
    """`bot, channel, url = await make_onebot(model=..., bot_config={...}, **onebot_settings)`
    (`bot_config`: more `bot:` keys, such as `LOCAL_MEDIA`)."""
    made: list[tuple[Bot, OneBotChannel]] = []

    async def make(
        model: ChatModel | None = None, *, bot_config: dict[str, Any] | None = None, **onebot: Any
    ) -> tuple[Bot, OneBotChannel, str]:
        cfg = {
            "host": "127.0.0.1",
            "port": 0,
            "access_token": TOKEN,
            "send_rate": 0,
            "reconnect_wait": 2.0,
            "action_timeout": 2.0,
            **onebot,
        }
        settings = parse_settings(
            {
                "storage": {"url": f"sqlite:///{tmp_path / f'onebot{len(made)}.db'}"},
                "plugins": {"paths": []},
                # Replies compared as plain text; mention and quote have their own test.
                "bot": {"name": "simbot", "reply_with_mention": False, **(bot_config or {})},
                "channels": {"onebot": cfg},
            },
            base_dir=tmp_path,
        )
        bot = Bot(
            settings, registry=make_registry(), model=model, builtins=False, load_plugins=False
        )
        channel = OneBotChannel(bot.channel_host)
        await channel.start()
        made.append((bot, channel))
        return bot, channel, f"ws://127.0.0.1:{channel.bound_port}/onebot/v11/ws"

    yield make
    for bot, channel in made:
        await channel.stop()
        await bot.aclose()


@pytest.fixture
async def server() -> AsyncIterator[RawReplayServer]:
    """A replay server on 127.0.0.1 that can also cut a stream off (`raw` handlers)."""
    async with RawReplayServer() as srv:
        yield srv


# `bot:` keys that let the bot fetch images from the test servers on 127.0.0.1 (internal
# addresses are refused unless `bot.fetch` allows them: chatfn/common/fetch.py).
LOCAL_MEDIA: dict[str, Any] = {"fetch": {"allow_networks": ["127.0.0.0/8"]}}


@pytest.fixture
async def files() -> AsyncIterator[str]:
    async def cat(_r: web.Request) -> web.Response:
        return web.Response(body=png(), content_type="image/png")

    async def page(_r: web.Request) -> web.Response:
        return web.Response(text="<html>not an image</html>", content_type="text/html")

    async def huge(_r: web.Request) -> web.Response:
        return web.Response(
            body=b"\x89PNG\r\n\x1a\n" + b"0" * (6 * 1024 * 1024), content_type="image/png"
        )

    app = web.Application()
    app.router.add_get("/cat.png", cat)
    app.router.add_get("/page", page)
    app.router.add_get("/huge.png", huge)
    runner, port = await serve(app)
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A real Synapse homeserver (matrix-synapse, tests/channels/matrix/synapse_server.py), started
    once for the session: the Matrix channel's tests (marker `services`). Not installed or not
    starting: skipped with the reason, but failed under CI=true (CI installs it)."""
    import os

    from tests.channels.matrix.synapse_server import Synapse

    def unavailable(reason: str) -> None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI=true installs matrix-synapse, so this is a failure")
        pytest.skip(reason)

    try:
        import synapse  # noqa: F401
    except ImportError as exc:
        unavailable(f"matrix-synapse is not installed ({exc})")
    server = Synapse(tmp_path_factory.mktemp("synapse"))
    try:
        server.start()
    except RuntimeError as exc:
        unavailable(f"Synapse did not start: {exc}")
    yield server
    server.stop()
