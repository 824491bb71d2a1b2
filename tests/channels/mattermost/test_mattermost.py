"""The Mattermost channel beyond the contract: events missed while the WebSocket was down
come on the resumed connection, threads, the bot's own and system posts and other teams
skipped, pending_post_id (not posted twice), 16383 characters, 429's X-Ratelimit-Reset,
settings and `chatfn check`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from chatfn.channels import kit
from chatfn.channels.mattermost import check
from chatfn.channels.mattermost.api import MattermostApi
from chatfn.channels.mattermost.send import MattermostSender, parse_chat_id
from chatfn.channels.mattermost.settings import MattermostSettings
from chatfn.common.messages import OutgoingMessage
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from tests.channels.contract import _echo, contract_registry
from tests.channels.held_model import HeldModel
from tests.channels.mattermost.mattermost_driver import MattermostDriver
from tests.channels.mattermost.mattermost_fake import MAX_RUNES, FakeMattermost, mm_id
from tests.kit import until


@asynccontextmanager
async def running(
    fake: FakeMattermost,
    tmp_path: Path,
    chats: list[Any] | None = None,
    voice: dict[str, Any] | None = None,
    **bot: Any,
) -> AsyncIterator[Any]:
    driver = MattermostDriver(fake)
    config = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'mm.db'}"},
            "plugins": {"paths": []},
            "bot": {"reply_with_mention": False, **bot},
            "channels": {"mattermost": driver.channel_settings()},
            "chats": chats or [],
            "voice": voice or {},
        },
        base_dir=tmp_path,
    )
    the_bot = Bot(
        config,
        registry=contract_registry(),
        model=HeldModel(_echo, asyncio.Event()),
        load_plugins=False,
    )
    try:
        await driver.attach(the_bot.channel_host, config.channels.mattermost)  # type: ignore[attr-defined]
        await the_bot.start()
        yield driver
    finally:
        await driver.detach()
        await the_bot.aclose()


@asynccontextmanager
async def sender_for(fake: FakeMattermost) -> AsyncIterator[MattermostSender]:
    settings = MattermostSettings(
        url=fake.base, token=SecretStr(fake.token), team="crew", send_rate=0
    )
    api = MattermostApi(settings)
    try:
        yield MattermostSender(api, settings, None)
    finally:
        await api.aclose()


def said(fake: FakeMattermost, channel: str) -> list[str]:
    return [p["message"] for p in fake.sent.get(channel, [])]


async def test_a_post_made_while_the_socket_was_down_is_answered_after_it_resumes(
    tmp_path: Path,
) -> None:
    async with FakeMattermost() as fake, running(fake, tmp_path):
        dm = fake.channel("1001", "private")
        user = fake.user("1001")
        await fake.drop_sockets()
        assert fake.connected() == 0
        await fake.say(dm, user, "while away")
        await fake.wait_sent(dm, 1)
        assert said(fake, dm) == ["echo: while away"]
        await until(lambda: fake.connected() == 1)


async def test_threads_own_posts_system_posts_and_other_teams(tmp_path: Path) -> None:
    async with FakeMattermost() as fake, running(fake, tmp_path):
        town = fake.channel("5001", "group")
        user = fake.user("1002")
        root = await fake.say(town, user, "a thread starts", mention=True)
        await fake.wait_sent(town, 1)
        assert fake.sent[town][0]["root_id"] == ""  # answered in the channel
        await fake.say(town, user, "in the thread", mention=True, root_id=root)
        await fake.wait_sent(town, 2)
        assert fake.sent[town][1]["root_id"] == root  # answered in the thread
        # Not for the bot: its own post, a system post, another team's channel.
        own = {
            "id": fake.next_id(),
            "user_id": fake.bot_id,
            "channel_id": town,
            "message": "me",
            "root_id": "",
            "type": "",
            "file_ids": [],
        }
        system = {**own, "id": fake.next_id(), "user_id": user, "type": "system_join_channel"}
        for post, team in ((own, fake.team["id"]), (system, fake.team["id"])):
            await fake.broadcast(
                "posted",
                {
                    "post": json.dumps(post),
                    "channel_type": "O",
                    "team_id": team,
                    "mentions": json.dumps([fake.bot_id]),
                },
                {"channel_id": town},
            )
        other = {**own, "id": fake.next_id(), "user_id": user}
        await fake.broadcast(
            "posted",
            {
                "post": json.dumps(other),
                "channel_type": "O",
                "team_id": "x" * 26,
                "mentions": json.dumps([fake.bot_id]),
            },
            {"channel_id": town},
        )
        await fake.say(town, user, "last", mention=True)
        await fake.wait_sent(town, 3)
        assert said(fake, town) == ["echo: a thread starts", "echo: in the thread", "echo: last"]


async def test_a_bot_accounts_posts_are_answered_only_where_a_rule_allows(
    tmp_path: Path,
) -> None:
    rules = [{"match": {"chat_id": "*" + mm_id("c", "5102")}, "answer_bots": True}]
    async with FakeMattermost() as fake, running(fake, tmp_path, chats=rules):
        town, lab = fake.channel("5101", "group"), fake.channel("5102", "group")
        other_bot, user = fake.user("2001"), fake.user("1003")
        bot = {"from_bot": "true"}
        await fake.say(town, other_bot, "hello bot", mention=True, props=bot)
        await fake.say(town, user, "hello", mention=True)
        await fake.wait_sent(town, 1)
        await fake.say(lab, other_bot, "hello lab", mention=True, props=bot)
        await fake.wait_sent(lab, 1)
        assert said(fake, town) == ["echo: hello"] and said(fake, lab) == ["echo: hello lab"]


async def test_a_post_sent_again_with_its_pending_post_id_is_posted_once() -> None:
    async with FakeMattermost() as fake, sender_for(fake) as sender:
        dm = fake.channel("1001", "private")
        out = OutgoingMessage("mattermost", f"private:{dm}", "only once", event_id=7)
        await sender.deliver(out)
        await sender.deliver(out)  # a retry within the server's 30 s
        await sender.deliver(OutgoingMessage("mattermost", f"private:{dm}", "next", event_id=8))
        assert said(fake, dm) == ["only once", "next"]
        assert fake.recorded.count(("POST", "/api/v4/posts")) == 3


async def test_long_posts_split_within_the_limit_and_the_server_refuses_more() -> None:
    async with FakeMattermost() as fake, sender_for(fake) as sender:
        dm = fake.channel("1001", "private")
        text = "\n\n".join(f"paragraph {n} " + "word " * 2000 for n in range(4))  # ~40000
        await sender.deliver(OutgoingMessage("mattermost", f"private:{dm}", text))
        parts = said(fake, dm)
        assert len(parts) >= 3 and all(len(p) <= MAX_RUNES for p in parts)
        assert " ".join(parts).split() == text.split()
        with pytest.raises(Exception, match="model.post.is_valid.msg"):
            await sender.client.post({"channel_id": dm, "message": "x" * (MAX_RUNES + 1)})


async def test_429_waits_for_x_ratelimit_reset_and_401_names_the_token() -> None:
    async with FakeMattermost() as fake, sender_for(fake) as sender:
        dm = fake.channel("1001", "private")
        fake.rate_limited[dm] = 0.5
        began = asyncio.get_running_loop().time()
        await sender.deliver(OutgoingMessage("mattermost", f"private:{dm}", "after"))
        assert asyncio.get_running_loop().time() - began >= 0.5
        assert said(fake, dm) == ["after"]
        fake.token = "revoked"
        with pytest.raises(kit.CredentialsRefused, match="channels.mattermost.token"):
            await sender.deliver(OutgoingMessage("mattermost", f"private:{dm}", "no"))
        with pytest.raises(kit.DeliveryRefused, match="not a Mattermost chat id"):
            await sender.deliver(OutgoingMessage("mattermost", "private:town-square", "x"))


def test_settings_name_their_keys_and_the_websocket_address() -> None:
    assert MattermostSettings().problem() == (
        "channels.mattermost.url, channels.mattermost.token, channels.mattermost.team must be "
        "set (System Console -> Integrations -> Bot Accounts)"
    )
    settings = MattermostSettings(url="https://chat.example.com/", token=SecretStr("t"), team="x")
    assert settings.websocket == "wss://chat.example.com/api/v4/websocket"
    with pytest.raises(ValueError, match="url"):
        MattermostSettings(url="chat.example.com")
    ref = parse_chat_id("group:" + "c" * 26 + ":thread:" + "p" * 26)
    assert (ref.channel, ref.group, ref.thread) == ("c" * 26, True, "p" * 26)


async def test_check_online_names_the_bot_the_refused_token_or_the_missing_team() -> None:
    async with FakeMattermost() as fake:
        settings = MattermostSettings(url=fake.base, token=SecretStr(fake.token), team="crew")
        probes = await check(settings, online=True)
        assert [p.status for p in probes] == ["ok", "ok"] and "@chatbot" in probes[1].detail
        wrong = MattermostSettings(url=fake.base, token=SecretStr(fake.token), team="other")
        probes = await check(wrong, online=True)
        assert probes[1].status == "fail" and "channels.mattermost.team" in probes[1].detail
        fake.token = "revoked"
        probes = await check(settings, online=True)
        assert probes[1].status == "fail" and "channels.mattermost.token" in probes[1].detail


async def test_an_audio_file_is_transcribed(tmp_path: Path) -> None:
    """A post with an audio file (a voice message a client recorded, OGG/Opus) goes to
    voice.stt; an image beside it stays an image."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, tone

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    clip = await asyncio.to_thread(tone, 2.0, "ogg")
    async with FakeMattermost() as fake, AudioApi(transcripts=["ship it friday"]) as api:
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}
        async with running(fake, tmp_path, voice={"stt": stt}):
            dm = fake.channel("1005", "private")
            user = fake.user("1005")
            await fake.say(dm, user, "", file_ids=[fake.upload_as_user(dm, clip)])
            await fake.wait_sent(dm, 1)
    assert said(fake, dm) == ["echo: ship it friday"]
    [req] = api.transcriptions
    assert 1.9 < req.seconds < 2.1


async def test_a_spoken_reply_is_attached_to_the_post(tmp_path: Path) -> None:
    """`/tts on`: the reply post carries the spoken reply as an uploaded audio file (the
    fake takes only files uploaded to that channel); the file decodes as audio."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, probe

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    async with FakeMattermost() as fake, AudioApi() as api:
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key}
        tts |= {"model": "tts-1", "voice": "nova"}
        async with running(fake, tmp_path, chats=[{"voice": {"tts": "on"}}], voice={"tts": tts}):
            dm = fake.channel("1007", "private")
            await fake.say(dm, fake.user("1007"), "say it")
            [post] = await fake.wait_sent(dm, 1)
    assert post["message"] == "echo: say it"
    [file_id] = post["file_ids"]
    fmt, seconds = probe(fake.files[file_id][0])
    assert "ogg" in fmt and seconds > 0.5
