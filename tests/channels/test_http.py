"""The HTTP channel's input checks."""

from __future__ import annotations

from pathlib import Path

from aiohttp import ClientSession

from channels.http import HttpChannel
from function_calls.testing import TestBot


async def test_http_chat_name_is_bounded_like_the_other_fields(tmp_path: Path) -> None:
    tb = TestBot(tmp_path, builtins=False)
    channel = HttpChannel(tb.bot, host="127.0.0.1", port=0)
    await channel.start()
    try:
        async with ClientSession() as http:
            resp = await http.post(
                f"http://127.0.0.1:{channel.bound_port}/v1/messages",
                json={
                    "chat_id": "group:x",
                    "sender_id": "a",
                    "text": "hi",
                    "is_group": True,
                    "chat_name": "n" * 5000,
                },
            )
            assert resp.status == 400
            assert (await resp.json())["field"] == "chat_name"
    finally:
        await channel.stop()
        await tb.bot.aclose()
