"""The Feishu channel's own cases (the shared contract runs in test_contract_feishu.py): the
webhook route (decryption, signatures, the verification token, the URL check, resent
events), the tenant token's refresh, rate limits, the uuid that keeps a re-sent row from
being posted twice, mentions, card escaping, the settings and the probe. Everything through
the real lark-oapi client against tests/channels/feishu/feishu_fake.py."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lark_oapi")

from loguru import logger  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from chatfn.channels.feishu import SPEC, check  # noqa: E402
from chatfn.channels.feishu.api import FeishuApi  # noqa: E402
from chatfn.channels.feishu.parse import parse_chat_id, read_message  # noqa: E402
from chatfn.channels.feishu.render import mention, to_feishu_markdown  # noqa: E402
from chatfn.channels.feishu.send import FeishuSender  # noqa: E402
from chatfn.channels.feishu.settings import FeishuSettings  # noqa: E402
from chatfn.channels.feishu.webhook import Refused, decrypt, open_request  # noqa: E402
from chatfn.common.messages import (  # noqa: E402
    DeliveryRefused,
    NotDelivered,
    OutgoingMessage,
    Unreachable,
)
from function_calls import FunctionResult, MessageContext, tool_function  # noqa: E402
from function_calls.registry import Registry  # noqa: E402
from tests.channels.contract import contract_registry  # noqa: E402
from tests.channels.feishu.feishu_driver import FeishuDriver, running  # noqa: E402
from tests.channels.feishu.feishu_fake import (  # noqa: E402
    BOT_OPEN_ID,
    FakeFeishu,
    card_markdown,
    read_markdown,
    sign,
)
from tests.channels.held_model import HeldModel, broker_away  # noqa: E402
from tests.kit import until  # noqa: E402

EVENTS = json.loads((Path(__file__).parents[2] / "fixtures/feishu/events.json").read_text())
HOSTILE = r"_*[]()~>#+-=|{}.!<at id=all></at> :OK: \`x` <font color='red'>r</font> &amp; 1.5"
#: HOSTILE as Markdown reads it (an escaped backtick, an entity), so as a user should see it.
AS_READ = HOSTILE.replace("\\`", "`").replace("&amp;", "&")


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as server:
        yield server


@pytest.fixture
async def closing() -> AsyncIterator[list[FeishuApi]]:
    """API clients a test made itself: their pooled HTTP client is closed after it."""
    made: list[FeishuApi] = []
    yield made
    for api in made:
        await api.aclose()


def settings_for(fake: FakeFeishu, **more: Any) -> FeishuSettings:
    return FeishuSettings(
        app_id=fake.app_id,
        app_secret=fake.app_secret,
        domain=fake.domain,
        send_rate=0,
        **more,
    )


def texts(fake: FakeFeishu, chat: str) -> list[str]:
    return [read_markdown(card_markdown(p))[0] for p in fake.sent_to(chat)]


# -- pure parts ------------------------------------------------------------------------------
def test_chat_ids_round_trip_and_bad_ones_are_named() -> None:
    documented = parse_chat_id("group:oc_5ce6d572455d361153b7xx51da133945")
    assert (documented.is_group, documented.target) == (True, "oc_5ce6d572455d361153b7xx51da133945")
    for chat_id in ("private:oc_p1", "group:oc_g1", "group:oc_g1:thread:om_root1"):
        assert parse_chat_id(chat_id).key == chat_id
    assert parse_chat_id("group:oc_g1:thread:om_root1").thread == "om_root1"
    bad_ones = ("oc_1", "group:ou_1", "group:oc_", "dm:oc_1", "group:oc_1:thread:omt_x")
    for bad in (*bad_ones, "private:oc_1:thread:om_1", "group:oc_1:topic:om_1"):
        with pytest.raises(ValueError, match="not a Feishu chat id"):
            parse_chat_id(bad)


def test_the_documented_event_is_read_and_the_bots_mention_removed() -> None:
    message = EVENTS["message_receive_text_mention"]["event"]["message"]
    read = read_message(message, BOT_OPEN_ID)
    assert read.mentioned and read.text == "hello & welcome <b>"
    other = read_message(message, "ou_someone_else")
    assert not other.mentioned and other.text == "@chatfnbot hello & welcome <b>"
    post = {
        "message_type": "post",
        "content": json.dumps(
            {
                "title": "Plan",
                "content": [
                    [
                        {"tag": "at", "user_id": "@_user_1", "user_name": "bot"},
                        {"tag": "text", "text": " see "},
                        {"tag": "a", "text": "this", "href": "https://x.org/a"},
                        {"tag": "at", "user_id": "@_user_2", "user_name": "Ann"},
                    ],
                    [{"tag": "img", "image_key": "img_v3_1"}],
                ],
            }
        ),
        "mentions": [
            {"key": "@_user_1", "id": {"open_id": BOT_OPEN_ID}, "name": "bot"},
            {"key": "@_user_2", "id": {"open_id": "ou_ann"}, "name": "Ann"},
            {"key": "@_user_10", "id": {"open_id": "ou_ten"}, "name": "Ten"},
        ],
    }
    read = read_message(post, BOT_OPEN_ID)
    assert read.mentioned and read.image_keys == ["img_v3_1"]
    assert read.text == "Plan\nsee this (https://x.org/a)@Ann"
    ten = {
        "message_type": "text",
        "content": '{"text":"@_user_10 and @_all"}',
        "mentions": post["mentions"],
    }
    assert read_message(ten, BOT_OPEN_ID).text == "@Ten and @all"


def test_card_markdown_escapes_everything_the_model_writes() -> None:
    rendered = to_feishu_markdown(HOSTILE)
    shown, styles, mentions = read_markdown(rendered)
    assert mentions == [] and "<at" not in rendered and "<font" not in rendered
    assert ":OK:" not in rendered  # no emoji code
    assert styles == set(), styles  # nothing formats
    assert shown == AS_READ  # every character shown
    code = to_feishu_markdown("```html\n<at id=all></at> if a < b && c\n```")
    assert "<at" not in code and "a < b && c" in code  # code stays readable
    link = to_feishu_markdown("[click](javascript:alert(1)) [ok](https://x.org/a_(b))")
    assert "](javascript" not in link and "[ok](https://x.org/a_%28b%29)" in link
    assert mention("ou_abc") == "<at id=ou_abc></at> "
    assert mention("all") == "" and mention("x></at><at id=all") == ""


def test_settings_name_the_key_and_what_was_expected() -> None:
    assert FeishuSettings(domain="Lark").base_url == "https://open.larksuite.com"
    assert FeishuSettings().base_url == "https://open.feishu.cn"
    assert FeishuSettings(domain="http://127.0.0.1:9/").base_url == "http://127.0.0.1:9"
    with pytest.raises(ValidationError, match="feishu, lark or an https origin"):
        FeishuSettings(domain="http://example.com")
    with pytest.raises(ValidationError, match="without a path"):
        FeishuSettings(domain="https://open.feishu.cn/open-apis")
    with pytest.raises(ValidationError, match="verification_token"):
        FeishuSettings(app_id="cli_1", app_secret="s", mode="webhook")
    with pytest.raises(ValidationError, match="mode"):
        FeishuSettings(mode="polling")
    with pytest.raises(ValidationError, match="max_message_length"):
        FeishuSettings(max_message_length=9000)


def test_webhook_requests_are_decrypted_and_checked() -> None:
    vector = EVENTS["encrypt_example"]  # the reference's own example
    assert decrypt(vector["encrypt_key"], vector["encrypt"]) == vector["plaintext"]
    fake = FakeFeishu(verification_token="xxxxxx", encrypt_key="k3y")
    challenge = EVENTS["url_verification"]
    body, headers = fake.webhook_body(challenge)
    assert "X-Lark-Signature" not in headers  # the URL check is not signed
    assert open_request(body, headers, "xxxxxx", "k3y").challenge == "ajls384kdjx98XX"
    with pytest.raises(Refused, match="verification_token") as refused:
        open_request(body, headers, "other", "k3y")
    assert refused.value.status == 401
    event = EVENTS["message_receive_text_mention"]
    body, headers = fake.webhook_body(event)
    assert open_request(body, headers, "xxxxxx", "k3y").payload == event
    for bad in (
        {**headers, "X-Lark-Signature": "0" * 64},
        {**headers, "X-Lark-Request-Nonce": "replayed"},
        {k: v for k, v in headers.items() if k != "X-Lark-Signature"},
    ):
        with pytest.raises(Refused, match="X-Lark-Signature"):
            open_request(body, bad, "xxxxxx", "k3y")
    with pytest.raises(Refused, match="does not decrypt"):
        open_request(body, headers, "xxxxxx", "another key")
    plain = json.dumps(event).encode()
    with pytest.raises(Refused, match="plain event"):
        open_request(plain, {}, "xxxxxx", "k3y")
    assert open_request(plain, {}, "xxxxxx", "").payload == event  # no encrypt_key set
    with pytest.raises(Refused, match="wrong verification_token"):
        open_request(plain, {}, "yyyyyy", "")
    with pytest.raises(Refused, match="not JSON"):
        open_request(b"<xml/>", {}, "xxxxxx", "")
    stamp, nonce = "1700000000", "n"
    assert (
        sign("k", stamp, nonce, b"{}")
        == __import__("hashlib").sha256(b"1700000000nk{}").hexdigest()
    )


def test_the_platforms_answers_are_sorted() -> None:
    from lark_oapi.core.model import BaseResponse, RawResponse

    from chatfn.channels.feishu.api import FeishuError, RateLimited, Unavailable, check

    def answer(status: int, code: int, headers: dict[str, str] | None = None) -> BaseResponse:
        raw = RawResponse()
        raw.status_code, raw.headers, raw.content = status, headers or {}, b"{}"
        response = BaseResponse()
        response.code, response.msg, response.raw = code, "m", raw
        return response

    ok = answer(200, 0)
    assert check(ok) is ok
    with pytest.raises(RateLimited) as limited:
        check(answer(429, 99991400, {"X-Ogw-Ratelimit-Reset": "3"}))
    assert limited.value.wait == 3.0
    with pytest.raises(RateLimited) as chat_limited:  # too fast for one chat: no header
        check(answer(400, 230020))
    assert chat_limited.value.wait == 1.0
    with pytest.raises(Unavailable):
        check(answer(503, 0))
    with pytest.raises(Unavailable, match="1000004"):  # a 5xx naming a code is still a 5xx
        check(answer(500, 1000004))
    with pytest.raises(FeishuError) as refused:
        check(answer(400, 99991663))
    assert refused.value.code == 99991663 and not isinstance(refused.value, RateLimited)


# -- the probe and the token -------------------------------------------------------------------
async def test_probe_offline_and_online(fake: FakeFeishu) -> None:
    [missing] = await check(FeishuSettings(), online=False)
    assert missing.status == "fail" and "app_id" in missing.detail
    offline, online = await check(settings_for(fake), online=True)
    assert offline.status == "ok" and "long connection" in offline.detail
    assert online.status == "ok" and "chatfnbot" in online.detail and BOT_OPEN_ID in online.detail
    assert "bot_info" in fake.calls
    dead = settings_for(fake).model_copy(
        update={"app_secret": FeishuSettings(app_secret="revoked").app_secret}
    )
    _, refused = await check(dead, online=True)
    assert refused.status == "fail"
    assert refused.detail == (
        "Feishu refused channels.feishu.app_id / app_secret (10014: app secret invalid): "
        "check the app's Credentials & Basic Info page"
    )
    hook = settings_for(fake, mode="webhook", verification_token="v")
    ok, warn = await check(hook, online=False)
    assert ok.status == "ok" and "webhook at /feishu/events" in ok.detail
    assert warn.status == "warn" and warn.detail.startswith("channels.feishu.encrypt_key is not")
    gone = settings_for(fake).model_copy(update={"domain": "http://127.0.0.1:9"})
    _, unreachable = await check(gone, online=True)
    assert unreachable.status == "fail" and "not reachable" in unreachable.detail


async def test_the_token_is_renewed_when_due_and_when_refused(
    fake: FakeFeishu, closing: list[FeishuApi]
) -> None:
    api = FeishuApi(settings_for(fake))
    closing.append(api)
    fake.chat("oc_t1", group=True)
    first = await api.token.get()
    assert await api.token.get() == first and fake.tokens_issued == 1
    # Many calls at once while no token is held: one fetch.
    api.token.forget(first)
    got = await asyncio.gather(*(api.token.get() for _ in range(5)))
    assert len(set(got)) == 1 and fake.tokens_issued == 2
    # Revoked on the platform's side: the call is answered 99991663, a new token is
    # fetched and the same call made again.
    fake.revoke_tokens()
    await api.send("oc_t1", "text", '{"text":"after revocation"}', "u-1")
    assert fake.tokens_issued == 3 and [p.content for p in fake.sent_to("oc_t1")] == [
        {"text": "after revocation"}
    ]
    # A short-lived token is renewed at half its life: 1 s, used for 0.5 s.
    later = 0.0  # the token cache's clock runs this far ahead of the real one
    api.token.clock = lambda: time.monotonic() + later
    fake.token_ttl = 1
    api.token.forget(await api.token.get())
    short = await api.token.get()
    assert await api.token.get() == short
    later = 0.6
    assert await api.token.get() != short and fake.tokens_issued == 5


# -- the sender ------------------------------------------------------------------------------
async def test_a_row_sent_again_is_posted_once_and_refusals_are_sorted(
    fake: FakeFeishu, closing: list[FeishuApi]
) -> None:
    settings = settings_for(fake, max_message_length=200)
    sender = FeishuSender(FeishuApi(settings), settings)
    closing.append(sender.api)
    fake.chat("oc_g1", group=True)
    text = "\n\n".join(f"part {n} " + "y" * 150 for n in range(3))
    row = OutgoingMessage("feishu", "group:oc_g1", text, is_group=True, event_id=41)
    first = await sender.deliver(row)
    again = await sender.deliver(row)  # the outbox after a crash before the mark
    assert len(first) == 3 and [s.message_id for s in again] == [s.message_id for s in first]
    assert len(fake.sent_to("oc_g1")) == 3
    assert len({p.uuid for p in fake.sent_to("oc_g1")}) == 3
    assert all(len(p.uuid) <= 50 for p in fake.sent_to("oc_g1"))
    other = OutgoingMessage("feishu", "group:oc_g1", text, is_group=True, event_id=42)
    await sender.deliver(other)  # the same text in another row is another message
    assert len(fake.sent_to("oc_g1")) == 6
    with pytest.raises(DeliveryRefused, match="not a Feishu chat id"):
        await sender.deliver(OutgoingMessage("feishu", "oc_g1", "x"))
    with pytest.raises(DeliveryRefused, match="230002"):
        await sender.deliver(OutgoingMessage("feishu", "group:oc_notin", "x"))
    fake.broken["oc_g1"] = 502  # the platform's gateway failed: the outbox tries again
    with pytest.raises(NotDelivered, match="HTTP 502"):
        await sender.deliver(OutgoingMessage("feishu", "group:oc_g1", "x", event_id=44))
    fake.broken["oc_g1"] = 500  # the platform failed and names a code: tried again too
    with pytest.raises(Unreachable, match="HTTP 500"):
        await sender.deliver(OutgoingMessage("feishu", "group:oc_g1", "x", event_id=45))
    fake.rate_limited["oc_g1"] = 120  # longer than max_retry_after: left in the outbox
    with pytest.raises(NotDelivered, match="wait 120 s"):
        await sender.deliver(OutgoingMessage("feishu", "group:oc_g1", "x", event_id=43))
    fake.app_secret = "rotated"  # the old secret is dead
    fake.revoke_tokens()
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="WARNING")
    try:
        for n in range(2):
            with pytest.raises(NotDelivered, match="10014"):
                await sender.deliver(OutgoingMessage("feishu", "group:oc_g1", "x", event_id=50 + n))
    finally:
        logger.remove(sink)
    assert lines == [
        "Feishu refused channels.feishu.app_id / app_secret (10014: app secret invalid): "
        "messages wait in the outbox until they work"
    ]


async def test_a_split_reply_left_by_a_long_rate_limit_owes_only_the_rest(
    fake: FakeFeishu, closing: list[FeishuApi]
) -> None:
    settings = settings_for(fake, max_message_length=200, max_retry_after=5)
    sender = FeishuSender(FeishuApi(settings), settings)
    closing.append(sender.api)
    fake.chat("oc_g2", group=True)
    text = "\n\n".join(f"part {n} " + "z" * 150 for n in range(3))
    original = fake._limited

    def second_send_limited(chat: str) -> Any:
        if len(fake.sent_to(chat)) == 1:
            fake.rate_limited[chat] = 30
        return original(chat)

    fake._limited = second_send_limited  # type: ignore[method-assign]
    with pytest.raises(NotDelivered) as owed:
        await sender.deliver(OutgoingMessage("feishu", "group:oc_g2", text, event_id=7))
    assert owed.value.rest is not None and owed.value.rest.startswith("part 1 ")
    assert "part 0" not in owed.value.rest and len(fake.sent_to("oc_g2")) == 1


# -- through the bot -------------------------------------------------------------------------
async def test_mentions_quotes_and_names_in_a_group(fake: FakeFeishu, tmp_path: Path) -> None:
    driver = FeishuDriver(fake)
    async with running(
        driver, tmp_path, bot={"reply_with_mention": True, "reply_with_quote": True}
    ) as bot:
        fake.names["ou_ann"] = "Ann"
        mentions = [
            {"key": "@_user_1", "id": {"open_id": BOT_OPEN_ID}, "name": "chatfnbot"},
            {"key": "@_user_2", "id": {"open_id": "ou_tom"}, "name": "Tom"},
        ]
        event = fake.message_event(
            "oc_g9", "ou_ann", group=True, text="@_user_1 ask @_user_2 <b>", mentions=mentions
        )
        await fake.push(event)
        [sent] = await fake.wait_sent("oc_g9", 1)
        shown, _styles, at = read_markdown(card_markdown(sent))
        assert at == ["ou_ann"] and sent.parent_id == event["event"]["message"]["message_id"]
        assert shown == "echo: ask @Tom <b>"
        history = await bot.api_host.history("feishu", "group:oc_g9", 10)
        user = next(h for h in history if h.role == "user")
        assert user.text == "ask @Tom <b>" and user.sender_name == "Ann"
        # Not addressed to the bot: stored, not answered.
        await fake.push(fake.message_event("oc_g9", "ou_ann", group=True, text="chatter"))
        await fake.push(
            fake.message_event(
                "oc_g9", "ou_ann", group=True, text="@_user_1 two", mentions=mentions
            )
        )
        await fake.wait_sent("oc_g9", 2)
        assert [read_markdown(card_markdown(p))[0] for p in fake.sent_to("oc_g9")] == [
            "echo: ask @Tom <b>",
            "echo: two",
        ]


async def test_a_thread_is_its_own_chat_and_answers_stay_in_it(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    driver = FeishuDriver(fake)
    bot_mention = [{"key": "@_user_1", "id": {"open_id": BOT_OPEN_ID}, "name": "chatfnbot"}]
    async with running(driver, tmp_path, bot={"reply_with_mention": False}) as bot:
        top = fake.message_event(
            "oc_g20", "ou_20", group=True, text="@_user_1 top", mentions=bot_mention
        )
        await fake.push(top)
        await fake.wait_sent("oc_g20", 1)
        root = top["event"]["message"]["message_id"]
        inner = fake.message_event(
            "oc_g20",
            "ou_20",
            group=True,
            text="@_user_1 inside",
            mentions=bot_mention,
            thread_root=root,
        )
        await fake.push(inner)
        first, second = await fake.wait_sent("oc_g20", 2)
        assert (first.thread, first.parent_id) == ("", "")
        assert (second.thread, second.parent_id) == (root, root)
        assert texts(fake, "oc_g20") == ["echo: top", "echo: inside"]
        thread = f"group:oc_g20:thread:{root}"
        history = await bot.api_host.history("feishu", thread, 10)
        assert [h.text for h in history if h.role == "user"] == ["inside"]
        # What the bot starts on its own in the thread (a reminder) goes there too.
        assert driver.channel is not None
        await driver.channel.send(OutgoingMessage("feishu", thread, "reminder", is_group=True))
        third = (await fake.wait_sent("oc_g20", 3))[2]
        assert third.thread == root and texts(fake, "oc_g20")[2] == "reminder"


async def test_a_hostile_reply_arrives_as_written(fake: FakeFeishu, tmp_path: Path) -> None:
    registry = Registry()
    with registry.collecting():

        @tool_function(name="hostile", description="Text full of markup characters.")
        async def hostile(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=["if a<b && c>d: **ok** " + HOSTILE])

    driver = FeishuDriver(fake)
    async with running(driver, tmp_path, registry=registry):
        await fake.push(fake.message_event("oc_p7", "ou_7", group=False, text="/hostile"))
        [sent] = await fake.wait_sent("oc_p7", 1)
        shown, styles, at = read_markdown(card_markdown(sent))
        assert at == [] and styles == {"bold"}
        assert shown == "if a<b && c>d: ok " + AS_READ


async def test_the_same_event_resent_is_handled_once(fake: FakeFeishu, tmp_path: Path) -> None:
    driver = FeishuDriver(fake)
    async with running(driver, tmp_path) as bot:
        event = fake.message_event("oc_p8", "ou_8", group=False, text="hello")
        await fake.push(event)
        await fake.push(event)  # the platform's resend: the same event_id
        await fake.wait_sent("oc_p8", 1)
        await fake.push(fake.message_event("oc_p8", "ou_8", group=False, text="next"))
        await fake.wait_sent("oc_p8", 2)
        assert texts(fake, "oc_p8") == ["echo: hello", "echo: next"]
        # The same message in a new event (after a restart, the event ids forgotten): the
        # stored message is recognised.
        assert driver.channel is not None
        driver.channel.inbound.seen.clear()
        await fake.push(event)
        await fake.push(fake.message_event("oc_p8", "ou_8", group=False, text="last"))
        await fake.wait_sent("oc_p8", 3)
        assert texts(fake, "oc_p8") == ["echo: hello", "echo: next", "echo: last"]
        history = await bot.api_host.history("feishu", "private:oc_p8", 20)
        assert [h.text for h in history if h.role == "user"] == ["hello", "next", "last"]


async def test_an_event_is_answered_handled_only_once_its_message_is_stored(
    fake: FakeFeishu, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message waiting behind its chat's running turn: its frame gets no answer while it
    waits, then 200 once stored; past ACK_WAIT a 500, so the platform pushes it again, and
    the push after it was stored is answered 200 and not handled twice."""
    from chatfn.channels.feishu import channel as feishu_channel
    from tests.channels.contract import _echo

    monkeypatch.setattr(feishu_channel, "ACK_WAIT", 30.0)  # a loaded machine: not given up
    gate = asyncio.Event()
    driver = FeishuDriver(fake)
    async with running(driver, tmp_path, model=HeldModel(_echo, gate)):
        first = await fake.push(fake.message_event("oc_p9", "ou_9", group=False, text="hold on"))
        await fake.wait_for(lambda: fake.answers.get(first) == 200)  # stored, turn running
        queued = fake.message_event("oc_p9", "ou_9", group=False, text="queued behind")
        frame = await fake.push(queued)
        # The bot's own message after it, answered as soon as it is read: read in order, the
        # queued one was read (and taken) before.
        own = fake.message_event("oc_p99", "ou_99", group=False, text="own")
        own["event"]["sender"]["sender_type"] = "app"
        own_frame = await fake.push(own)
        await fake.wait_for(lambda: fake.answers.get(own_frame) == 200)
        assert frame not in fake.answers  # taken, waiting for the chat's turn, not stored
        gate.set()
        await fake.wait_for(lambda: fake.answers.get(frame) == 200)

        gate.clear()
        monkeypatch.setattr(feishu_channel, "ACK_WAIT", 0.3)
        await fake.push(fake.message_event("oc_p9", "ou_9", group=False, text="hold again"))
        late = fake.message_event("oc_p9", "ou_9", group=False, text="late")
        frame = await fake.push(late)
        await fake.wait_for(lambda: fake.answers.get(frame) == 500)  # pushed again later
        gate.set()
        await fake.wait_sent("oc_p9", 4)
        again = await fake.push(late)  # the platform's push again: the same event_id
        await fake.wait_for(lambda: fake.answers.get(again) == 200)
        # A message after it in the chat, answered: a second turn of `late` would be before it.
        await fake.push(fake.message_event("oc_p9", "ou_9", group=False, text="after"))
        await fake.wait_sent("oc_p9", 5)
    assert texts(fake, "oc_p9") == [
        "echo: hold on",
        "echo: queued behind",
        "echo: hold again",
        "echo: late",
        "echo: after",
    ]


