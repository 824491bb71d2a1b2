"""Images from OneBot (a segment, and a quoted message fetched with get_msg) reach a vision
model as bytes; each provider protocol writes them in its own form; a non-image or oversized
download gets a short reply."""

from __future__ import annotations

import pytest

from function_calls import images as image_mod
from providers.anthropic import to_anthropic_messages
from providers.gemini import to_gemini_contents
from providers.openai_compat import to_wire_messages
from providers.scripted import ScriptedModel, say
from providers.types import ImagePart, Message, ModelCapabilities
from tests.channels.conftest import LOCAL_MEDIA, MakeOneBot
from tests.channels.onebot.onebot_sim import reply, text
from tests.channels.onebot.test_onebot import ALICE, GROUP, SELF, connected
from tests.fakes.images import png


def image(url: str) -> dict:
    return {"type": "image", "data": {"file": "abc.image", "url": url}}


VISION = ModelCapabilities(streaming=False, vision=True)


async def test_onebot_image_segment_reaches_a_vision_model(
    make_onebot: MakeOneBot, files: str
) -> None:
    model = ScriptedModel([say("a cat")], capabilities=VISION)
    bot, _ch, url = await make_onebot(model=model, bot_config=LOCAL_MEDIA)
    sim = await connected(url)
    try:
        await sim.private_message(ALICE, [text("what is this?"), image(f"{files}/cat.png")])
        await sim.wait_action("send_private_msg")
    finally:
        await sim.close()
    user = [m for m in model.requests[0].messages if m.role == "user"][-1]
    assert [(i.mime_type, i.data) for i in user.images] == [("image/png", png())]
    stored = bot.storage.recent_messages("onebot", f"private:{ALICE}", 5)[0].text
    assert stored.endswith(f"[image: {files}/cat.png]")  # a reference, not bytes


async def test_quoted_image_is_fetched_with_get_msg(make_onebot: MakeOneBot, files: str) -> None:
    model = ScriptedModel([say("a cat")], capabilities=VISION)
    _bot, _ch, url = await make_onebot(model=model, quote_replies=False, bot_config=LOCAL_MEDIA)
    sim = await connected(url)
    try:
        # posted while the bot was not listening: only get_msg knows it
        sim.messages[777] = {
            "message_id": 777,
            "time": 1700000000,
            "message_type": "group",
            "message": [image(f"{files}/cat.png")],
            "sender": {"user_id": 1, "nickname": "Bob"},
        }
        await sim.group_message(
            GROUP,
            ALICE,
            [reply(777), {"type": "at", "data": {"qq": str(SELF)}}, text(" what is in this?")],
        )
        await sim.wait_action("send_group_msg")
        assert sim.sent("get_msg")
    finally:
        await sim.close()
    user = [m for m in model.requests[0].messages if m.role == "user"][-1]
    assert len(user.images) == 1 and user.images[0].data == png()


@pytest.mark.parametrize("path,expected", [("/page", "not an image"), ("/huge.png", "too large")])
async def test_bad_downloads_get_a_short_reply(
    make_onebot: MakeOneBot, files: str, path: str, expected: str
) -> None:
    model = ScriptedModel([say("never")], capabilities=VISION)
    _bot, _ch, url = await make_onebot(model=model, bot_config=LOCAL_MEDIA)
    sim = await connected(url)
    try:
        await sim.private_message(ALICE, [text("look"), image(f"{files}{path}")])
        action = await sim.wait_action("send_private_msg")
    finally:
        await sim.close()
    assert expected in str(action["params"]["message"])
    assert model.requests == []


async def test_model_without_vision_gets_a_note(make_onebot: MakeOneBot, files: str) -> None:
    model = ScriptedModel([say("I cannot see images")])
    _bot, _ch, url = await make_onebot(model=model, bot_config=LOCAL_MEDIA)
    sim = await connected(url)
    try:
        await sim.private_message(ALICE, [text("look"), image(f"{files}/cat.png")])
        await sim.wait_action("send_private_msg")
    finally:
        await sim.close()
    user = [m for m in model.requests[0].messages if m.role == "user"][-1]
    assert user.images == [] and "[image]" in (user.content or "")


async def test_loopback_image_segment_is_refused_without_telling_open_from_closed(
    make_onebot: MakeOneBot, files: str
) -> None:
    """Issue 34, item 2: an image segment whose url is an internal address is not fetched
    (unless `bot.fetch` allows it); an open port and a closed one get the same reply."""
    model = ScriptedModel([say("never")], capabilities=VISION)
    _bot, _ch, url = await make_onebot(model=model)
    port = files.rsplit(":", 1)[1]
    sim = await connected(url)
    internal = [files, f"http://localhost:{port}", f"http://2130706433:{port}"]
    internal.append("http://127.0.0.1:1")  # a closed port
    try:
        for n, where in enumerate(internal, 1):
            await sim.private_message(ALICE, [text("what is this?"), image(f"{where}/cat.png")])
            await sim.wait_actions(n, "send_private_msg")
        replies = [str(a["params"]["message"]) for a in sim.sent("send_private_msg")]
    finally:
        await sim.close()
    assert "could not download" in replies[0]
    assert replies == [replies[0]] * len(internal)
    assert model.requests == []


def test_each_protocol_writes_images_its_way() -> None:
    part = ImagePart("image/png", png())
    msgs = [
        Message(role="system", content="s"),
        Message(role="user", content="what?", images=[part]),
    ]
    openai = to_wire_messages(msgs)[-1]["content"]
    assert openai[1] == {"type": "image_url", "image_url": {"url": part.data_uri()}}
    _system, turns = to_anthropic_messages(msgs)
    assert turns[-1]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": part.base64()},
    }
    _system, contents = to_gemini_contents(msgs)
    blob = contents[-1].parts[1].inline_data
    assert (blob.mime_type, blob.data) == ("image/png", png())


async def test_data_uri_is_decoded_and_checked() -> None:
    part = await image_mod.fetch_image(ImagePart("image/png", png()).data_uri())
    assert part.mime_type == "image/png"
    with pytest.raises(image_mod.ImageError):
        await image_mod.fetch_image("data:image/png;base64,aGVsbG8=")
