"""Images posted to the HTTP API reach each provider protocol's request body in its own form,
through the real SDKs (openai, anthropic, google-genai) to a local server scripting the model;
a download that is not an image, or too large, gets a short reply; `bot.vision_model` describes
an image for a chat model without vision."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession

from chatfn.channels.http.channel import HttpChannel
from chatfn.common.config import ConfigError
from chatfn.testing import TestBot
from providers.factory import build_model
from providers.scripted import ScriptedModel, say
from tests.channels.conftest import LOCAL_MEDIA
from tests.fakes.images import png
from tests.fakes.protocols import Protocol, Turn, model_config, replies
from tests.fakes.raw_replay import RawReplayServer
from tests.fakes.slow_files import SlowFiles

DATA_URI = "data:image/png;base64," + base64.b64encode(png()).decode()
B64 = base64.b64encode(png()).decode()


async def _post(tb: TestBot, body: dict[str, Any]) -> dict[str, Any]:
    channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
    await channel.start()
    try:
        async with ClientSession() as http:
            resp = await http.post(
                f"http://127.0.0.1:{channel.bound_port}/v1/messages",
                json={"chat_id": "private:alice", "sender_id": "alice", **body},
            )
            assert resp.status == 200, await resp.text()
            return await resp.json()
    finally:
        await channel.stop()


def _images_in(protocol: Protocol, body: dict[str, Any]) -> list[Any]:
    """The image parts of the last user turn, read in the protocol's own shape."""
    if protocol in ("openai", "deepseek"):
        content = body["messages"][-1]["content"]
        return [p for p in content if p["type"] == "image_url"]
    if protocol == "anthropic":
        return [b for b in body["messages"][-1]["content"] if b["type"] == "image"]
    parts = body["contents"][-1]["parts"]
    return [p.get("inline_data") or p.get("inlineData") for p in parts if "text" not in p]


@pytest.mark.parametrize("protocol", ["openai", "anthropic", "gemini"])
async def test_http_image_reaches_each_protocol_in_its_form(
    tmp_path: Path, server: RawReplayServer, files: str, protocol: Protocol
) -> None:
    server.queue = list(replies(protocol, [Turn(text="Two small squares.")], stream=False))
    cfg = model_config(protocol, server.url, thinking=False).model_copy(update={"vision": True})
    tb = TestBot(
        tmp_path, model=build_model("eyes", cfg), builtins=False, config={"bot": LOCAL_MEDIA}
    )
    try:
        out = await _post(tb, {"text": "what are these?", "images": [DATA_URI, f"{files}/cat.png"]})
    finally:
        await tb.aclose()
    assert out["replies"] == [{"text": "Two small squares.", "at": None}]
    [body] = server.bodies()
    images = _images_in(protocol, body)
    if protocol == "openai":
        assert images == [{"type": "image_url", "image_url": {"url": DATA_URI}}] * 2
    elif protocol == "anthropic":
        source = {"type": "base64", "media_type": "image/png", "data": B64}
        # The newest turn's last block carries the prompt-cache breakpoint.
        assert images[-1].pop("cache_control") == {"type": "ephemeral"}
        assert images == [{"type": "image", "source": source}] * 2
    else:
        mime = [i.get("mime_type") or i.get("mimeType") for i in images]
        assert mime == ["image/png"] * 2
        # google-genai writes bytes as URL-safe base64; the API accepts both alphabets
        assert [base64.urlsafe_b64decode(i["data"]) for i in images] == [png()] * 2
    # the question still travels with the images
    assert "what are these?" in str(body)


@pytest.mark.parametrize(
    "path,expected",
    [("/page", "not an image I can read"), ("/huge.png", "too large (more than 5 MB)")],
)
async def test_http_bad_download_gets_a_short_reply(
    tmp_path: Path, files: str, path: str, expected: str
) -> None:
    model = ScriptedModel([say("never")])
    model.capabilities.vision = True
    tb = TestBot(tmp_path, model=model, builtins=False, config={"bot": LOCAL_MEDIA})
    try:
        out = await _post(tb, {"text": "look", "images": [f"{files}{path}"]})
    finally:
        await tb.aclose()
    [reply] = out["replies"]
    assert expected in reply["text"] and len(reply["text"]) < 100
    assert model.requests == []


