"""The QQ channel's own cases against the local QQ (qq_fake.py): settings, the probe, the
token's refresh, msg_seq making a retried row exactly-once, the gateway's resume / reconnect /
invalid session / heartbeats, a long 429, the webhook's Ed25519 signatures and validation,
passive reply windows, the 5-replies rule, refused links, images by URL, and a dead secret.
The shared contract: test_contract_qq.py."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from loguru import logger
from pydantic import ValidationError

from chatfn.channels.qq import SPEC, check
from chatfn.channels.qq.api import QQApi
from chatfn.channels.qq.parse import guild_roles, parse_chat_id, read_content
from chatfn.channels.qq.send import CUT_NOTE, Passive, QQSender, msg_seq
from chatfn.channels.qq.settings import QQSettings
from chatfn.channels.qq.webhook import Signer, seed
from chatfn.common.messages import DeliveryRefused, NotDelivered, OutgoingMessage
from tests.channels.contract import PNG, Chat
from tests.channels.qq.qq_driver import QQDriver, running
from tests.channels.qq.qq_fake import BOT_ID, FakeQQ, qq_sign
from tests.kit import free_port, until

logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


@pytest.fixture
async def fake() -> AsyncIterator[FakeQQ]:
    async with FakeQQ() as server:
        yield server


def settings_for(fake: FakeQQ, **more: Any) -> QQSettings:
    return QQSettings(
        app_id=fake.app_id,
        secret=fake.secret,
        api_base=fake.base,
        token_url=fake.token_url,
        send_rate=0,
        **more,
    )


class Sender:
    """A QQSender on its own session (no bot), for the way out's rules."""

    def __init__(self, fake: FakeQQ, **more: Any) -> None:
        self.cfg = settings_for(fake, **more)
        self.passive = Passive()

    async def __aenter__(self) -> QQSender:
        self.session = aiohttp.ClientSession()
        self.api = QQApi(self.cfg, self.session)
        return QQSender(self.api, self.cfg, self.passive)

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()


def warnings() -> tuple[list[str], int]:
    lines: list[str] = []
    sink = logger.add(
        lambda m: lines.append(m.record["message"]),
        level="WARNING",
        filter=lambda r: r["name"].startswith("chatfn.channels.qq"),
    )
    return lines, sink


# -- settings, ids, probe --
def test_settings_name_their_keys_and_roots() -> None:
    with pytest.raises(ValidationError, match="app_id"):
        QQSettings(app_id="abc", secret="s")
    with pytest.raises(ValidationError, match="api_base"):
        QQSettings(api_base="ftp://x")
    with pytest.raises(ValidationError, match="mode"):
        QQSettings(mode="polling")
    assert QQSettings().api_root == "https://api.sgroup.qq.com"
    assert QQSettings().mode == "webhook"  # Tencent is withdrawing WebSocket delivery
    assert QQSettings(sandbox=True).api_root == "https://sandbox.api.sgroup.qq.com"
    assert QQSettings(sandbox=True, api_base="http://127.0.0.1:9/").api_root == "http://127.0.0.1:9"
    assert QQSettings(app_id=102000001, secret="x").app_id == "102000001"  # YAML gives an int
    assert "channels.qq.app_id" in (QQSettings(secret="x").missing() or "")
    assert QQSettings().gateway_intents == 1 | 1 << 1 | 1 << 12 | 1 << 25 | 1 << 30


def test_chat_ids_mentions_and_roles() -> None:
    ref = parse_chat_id("group:C9F778FE6ADF9D1D1DBE395BF744A33A")
    assert (ref.scene, ref.is_group, ref.messages_path) == (
        "group",
        True,
        "/v2/groups/C9F778FE6ADF9D1D1DBE395BF744A33A/messages",
    )
    assert parse_chat_id("dm:18700000000001").messages_path == "/dms/18700000000001/messages"
    assert parse_chat_id("c2c:E4F4").files_path == "/v2/users/E4F4/files"
    for bad in ("group:", "private:1", "channel:a/b", "group:a b"):
        with pytest.raises(ValueError, match="group:<group_openid>"):
            parse_chat_id(bad)
    assert read_content(f"<@!{BOT_ID}> hi <@!42> there", BOT_ID) == ("hi @42 there", True)
    assert read_content(" 123", BOT_ID) == ("123", False)
    assert guild_roles({"roles": ["1", "4"]}) == ["owner"]
    assert guild_roles({"roles": ["2"]}) == ["admin"]
    assert guild_roles({"roles": ["5", "11"]}) == [] and guild_roles(None) == []


