"""The Teams channel beyond the contract: the activity's JWT checked as the Bot Framework
says (another key, audience, issuer, expiry, a key not endorsed for the channel, the
serviceUrl claim, no token: 401 and nothing answered), mentions as Teams entities, replies to
the conversation's service URL, the local Bot Framework's refusals, and `chatfn check`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pydantic import SecretStr

from chatfn.channels.teams import check
from chatfn.channels.teams.send import parse_chat_id
from chatfn.channels.teams.settings import TeamsSettings
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from tests.channels.contract import _echo, contract_registry
from tests.channels.held_model import HeldModel
from tests.channels.teams.teams_driver import TeamsDriver
from tests.channels.teams.teams_fake import FakeTeams


@asynccontextmanager
async def running(
    fake: FakeTeams, tmp_path: Path, voice: dict[str, Any] | None = None, **bot: Any
) -> AsyncIterator[TeamsDriver]:
    driver = TeamsDriver(fake)
    config = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'teams.db'}"},
            "plugins": {"paths": []},
            "bot": {"reply_with_mention": False, **bot},
            "channels": {"teams": driver.channel_settings()},
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
        await driver.attach(the_bot.channel_host, config.channels.teams)  # type: ignore[attr-defined]
        await the_bot.start()
        yield driver
    finally:
        await driver.detach()
        await the_bot.aclose()


def _bad_tokens(fake: FakeTeams, activity: dict[str, Any]) -> dict[str, str]:
    now = int(time.time())
    return {
        "another key": fake.sign(activity, key=fake.other_key),
        "another audience": fake.sign(activity, aud="someone-else"),
        "another issuer": fake.sign(activity, iss="https://sts.windows.net/evil/"),
        "expired": fake.sign(activity, nbf=now - 7200, exp=now - 3600),
        "another serviceUrl": fake.sign(activity, serviceUrl="https://evil.example/"),
        "not a JWT": "abc.def",
        "none": "",
    }


async def test_activities_without_the_bot_frameworks_jwt_are_refused(tmp_path: Path) -> None:
    async with FakeTeams() as fake, running(fake, tmp_path):
        for why, token in _bad_tokens(fake, fake.activity("a:7", "personal", "29:7", "U")).items():
            activity = fake.activity("a:7", "personal", "29:7", "U", text=f"/echo {why}")
            status = await fake.deliver(activity, token=token or "")
            assert status == 401, why
        # A key the metadata lists but not endorsed for this channel.
        activity = fake.activity(
            "a:7", "personal", "29:7", "U", text="/echo skype", channelId="skype"
        )
        assert await fake.deliver(activity) == 401
        good = fake.activity("a:7", "personal", "29:7", "U", text="/echo fine")
        assert await fake.deliver(good) == 200
        sent = await fake.wait_sent("a:7", 1)
        await asyncio.sleep(0.1)
        assert [a["text"] for a in fake.sent["a:7"]] == ["fine"] and len(sent) == 1


async def test_a_group_mention_is_a_teams_entity_and_the_answer_goes_to_the_service_url(
    tmp_path: Path,
) -> None:
    async with FakeTeams() as fake, running(fake, tmp_path, reply_with_mention=True):
        conv = "19:abc@thread.tacv2;messageid=1700000000000"  # a channel's thread
        activity = fake.activity(
            conv,
            "channel",
            "29:42",
            "Ann Lee",
            text="<at>chatbot</at> /echo hi <at>Bob</at>",
            entities=[
                {
                    "type": "mention",
                    "text": "<at>chatbot</at>",
                    "mentioned": {"id": f"28:{fake.app_id}", "name": "chatbot"},
                },
                {
                    "type": "mention",
                    "text": "<at>Bob</at>",
                    "mentioned": {"id": "29:43", "name": "Bob"},
                },
            ],
        )
        assert await fake.deliver(activity) == 200
        (sent,) = await fake.wait_sent(conv, 1)
        assert sent["text"] == "<at>Ann Lee</at> hi @Bob"
        assert sent["entities"] == [
            {
                "type": "mention",
                "mentioned": {"id": "29:42", "name": "Ann Lee"},
                "text": "<at>Ann Lee</at>",
            }
        ]
        assert sent["textFormat"] == "markdown"


async def test_the_local_bot_framework_refuses_what_teams_refuses() -> None:
    async with FakeTeams(max_length=100) as fake, aiohttp.ClientSession() as s:
        form = {
            "grant_type": "client_credentials",
            "client_id": fake.app_id,
            "client_secret": "wrong",
            "scope": "https://api.botframework.com/.default",
        }
        async with s.post(f"{fake.base}/botframework.com/oauth2/v2.0/token", data=form) as r:
            assert r.status == 401 and (await r.json())["error"] == "invalid_client"
        form["client_secret"] = fake.app_password
        async with s.post(f"{fake.base}/botframework.com/oauth2/v2.0/token", data=form) as r:
            token = (await r.json())["access_token"]
        fake.activity("a:1", "personal", "29:1", "U")
        url = f"{fake.service_url}v3/conversations/a:1/activities"
        auth = {"Authorization": f"Bearer {token}"}
        async with s.post(
            url, json={"type": "message", "text": "x"}, headers={"Authorization": "Bearer no"}
        ) as r:
            assert r.status == 401
        async with s.post(url, json={"type": "message", "text": "x" * 101}, headers=auth) as r:
            assert r.status == 413
        async with s.post(url, json={"type": "typing!"}, headers=auth) as r:
            assert r.status == 400
        async with s.post(f"{url}/nope", json={"type": "message", "text": "x"}, headers=auth) as r:
            assert r.status == 400
        async with s.post(
            url.replace("a:1", "a:2"), json={"type": "message", "text": "x"}, headers=auth
        ) as r:
            assert r.status == 404
        async with s.post(url, json={"type": "message", "text": "x"}, headers=auth) as r:
            assert r.status == 201


def test_chat_ids_keep_the_colons_of_teams_conversation_ids() -> None:
    ref = parse_chat_id("group:19:abc@thread.tacv2;messageid=17")
    assert (ref.group, ref.conversation) == (True, "19:abc@thread.tacv2;messageid=17")
    with pytest.raises(ValueError, match="not a Teams chat id"):
        parse_chat_id("a:1")


async def test_check_online_asks_for_a_token_and_reads_the_keys() -> None:
    async with FakeTeams() as fake:

        def settings(password: str) -> TeamsSettings:
            return TeamsSettings(
                app_id=fake.app_id,
                app_password=SecretStr(password),
                api_base=fake.base,
                openid_metadata_url=fake.openid_url,
            )

        probes = await check(settings(fake.app_password), online=True)
        assert [p.status for p in probes] == ["ok", "ok", "ok"], probes
        probes = await check(settings("wrong"), online=True)
        assert probes[1].status == "fail" and "channels.teams.app_password" in probes[1].detail
    assert (await check(TeamsSettings(), online=False))[0].status == "fail"
    assert "channels.teams.app_id" in (await check(TeamsSettings(), online=False))[0].detail


async def test_an_audio_attachment_is_transcribed(tmp_path: Path) -> None:
    """An audio attachment on the Bot Connector (downloaded with the bot's token, as images
    are) goes to voice.stt and its transcript is answered."""
    from tests.channels.contract import Chat
    from tests.fakes.audio_api import FFMPEG, AudioApi, tone

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    clip = await asyncio.to_thread(tone, 2.0, "ogg")
    async with FakeTeams() as fake, AudioApi(transcripts=["book the room"]) as api:
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}
        async with running(fake, tmp_path, voice={"stt": stt}) as driver:
            chat = Chat("private", "1006")
            attachment = {"contentType": "audio/ogg", "contentUrl": fake.file(clip)}
            activity = fake.activity(
                driver.conversation(chat),
                "personal",
                "29:1006",
                "User 1006",
                text="",
                attachments=[attachment],
            )
            assert await fake.deliver(activity) == 200
            [reply] = await driver.sent(chat, 1)
    assert reply.text == "echo: book the room"
    [req] = api.transcriptions
    assert 1.9 < req.seconds < 2.1