async def test_an_event_whose_handling_failed_before_the_store_is_answered_500(
    fake: FakeFeishu, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`host.handle` raising before the message is stored (a cluster gateway whose broker is
    away; `Bot.handle` stands in for it): a 500, and the platform's push again is taken."""
    from chatfn.channels import intake

    monkeypatch.setattr(intake, "RETAKE_AFTER", 0.0)  # the push again is taken at once
    driver = FeishuDriver(fake)
    async with running(driver, tmp_path) as bot:
        tries = broker_away(bot, monkeypatch, {"once": 1})
        event = fake.message_event("oc_p10", "ou_10", group=False, text="once")
        first = await fake.push(event)
        await fake.wait_for(lambda: fake.answers.get(first) == 500)
        again = await fake.push(event)  # the platform's push again: the same event_id
        await fake.wait_for(lambda: fake.answers.get(again) == 200)
        await fake.wait_sent("oc_p10", 1)
    assert texts(fake, "oc_p10") == ["echo: once"] and tries == ["once", "once"]


async def test_a_dead_secret_is_one_clear_line(fake: FakeFeishu, tmp_path: Path) -> None:
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.settings import parse_settings

    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="WARNING")
    driver = FeishuDriver(fake, app_secret="revoked")
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'dead.db'}"},
            "plugins": {"paths": []},
            "channels": {"feishu": driver.channel_settings()},
        },
        base_dir=tmp_path,
    )
    bot = Bot(settings, registry=contract_registry(), load_plugins=False)
    channel = SPEC.build(bot.channel_host, settings.channels.feishu)
    task = asyncio.create_task(channel.run())
    try:
        await until(lambda: any("Feishu" in x for x in lines), 10, "no line about Feishu's refusal")
        assert [x for x in lines if "Feishu" in x] == [
            "Feishu refused channels.feishu.app_id / app_secret (10014: app secret invalid): "
            "check the app's Credentials & Basic Info page"
        ]
        assert not task.done()  # it tries again later (the secret may be fixed)
    finally:
        logger.remove(sink)
        await channel.stop()
        await asyncio.gather(task, return_exceptions=True)
        await bot.aclose()