def test_ed25519_keys_match_qqs_published_examples() -> None:
    """sign.md's public key for secret naOC0ocQE3shWLAfffVLB1rhYPG7, and event-emit.md's op 13
    example answer for secret DG5g3B4j9X2KOErG."""
    assert seed("naOC0ocQE3shWLAfffVLB1rhYPG7") == b"naOC0ocQE3shWLAfffVLB1rhYPG7naOC"
    public = Signer("naOC0ocQE3shWLAfffVLB1rhYPG7")._public.public_bytes_raw()
    assert list(public[:4]) == [215, 195, 98, 254] and list(public[-2:]) == [103, 58]
    answer = Signer("DG5g3B4j9X2KOErG").validation("Arq0D5A61EgUu4OxUvOp", "1725442341")
    assert answer == {
        "plain_token": "Arq0D5A61EgUu4OxUvOp",
        "signature": "87befc99c42c651b3aac0278e71ada338433ae26fcb24307bdc5ad38c1adc2d0"
        "1bcfcadc0842edac85e85205028a1132afe09280305f13aa6909ffc2d652c706",
    }
    # the fake signs on its own (cryptography, as sign.md says): the docs' example too
    assert qq_sign("DG5g3B4j9X2KOErG", b"1725442341Arq0D5A61EgUu4OxUvOp") == answer["signature"]
    signer = Signer("DG5g3B4j9X2KOErG")
    sig = signer.sign(b"1725442341{}")
    assert signer.verify("1725442341", b"{}", sig)
    assert not signer.verify("1725442342", b"{}", sig)
    assert not signer.verify("1725442341", b"{}", "zz") and not Signer("other").verify(
        "1725442341", b"{}", sig
    )


async def test_check_system_probe(fake: FakeQQ) -> None:
    assert [p.status for p in await check(QQSettings(), False)] == ["fail"]
    bare = await SPEC.check(settings_for(fake), False)
    assert [p.status for p in bare] == ["ok", "warn"] and "public_url" in bare[1].detail
    good = settings_for(fake, public_url="https://bot.example.com")
    probes = await SPEC.check(good, True)
    assert [p.status for p in probes] == ["ok", "ok"]
    assert f"id {BOT_ID}" in probes[-1].detail and "GET /users/@me" in fake.calls
    dead = good.model_copy(update={"secret": good.secret.__class__("wrong-secret")})
    [_, refused] = await SPEC.check(dead, True)
    assert refused.status == "fail" and "refused channels.qq.app_id / channels.qq.secret" in (
        refused.detail
    )
    assert "wrong-secret" not in refused.detail
    gone = good.model_copy(update={"api_base": "http://127.0.0.1:9"})
    [_, unreachable] = await SPEC.check(gone, True)
    assert unreachable.status == "fail"


# -- the token --
async def test_the_token_is_refreshed_before_it_expires_and_after_a_401(fake: FakeQQ) -> None:
    fake.token_ttl = 1  # used for 0.75 s: refreshed 0.25 s before it expires
    later = 0.0  # the token cache's clock runs this far ahead of the real one
    async with Sender(fake) as sender:
        api = sender.api
        api._token.clock = lambda: time.monotonic() + later
        first = await api.token()
        assert await api.token() == first
        later = 0.8
        second = await api.token()
        assert second != first and api.tokens_fetched == 2
        fake.token_ttl = 7200
        await api.token(fresh=True)
        fake.revoke_tokens()  # QQ no longer knows the token: the call gets 401, then a new one
        assert (await api.call("GET", "/users/@me"))["id"] == BOT_ID
        assert api.tokens_fetched == 4