async def test_internal_image_urls_are_refused_alike(tmp_path: Path) -> None:
    """Issue 34, item 2: loopback in any spelling, a redirect from an allowed host to loopback,
    private and link-local addresses: not fetched, nothing reaches the server or the model,
    and an open port gets the same reply as a closed one. With `bot.fetch` allowing the
    network, the same URL is fetched."""
    async with SlowFiles() as files:
        port = files.url.rsplit(":", 1)[1]
        urls = [
            f"{files.url}/cat.png",
            f"http://2130706433:{port}/cat.png",
            f"http://127.1:{port}/cat.png",
            f"http://[::ffff:127.0.0.1]:{port}/cat.png",
            # localhost is allowed by name below (an outside host); where it redirects is not
            f"http://localhost:{port}/redirect?to={files.url}/cat.png",
            "http://127.0.0.1:1/cat.png",  # a closed port
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.1/x.png",
        ]
        model = ScriptedModel([say("a cat")])
        model.capabilities.vision = True
        config = {"bot": {"fetch": {"allow_hosts": ["localhost"]}}}
        tb = TestBot(tmp_path, model=model, builtins=False, config=config)
        try:
            replies = [
                (await _post(tb, {"text": "what is it?", "images": [u]}))["replies"] for u in urls
            ]
            assert files.requests == [f"/redirect?to={files.url}/cat.png"]
            assert model.requests == []
        finally:
            await tb.aclose()
        assert replies == [[{"text": "I could not download that image.", "at": None}]] * len(urls)
        tb = TestBot(tmp_path / "allowed", model=model, builtins=False, config={"bot": LOCAL_MEDIA})
        try:
            out = await _post(tb, {"text": "what is it?", "images": [urls[0]]})
        finally:
            await tb.aclose()
        assert out["replies"][0]["text"] == "a cat"


async def test_vision_model_describes_for_a_model_without_vision(
    tmp_path: Path, server: RawReplayServer, files: str
) -> None:
    """The description is made by `bot.vision_model` (Anthropic here, through its SDK) and
    reaches the chat model (OpenAI, no vision) as text, never as image bytes."""
    server.queue = [
        *replies("anthropic", [Turn(text="A green square on a white table.")], stream=False),
        *replies("openai", [Turn(text="It is a green square.")], stream=False),
    ]
    eyes = model_config("anthropic", server.url, thinking=False).model_copy(update={"vision": True})
    chat = model_config("openai", server.url, thinking=False)
    config = {
        "bot": {"model": "chat", "vision_model": "eyes", **LOCAL_MEDIA},
        "models": {
            "chat": chat.model_dump(mode="json", exclude_none=True) | {"api_key": "k"},
            "eyes": eyes.model_dump(mode="json", exclude_none=True) | {"api_key": "k"},
        },
    }
    tb = TestBot(tmp_path, config=config, builtins=False)
    try:
        out = await _post(tb, {"text": "what is it?", "images": [f"{files}/cat.png"]})
    finally:
        await tb.aclose()
    assert out["replies"][0]["text"] == "It is a green square."
    described, answered = server.bodies()
    assert described["messages"][-1]["content"][1]["type"] == "image"
    question = answered["messages"][-1]["content"]
    assert isinstance(question, str)
    assert question.startswith("<context>Current")
    assert question.endswith("</context>\nwhat is it?\n[image: A green square on a white table.]")


def test_vision_model_must_name_a_model_that_sees(tmp_path: Path) -> None:
    models = {"chat": {"provider": "openai", "model": "m", "api_key": "k"}}
    with pytest.raises(ConfigError, match=r"bot\.vision_model: no model named 'nope' under"):
        TestBot(tmp_path, config={"bot": {"vision_model": "nope"}, "models": models})
    with pytest.raises(ConfigError, match=r"bot\.vision_model: the model 'chat' needs `vision"):
        TestBot(tmp_path, config={"bot": {"vision_model": "chat"}, "models": models})