async def test_the_long_connection_is_retried_until_the_endpoint_answers(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="INFO")
    fake.link_down = True  # the endpoint answers 503 "system busy"
    driver = FeishuDriver(fake)
    try:
        async with running(driver, tmp_path, attach=False) as bot:
            channel = SPEC.build(bot.channel_host, bot.settings.channels.feishu)
            driver.channel = channel
            driver._task = asyncio.create_task(channel.run())
            # The first try, and again after 0.5 s.
            await until(lambda: fake.calls.count("ws.endpoint") >= 2, 10, "not tried again")
            assert not channel._ready.is_set() and fake.connections == 0
            fake.link_down = False
            async with asyncio.timeout(15):
                await channel.wait_ready()
            await fake.push(fake.message_event("oc_p5", "ou_5", group=False, text="at last"))
            await fake.wait_sent("oc_p5", 1)
            assert texts(fake, "oc_p5") == ["echo: at last"]
    finally:
        logger.remove(sink)
    said = [x for x in lines if x.startswith("Feishu long connection")]
    assert len(said) == 1 and said[0].startswith("Feishu long connection failed (")


# -- webhook mode ----------------------------------------------------------------------------
async def test_webhook_mode_on_the_http_channels_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chatfn.channels.feishu import channel as feishu_channel
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.channel_registry import find_channels
    from chatfn.runtime.settings import parse_settings
    from tests.channels.contract import _echo

    async with FakeFeishu(verification_token="v-tok", encrypt_key="enc-key") as fake:
        driver = FeishuDriver(
            fake, mode="webhook", verification_token="v-tok", encrypt_key="enc-key"
        )
        settings = parse_settings(
            {
                "storage": {"url": f"sqlite:///{tmp_path / 'hook.db'}"},
                "plugins": {"paths": []},
                "bot": {"reply_with_mention": False},
                "welcome": {"messages": {}, "default": "Welcome, {name}!"},
                "channels": {"feishu": driver.channel_settings(), "http": {"port": 0}},
            },
            base_dir=tmp_path,
        )
        bot = Bot(
            settings,
            registry=contract_registry(),
            model=HeldModel(_echo, gate := asyncio.Event()),
            load_plugins=False,
        )
        http = find_channels().get("http").build(bot.channel_host)
        try:
            driver.channel = SPEC.build(bot.channel_host, settings.channels.feishu)
            await http.start()  # on port 0: where the fake posts is known once it listens
            fake.webhook_url = f"http://127.0.0.1:{http.bound_port}/feishu/events"
            driver._task = asyncio.create_task(driver.channel.run())
            async with asyncio.timeout(15):
                await driver.channel.wait_ready()
            await bot.start()
            check = dict(EVENTS["url_verification"], token="v-tok")
            assert await fake.post_webhook(check) == (200, {"challenge": "ajls384kdjx98XX"})
            forged = dict(check, token="guess")
            assert (await fake.post_webhook(forged))[0] == 401
            event = fake.message_event("oc_p3", "ou_3", group=False, text="over the hook")
            assert (await fake.post_webhook(event, headers={"X-Lark-Signature": "00"}))[0] == 401
            assert await fake.post_webhook(event) == (200, {"msg": "success"})
            assert (await fake.post_webhook(event))[0] == 200  # resent: answered once
            fake.encrypt_key = ""  # a plain body although the bot has an encrypt_key
            assert (await fake.post_webhook(event))[0] == 401
            fake.encrypt_key = "enc-key"
            await fake.push(fake.member_added_event("oc_g3", [("ou_new", "Newcomer")]))
            await fake.push(fake.message_event("oc_p3", "ou_3", group=False, text="again"))
            await fake.wait_sent("oc_p3", 2)
            [welcome] = await fake.wait_sent("oc_g3", 1)
            assert texts(fake, "oc_p3") == ["echo: over the hook", "echo: again"]
            assert "Welcome, Newcomer!" in read_markdown(card_markdown(welcome))[0]
            assert fake.connections == 0  # no long connection in webhook mode
            # A message waiting behind its chat's running turn: a 503 past ACK_WAIT (the
            # platform pushes it again), a 200 to the push after it was stored.
            held = fake.message_event("oc_p4", "ou_4", group=False, text="hold on")
            assert (await fake.post_webhook(held))[0] == 200
            late = fake.message_event("oc_p4", "ou_4", group=False, text="late")
            monkeypatch.setattr(feishu_channel, "ACK_WAIT", 0.3)
            assert (await fake.post_webhook(late))[0] == 503
            monkeypatch.setattr(feishu_channel, "ACK_WAIT", 30.0)
            gate.set()
            assert (await fake.post_webhook(late))[0] == 200
            await fake.wait_sent("oc_p4", 2)
            assert texts(fake, "oc_p4") == ["echo: hold on", "echo: late"]
        finally:
            await driver.detach()
            await http.stop()
            await bot.aclose()