# -- msg_seq: never twice --
async def test_a_retried_row_is_refused_as_a_duplicate_and_counts_as_delivered(
    fake: FakeQQ,
) -> None:
    said = fake.message_event("GROUP_AT_MESSAGE_CREATE", target="G1", sender="M1", content=" q")
    essay = "\n\n".join(f"Paragraph {n}: " + "word " * 150 for n in range(3))
    out = OutgoingMessage(
        platform="qq", chat_id="group:G1", text=essay, is_group=True, reply_to=said["id"]
    )
    out.event_id = 41
    async with Sender(fake, max_message_length=1000) as sender:
        await sender.deliver(out)
        first = list(fake.sent_to("group", "G1"))
        assert len(first) == 3
        assert [p.body["msg_seq"] for p in first] == [msg_seq(41, i) for i in range(3)]
        await sender.deliver(out)  # the same outbox row after a crash before its mark
    assert fake.sent_to("group", "G1") == first
    assert [code for _path, _body, code in fake.refused] == [40054005] * 3
    other = OutgoingMessage(platform="qq", chat_id="group:G1", text="more", reply_to=said["id"])
    other.event_id = 42  # another row answering the same message: its own msg_seq
    async with Sender(fake) as sender:
        await sender.deliver(other)
    assert fake.sent_to("group", "G1")[-1].body["msg_seq"] == msg_seq(42, 0)


async def test_a_crash_in_a_bot_is_sent_once(fake: FakeQQ, tmp_path: Path) -> None:
    from tests.channels.contract import _unmark_last

    driver = QQDriver(fake, "qq")
    chat = Chat("private", "U77")
    async with running(driver, tmp_path) as bot:
        await driver.say(chat, "hello")
        await driver.sent(chat, 1)
        await _unmark_last(bot, "qq", "c2c:U77")
    async with running(driver, tmp_path):
        await fake.wait_for(lambda: any(code == 40054005 for *_, code in fake.refused))
        await driver.say(chat, "later")
        replies = await driver.sent(chat, 2)
    assert [r.text for r in replies] == ["echo: hello", "echo: later"]


# -- passive windows, the 5-replies rule, links --
async def test_a_reply_past_the_passive_window_is_logged_and_given_up(
    fake: FakeQQ, tmp_path: Path
) -> None:
    lines, sink = warnings()
    driver = QQDriver(fake, "qq")
    try:
        async with running(driver, tmp_path, bot={"reply_with_mention": False}):
            old = fake.message_event(
                "GROUP_AT_MESSAGE_CREATE",
                target="G2",
                sender="M2",
                content=" late",
                at=time.time() - 600,
            )
            await fake.push("GROUP_AT_MESSAGE_CREATE", old)
            await fake.wait_for(lambda: fake.refused)
    finally:
        logger.remove(sink)
    [(path, body, code)] = fake.refused
    assert path == "/v2/groups/G2/messages" and "msg_id" not in body and code == 304022
    assert not fake.sent_to("group", "G2")
    assert any("past the passive reply window" in line for line in lines)
    assert any("QQ refused the message to group:G2" in line for line in lines), lines


async def test_qq_saying_expired_sends_active_and_c2c_has_an_hour(fake: FakeQQ) -> None:
    lines, sink = warnings()
    old = fake.message_event(
        "C2C_MESSAGE_CREATE", target="", sender="U5", content="x", at=time.time() - 1200
    )
    older = fake.message_event(
        "C2C_MESSAGE_CREATE", target="", sender="U5", content="x", at=time.time() - 7200
    )
    try:
        async with Sender(fake) as sender:
            # 20 minutes is inside C2C's 60: a passive reply (the channel does not know
            # when `old` came: after a restart it tries)
            await sender.deliver(
                OutgoingMessage(platform="qq", chat_id="c2c:U5", text="ok", reply_to=old["id"])
            )
            assert fake.sent_to("c2c", "U5")[0].msg_id == old["id"]
            with pytest.raises(DeliveryRefused):
                await sender.deliver(
                    OutgoingMessage(
                        platform="qq", chat_id="c2c:U5", text="late", reply_to=older["id"]
                    )
                )
    finally:
        logger.remove(sink)
    assert [code for *_, code in fake.refused] == [304027, 304022]
    assert any("QQ said so" in line for line in lines)


