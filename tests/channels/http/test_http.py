"""The HTTP channel's input checks."""

from __future__ import annotations

import re
from pathlib import Path

from aiohttp import ClientSession

from chatfn.channels.http.channel import HttpChannel
from chatfn.testing import TestBot
from tests.kit import until


async def test_http_chat_name_is_bounded_like_the_other_fields(tmp_path: Path) -> None:
    tb = TestBot(tmp_path, builtins=False)
    channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
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


async def test_page_labels_follow_bot_language_and_images_alone_are_a_message(
    tmp_path: Path,
) -> None:
    tb = TestBot(tmp_path, config={"bot": {"language": "zh"}}, builtins=False)
    channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
    await channel.start()
    base = f"http://127.0.0.1:{channel.bound_port}"
    try:
        async with ClientSession() as http:
            page = await (await http.get(f"{base}/")).text()
            assert '<html lang="zh">' in page and '"web.send": "发送"' in page
            assert "/*LABELS*/" not in page
            english = await (await http.get(f"{base}/?lang=en")).text()
            assert '"web.send": "Send"' in english
            # no text and no image: refused naming the field; an image alone is accepted
            body = {"chat_id": "c", "sender_id": "a", "text": " "}
            resp = await http.post(f"{base}/v1/messages", json=body)
            assert resp.status == 400 and (await resp.json())["field"] == "text"
            body = {"chat_id": "c", "sender_id": "a", "images": ["data:image/png;base64,x"]}
            resp = await http.post(f"{base}/v1/messages", json=body)
            assert resp.status == 200
    finally:
        await channel.stop()
        await tb.bot.aclose()


async def test_web_page_runs_only_script_files_of_its_own_origin(tmp_path: Path) -> None:
    tb = TestBot(tmp_path, builtins=False)
    channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
    await channel.start()
    base = f"http://127.0.0.1:{channel.bound_port}"
    try:
        async with ClientSession() as http:
            resp = await http.get(f"{base}/")
            policy = resp.headers["Content-Security-Policy"]
            directives = {d.split()[0]: d.split()[1:] for d in policy.split(";") if d.strip()}
            assert directives["script-src"] == ["'self'"], policy
            assert directives["object-src"] == ["'none'"] and directives["base-uri"] == ["'none'"]
            scripts = re.findall(r"<script\b([^>]*)>", await resp.text(), re.IGNORECASE)
            sources = [re.search(r'src="([^"]+)"', s) for s in scripts]
            # Every script is a file of this origin; the labels are a JSON block (data).
            assert [m.group(1) for m in sources if m] == [
                "/vendor/purify.min.js",
                "/vendor/marked.umd.js",
                "/js/chat.js",
            ]
            assert [s for s, m in zip(scripts, sources, strict=True) if not m] == [
                ' type="application/json" id="labels"'
            ]
            code = await http.get(f"{base}/js/chat.js")
            assert code.status == 200 and "javascript" in code.headers["Content-Type"]
            assert "JSON.parse" in await code.text()
    finally:
        await channel.stop()
        await tb.bot.aclose()


async def test_healthz_shows_a_channel_whose_credentials_are_refused_as_down(
    tmp_path: Path,
) -> None:
    """Issue 39: a platform that refuses the bot's credentials leaves its channel down, and
    /healthz says so and why; the HTTP channel itself stays up."""
    import asyncio

    from chatfn.channels.kit import CredentialsRefused, PlatformChannel
    from chatfn.common.config import Section
    from chatfn.common.messages import OutgoingMessage

    class Refusing(PlatformChannel[Section]):
        platform = "refusing"
        label = "Refusing"

        async def connect(self) -> None:
            raise CredentialsRefused("Refusing refused channels.refusing.token: check it")

        async def deliver(self, message: OutgoingMessage) -> None:
            raise AssertionError("never connected")

    tb = TestBot(tmp_path, builtins=False)
    http = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
    refusing = Refusing(tb.bot.channel_host, Section())
    await http.start()
    running = asyncio.create_task(refusing.run())
    try:
        await until(lambda: refusing.refusals, 5, "the refusing channel was never refused")
        async with ClientSession() as client:
            resp = await client.get(f"http://127.0.0.1:{http.bound_port}/healthz")
            health = await resp.json()
        assert resp.status == 200 and health["status"] == "ok"
        [state] = [c for c in health["channels"] if c["name"] == "refusing"]
        assert state["connected"] is False
        assert "refused channels.refusing.token" in state["detail"]
        assert not running.done()  # retried slowly, not given up
    finally:
        await refusing.stop()
        await running
        await http.stop()
        await tb.bot.aclose()
