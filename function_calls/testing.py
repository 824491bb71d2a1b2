"""A test harness a plugin author can import: a real Bot on a temporary SQLite file with a
scripted (or any) model, and one call to send a message as anyone, anywhere.

    async def test_my_plugin(tmp_path):
        tb = TestBot(tmp_path, model=ScriptedModel([call("weather", city="Oslo"), say("Sunny")]),
                     plugins=["plugins/weather.py"])
        replies = await tb.send("weather in Oslo?")
        assert "Oslo" in replies[0]
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from function_calls.context import IncomingMessage, OutgoingMessage, StreamObserver
from function_calls.registry import Registry
from providers.base import ChatModel
from runtime.bot import Bot
from runtime.settings import parse_settings

_ids = itertools.count(1)


class TestBot:
    __test__ = False  # not a pytest test class

    def __init__(
        self,
        tmp_path: Path,
        *,
        model: ChatModel | None = None,
        config: dict[str, Any] | None = None,
        plugins: list[str] | None = None,
        registry: Registry | None = None,
        builtins: bool = True,
    ) -> None:
        data = dict(config or {})
        data.setdefault("storage", {"url": f"sqlite:///{tmp_path / 'test.db'}"})
        data.setdefault("plugins", {"paths": plugins or []})
        self.settings = parse_settings(data, base_dir=Path.cwd())
        self.bot = Bot(self.settings, registry=registry, model=model, builtins=builtins)

    async def send(
        self,
        text: str,
        *,
        sender: str = "alice",
        group: str | None = None,
        at_bot: bool = False,
        admin: bool | None = None,
        on_stream: StreamObserver | None = None,
    ) -> list[str]:
        """Send a message and return the texts the bot replied with. With `on_stream`, the bot
        streams as it does to the console or HTTP channel (when the model has `streaming`
        on), and the observer gets each event: text deltas, tool-call start/end."""
        sent = await self.send_raw(
            text, sender=sender, group=group, at_bot=at_bot, admin=admin, on_stream=on_stream
        )
        return [m.text for m in sent]

    async def send_raw(
        self,
        text: str,
        *,
        sender: str = "alice",
        group: str | None = None,
        at_bot: bool = False,
        admin: bool | None = None,
        on_stream: StreamObserver | None = None,
    ) -> list[OutgoingMessage]:
        msg = IncomingMessage(
            platform="test",
            chat_id=group or f"private:{sender}",
            sender_id=sender,
            sender_name=sender,
            text=text,
            is_group=group is not None,
            is_at_bot=at_bot,
            message_id=f"m{next(_ids)}",
            admin_override=admin,
        )
        return await self.bot.handle(msg, self._collect, on_stream=on_stream)

    @staticmethod
    async def _collect(_out: OutgoingMessage) -> None:
        return None

    async def start(self) -> TestBot:
        """Start the bot's services (the reminder scheduler); `send` works without it."""
        await self.bot.start()
        return self

    async def aclose(self) -> None:
        await self.bot.aclose()