async def test_a_message_without_reply_to_answers_the_newest_message_or_event(
    fake: FakeQQ,
) -> None:
    async with Sender(fake) as sender:
        said = fake.message_event("GROUP_AT_MESSAGE_CREATE", target="G3", sender="M", content="a")
        sender.passive.message("group:G3", said["id"])
        sender.passive.event("channel:C3", "GUILD_MEMBER_ADD:e1")
        await sender.deliver(OutgoingMessage(platform="qq", chat_id="group:G3", text="tick"))
        await sender.deliver(OutgoingMessage(platform="qq", chat_id="channel:C3", text="hi"))
    assert fake.sent_to("group", "G3")[0].msg_id == said["id"]
    assert fake.sent_to("channel", "C3")[0].body["event_id"] == "GUILD_MEMBER_ADD:e1"


async def test_at_most_five_replies_to_one_message(fake: FakeQQ) -> None:
    said = fake.message_event("GROUP_AT_MESSAGE_CREATE", target="G4", sender="M", content="a")
    text = "\n\n".join(f"Part {n}: " + "w " * 60 for n in range(8))
    async with Sender(fake, max_message_length=150) as sender:
        await sender.deliver(
            OutgoingMessage(platform="qq", chat_id="group:G4", text=text, reply_to=said["id"])
        )
    sent = fake.sent_to("group", "G4")
    assert len(sent) == 5 and sent[-1].content.endswith(CUT_NOTE)
    assert all(len(p.content) <= 150 for p in sent)


async def test_five_replies_are_counted_across_messages_answering_one(fake: FakeQQ) -> None:
    said = fake.message_event("C2C_MESSAGE_CREATE", target="", sender="U7", content="a")
    dropped: list[str] = []
    lines, sink = warnings()
    three = "\n\n".join(f"Part {n}: " + "w " * 60 for n in range(3))

    def reply(row: int, text: str) -> OutgoingMessage:
        return OutgoingMessage(
            platform="qq", chat_id="c2c:U7", text=text, reply_to=said["id"], event_id=row
        )

    try:
        async with Sender(fake, max_message_length=150) as plain:
            sender = QQSender(plain.api, plain.cfg, plain.passive, dropped=dropped.append)
            await sender.deliver(reply(1, three))
            await sender.deliver(reply(1, three))  # the same row again: counted once
            await sender.deliver(reply(2, three))  # two of its three fit: cut, and said so
            with pytest.raises(DeliveryRefused, match="already has the 5 replies"):
                await sender.deliver(reply(3, "one more"))
    finally:
        logger.remove(sink)
    sent = fake.sent_to("c2c", "U7")
    assert len(sent) == 5 and sent[-1].content.endswith(CUT_NOTE)
    assert dropped == ["reply_limit"]
    assert not [code for *_, code in fake.refused if code != 40054005]  # QQ refused nothing
    assert any("dropped" in line for line in lines)


async def test_a_refused_link_is_sent_without_links(fake: FakeQQ) -> None:
    fake.urls_registered = False
    lines, sink = warnings()
    said = fake.message_event("C2C_MESSAGE_CREATE", target="", sender="U6", content="a")
    try:
        async with Sender(fake) as sender:
            text = "See [the docs](https://example.com/a_b) and https://x.org/y."
            await sender.deliver(
                OutgoingMessage(platform="qq", chat_id="c2c:U6", text=text, reply_to=said["id"])
            )
    finally:
        logger.remove(sink)
    [sent] = fake.sent_to("c2c", "U6")
    assert sent.content == "See the docs ([link]) and [link]."
    assert any("304003" in line for line in lines)


async def test_images_by_url_and_the_guilds_multipart(fake: FakeQQ) -> None:
    url = "https://example.com/cat.png"
    g = fake.message_event("GROUP_AT_MESSAGE_CREATE", target="G5", sender="M", content="a")
    c = fake.message_event("AT_MESSAGE_CREATE", target="C5", sender="u", content="a")
    async with Sender(fake) as sender:
        await sender.deliver(
            OutgoingMessage(
                platform="qq", chat_id="group:G5", text="", images=[url], reply_to=g["id"]
            )
        )
        await sender.deliver(
            OutgoingMessage(
                platform="qq",
                chat_id="channel:C5",
                text="two",
                images=[url, "data:image/png;base64,iVBORw0KGgo="],
                reply_to=c["id"],
                at="u",
            )
        )
        with pytest.raises(DeliveryRefused, match="neither"):
            await sender.deliver(
                OutgoingMessage(platform="qq", chat_id="group:G5", text="", images=["x"])
            )
    [media] = fake.sent_to("group", "G5")
    assert media.body["msg_type"] == 7 and media.images == [url] and media.content == " "
    first, second = fake.sent_to("channel", "C5")
    assert first.images == [url] and first.content == "<@u> two" and first.msg_id == c["id"]
    assert second.images == [bytes.fromhex("89504e470d0a1a0a")] and second.msg_id == c["id"]


# -- rate limits --
async def test_a_long_rate_limit_leaves_the_message_waiting(fake: FakeQQ) -> None:
    said = fake.message_event("C2C_MESSAGE_CREATE", target="", sender="U8", content="a")
    fake.rate_limited["U8"] = time.monotonic() + 30
    async with Sender(fake, max_retry_after=0.5) as sender:
        began = time.monotonic()
        with pytest.raises(NotDelivered, match="rate limit"):
            await sender.deliver(
                OutgoingMessage(platform="qq", chat_id="c2c:U8", text="x", reply_to=said["id"])
            )
        assert time.monotonic() - began < 0.5  # the first wait (1 s) is too long: given back
        fake.rate_limited.clear()
        await sender.deliver(
            OutgoingMessage(platform="qq", chat_id="c2c:U8", text="x", reply_to=said["id"])
        )
    assert len(fake.sent_to("c2c", "U8")) == 1


# -- the gateway --
async def test_the_gateway_resumes_reconnects_and_identifies_again(
    fake: FakeQQ, tmp_path: Path
) -> None:
    fake.heartbeat_ms = 200
    driver = QQDriver(fake, "qq")
    chat = Chat("private", "U9")
    async with running(driver, tmp_path):
        gateway = driver.channel.gateway
        await fake.wait_for(lambda: fake.heartbeats >= 2)  # heartbeats every 200 ms, acked
        await driver.say(chat, "one")
        await driver.sent(chat, 1)
        seq = gateway.seq
        # the socket breaks; an event comes while it is down; the channel resumes from seq
        await fake.drop()
        await fake.wait_for(lambda: not fake.connected)
        await driver.say(chat, "two")
        await driver.sent(chat, 2)
        assert fake.resumes[-1]["session_id"] == gateway.session_id
        assert fake.resumes[-1]["seq"] == seq and fake.identifies == 1
        # op 7: reconnect at once and resume
        before = len(fake.resumes)
        await fake.ask_reconnect()
        await fake.wait_for(lambda: len(fake.resumes) > before)
        await driver.say(chat, "three")
        await driver.sent(chat, 3)
        # op 9: the session is gone: identify afresh
        await fake.invalidate_session()
        await fake.wait_for(lambda: fake.identifies == 2, timeout=10)
        await driver.say(chat, "four")
        await driver.sent(chat, 4)
        # heartbeats unanswered: the connection is taken for dead, closed and resumed
        before = len(fake.resumes)
        fake.acks = False
        await fake.wait_for(lambda: len(fake.resumes) > before, timeout=10)
        fake.acks = True
        await driver.say(chat, "five")
        replies = await driver.sent(chat, 5)
    texts = ["echo: one", "echo: two", "echo: three", "echo: four", "echo: five"]
    assert [r.text for r in replies] == texts


def test_every_close_code_in_qqs_table_is_handled_as_it_says() -> None:
    # bot-docs dev-prepare/error-trace/websocket.md: 4008/4009 resume; 4006, 4007 and
    # 4900-4913 identify again; 4010-4014, 4914, 4915 must not connect again
    from chatfn.channels.qq.gateway import IDENTIFY, RESUME, STOP, close_action

    assert {close_action(c) for c in (4008, 4009, 4000, 1006, 1000)} == {RESUME}
    assert {close_action(c) for c in (4001, 4002, 4006, 4007, *range(4900, 4914))} == {IDENTIFY}
    assert {close_action(c) for c in (4010, 4011, 4012, 4013, 4014, 4914, 4915)} == {STOP}


async def test_close_codes_resume_identify_again_or_stop(fake: FakeQQ, tmp_path: Path) -> None:
    driver = QQDriver(fake, "qq")
    chat = Chat("private", "U8")
    async with running(driver, tmp_path):
        # 4009 (connection expired): resume
        await fake.close_with(4009)
        await fake.wait_for(lambda: len(fake.resumes) == 1, timeout=10)
        await driver.say(chat, "one")
        await driver.sent(chat, 1)
        assert fake.identifies == 1
        # 4902 (internal error): a Resume would be reset again; identify afresh
        await fake.close_with(4902)
        await fake.wait_for(lambda: fake.identifies == 2, timeout=10)
        await driver.say(chat, "two")
        replies = await driver.sent(chat, 2)
        assert [r.text for r in replies] == ["echo: one", "echo: two"]
        assert len(fake.resumes) == 1
        # 4915 (banned): one error line, and no connecting again
        lines, sink = warnings()
        try:
            opened = fake.sockets_opened
            await fake.close_with(4915)
            await fake.wait_for(lambda: not fake.connected)
            await until(
                lambda: any("4915" in line for line in lines), 5, "no line about the 4915 close"
            )
            await asyncio.sleep(0.15)  # the old code reconnected after 0.1 s
        finally:
            logger.remove(sink)
        assert fake.sockets_opened == opened
        [error] = [line for line in lines if "4915" in line]
        assert "banned" in error and "not reconnecting" in error
        assert driver.channel.status.startswith("down:")


async def test_intents_the_bot_lacks_are_one_error_naming_the_key(
    fake: FakeQQ, tmp_path: Path
) -> None:
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.settings import parse_settings

    fake.refuse_identify = 4014
    lines, sink = warnings()
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'i.db'}"},
            "plugins": {"paths": []},
            "channels": {"qq": QQDriver(fake).channel_settings()},
        },
        base_dir=tmp_path,
    )
    bot = Bot(settings, load_plugins=False, builtins=False)
    channel = SPEC.build(bot.channel_host, settings.channels.qq)
    task = asyncio.create_task(channel.run())
    try:
        await until(
            lambda: any("4014" in line for line in lines), 10, "no line about the 4014 refusal"
        )
    finally:
        await channel.stop()
        await task
        await bot.aclose()
        logger.remove(sink)
    [error] = [line for line in lines if "4014" in line]
    assert "channels.qq.intents" in error and not channel._ready.is_set()
    assert fake.sockets_opened == 1  # not asked again: QQ's table says 4014 must not retry


# -- the webhook --
async def test_the_webhook_on_the_http_channels_port(fake: FakeQQ, tmp_path: Path) -> None:
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.channel_registry import find_channels
    from chatfn.runtime.settings import parse_settings
    from chatfn.testing import ScriptedModel
    from tests.channels.contract import _echo, contract_registry

    driver = QQDriver(fake, "qq", mode="webhook")
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'hook.db'}"},
            "plugins": {"paths": []},
            "bot": {"reply_with_mention": False},
            "channels": {"qq": driver.channel_settings(), "http": {"port": 0}},
        },
        base_dir=tmp_path,
    )
    bot = Bot(
        settings,
        registry=contract_registry(),
        model=ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    http = find_channels().get("http").build(bot.channel_host)
    try:
        driver.channel = SPEC.build(bot.channel_host, settings.channels.qq)
        await http.start()  # on port 0: the URL is known once it listens
        url = f"http://127.0.0.1:{http.bound_port}/qq/webhook"
        driver._task = asyncio.create_task(driver.channel.run())
        async with asyncio.timeout(15):
            await driver.channel.wait_ready()
        await bot.start()
        async with aiohttp.ClientSession() as session:

            async def post(body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
                async with session.post(url, data=body, headers=headers) as r:
                    return r.status, await r.json(content_type=None)

            # op 13: the answer is QQ's signature of event_ts + plain_token with our key
            check = json.dumps(
                {"d": {"plain_token": "Arq0D5A61EgUu4OxUvOp", "event_ts": "1725442341"}, "op": 13}
            ).encode()
            status, answer = await post(check, {"User-Agent": "QQBot-Callback"})
            assert status == 200 and answer["plain_token"] == "Arq0D5A61EgUu4OxUvOp"
            assert fake.verify(b"1725442341Arq0D5A61EgUu4OxUvOp", answer["signature"])
            # never a signing oracle: a plain_token shaped like an event body is refused
            forged = json.dumps({"d": {"plain_token": '{"op":0}', "event_ts": "1"}, "op": 13})
            assert (await post(forged.encode(), {}))[0] == 400

            d = fake.message_event(
                "GROUP_AT_MESSAGE_CREATE", target="GW", sender="MW", content=" via webhook"
            )
            event = json.dumps(fake.callback("GROUP_AT_MESSAGE_CREATE", d)).encode()
            assert (await post(event, {"Content-Type": "application/json"}))[0] == 401
            tampered = fake.signed(event)
            assert (await post(event.replace(b"webhook", b"webhooK"), tampered))[0] == 401
            assert await post(event, fake.signed(event)) == (200, {"op": 12})
            assert await post(event, fake.signed(event)) == (200, {"op": 12})  # sent again
            c2c = fake.message_event("C2C_MESSAGE_CREATE", target="", sender="UW", content="dm")
            body = json.dumps(fake.callback("C2C_MESSAGE_CREATE", c2c)).encode()
            assert (await post(body, fake.signed(body)))[0] == 200
            await fake.wait_sent("group", "GW", 1, 10)
            await fake.wait_sent("c2c", "UW", 1, 10)
        assert [p.content for p in fake.sent_to("group", "GW")] == ["echo: via webhook"]
        assert [p.content for p in fake.sent_to("c2c", "UW")] == ["echo: dm"]
        assert fake.identifies == 0  # no gateway in webhook mode
    finally:
        await driver.detach()
        await http.stop()
        await bot.aclose()


# -- a dead secret --
async def test_a_dead_secret_is_one_clear_log_line(fake: FakeQQ, tmp_path: Path) -> None:
    from chatfn.channels.kit import REFUSED_RETRY
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.settings import parse_settings

    lines: list[str] = []
    sink = logger.add(
        lambda m: lines.append(str(m)),
        level="WARNING",
        filter=lambda r: r["name"].startswith("chatfn.channels.qq"),
    )
    driver = QQDriver(fake, "qq", secret="revoked-secret")
    try:
        settings = parse_settings(
            {
                "storage": {"url": f"sqlite:///{tmp_path / 'd.db'}"},
                "plugins": {"paths": []},
                "channels": {"qq": driver.channel_settings()},
            },
            base_dir=tmp_path,
        )
        bot = Bot(settings, load_plugins=False, builtins=False)
        channel = SPEC.build(bot.channel_host, settings.channels.qq)
        paused: list[float] = []
        pause = channel.pause

        async def record_pause(seconds: float) -> bool:
            paused.append(seconds)
            return await pause(seconds)

        channel.pause = record_pause  # type: ignore[method-assign]
        task = asyncio.create_task(channel.run())
        await until(lambda: lines and paused, 10, "no refusal logged and waited on")
        # The refusal waits REFUSED_RETRY (a minute) before it tries again: nothing more
        # comes meanwhile.
        assert paused == [REFUSED_RETRY]
        await channel.stop()
        await task
        await bot.aclose()
    finally:
        logger.remove(sink)
    assert len(lines) == 1 and "QQ refused channels.qq.app_id / channels.qq.secret" in lines[0]
    assert "revoked-secret" not in lines[0]


async def test_an_image_in_and_out_of_a_qq_group(fake: FakeQQ, tmp_path: Path) -> None:
    driver = QQDriver(fake, "qq")
    group = Chat("group", "GI")
    async with running(driver, tmp_path, bot={"reply_with_mention": True}):
        await driver.say(group, "/picture", sender="MI", mention=True)
        text, picture = await driver.sent(group, 2)
    # no raw <@MI> token: QQ shows group mentions only in Markdown; the text and the picture
    # are two messages (QQ may not show the content of a media message)
    assert text.text == "a picture" and text.images == [] and text.mentions == []
    assert picture.images == [PNG] and picture.text.strip() == ""
    assert not fake.refused
    upload = [c for c in fake.calls if c.endswith("/files")]
    assert upload == ["POST /v2/groups/GI/files"]


async def test_with_public_url_a_picture_is_uploaded_by_a_url_that_expires(
    fake: FakeQQ, tmp_path: Path
) -> None:
    """`channels.qq.public_url`: the bot serves the picture on its own web server under an
    unguessable path and QQ (the fake) downloads it from there; file_data (which QQ marks "not
    yet supported") is never sent, and the path answers 404 once `media_ttl` has passed."""
    from chatfn.channels.qq.media import MediaShelf
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.channel_registry import find_channels
    from chatfn.runtime.settings import parse_settings
    from chatfn.testing import ScriptedModel
    from tests.channels.contract import _echo, contract_registry

    fake.file_data_refused = True
    port = free_port()
    driver = QQDriver(fake, "qq", public_url=f"http://127.0.0.1:{port}")
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'media.db'}"},
            "plugins": {"paths": []},
            "channels": {"qq": driver.channel_settings(), "http": {"port": port}},
        },
        base_dir=tmp_path,
    )
    bot = Bot(
        settings,
        registry=contract_registry(),
        model=ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    http = find_channels().get("http").build(bot.channel_host)
    group = Chat("group", "GM")
    try:
        driver.channel = SPEC.build(bot.channel_host, settings.channels.qq)
        await http.start()
        driver._task = asyncio.create_task(driver.channel.run())
        async with asyncio.timeout(15):
            await driver.channel.wait_ready()
        await bot.start()
        await driver.say(group, "/picture", sender="MM", mention=True)
        _text, picture = await driver.sent(group, 2)
        assert picture.images == [PNG]  # what QQ downloaded from the bot
        [(url, status)] = fake.fetched
        assert status == 200 and url.startswith(f"http://127.0.0.1:{port}/qq/media/")
        assert len(url.rsplit("/", 1)[1]) >= 40  # 32 random bytes, URL-safe
        assert not fake.refused
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/qq/media/guess") as r:
                assert r.status == 404
    finally:
        await driver.detach()
        await http.stop()
        await bot.aclose()
    now = [0.0]
    shelf = MediaShelf("https://bot.example.com/", 600, clock=lambda: now[0], max_bytes=10)
    first = shelf.put(PNG[:8])
    assert first.startswith("https://bot.example.com/qq/media/") and len(shelf) == 1
    shelf.put(PNG[:8])  # over max_bytes: the oldest goes
    assert len(shelf) == 1
    now[0] = 601.0
    assert len(shelf) == 0  # expired


async def test_qq_official_and_onebot_in_one_process(fake: FakeQQ, tmp_path: Path) -> None:
    """Two platforms on one bot (a group moving from a OneBot account to the official bot):
    each message is answered where it came from; a reminder to a C2C chat answers its newest
    message (passive: QQ takes no active message there)."""
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.settings import parse_settings
    from chatfn.testing import ScriptedModel
    from tests.channels.contract import _echo, contract_registry
    from tests.channels.onebot.test_contract_onebot import OneBotDriver

    qq, onebot = QQDriver(fake, "qq"), OneBotDriver()
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'two.db'}"},
            "plugins": {"paths": []},
            "channels": {"qq": qq.channel_settings(), "onebot": onebot.channel_settings()},
        },
        base_dir=tmp_path,
    )
    model = ScriptedModel([_echo], repeat_last=True)
    bot = Bot(settings, registry=contract_registry(), model=model, load_plugins=False)
    try:
        await qq.attach(bot.channel_host, settings.channels.qq)
        await onebot.attach(bot.channel_host, settings.channels.onebot)
        await bot.start()
        same = Chat("private", "3001")
        said = await qq.say(same, "from the official bot")
        await onebot.say(same, "from onebot")
        [on_qq] = await qq.sent(same, 1)
        [on_onebot] = await onebot.sent(same, 1)
        await bot.send(OutgoingMessage("qq", "c2c:3001", "a reminder"))
        reminded = await qq.sent(same, 2)
    finally:
        await qq.detach()
        await onebot.detach()
        await bot.aclose()
    assert on_qq.text == "echo: from the official bot" and on_onebot.text == "echo: from onebot"
    assert reminded[-1].text == "a reminder"
    assert fake.sent_to("c2c", "3001")[-1].msg_id == said
