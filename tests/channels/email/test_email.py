"""The e-mail channel's own cases against real mail servers (mail_servers.py) with smtplib and
imaplib as the users: threads as chats and threaded replies, bounces, automatic replies and
strangers left unanswered, marked seen once stored, the outbox row's Message-ID kept when a
reply is sent again, the `check` probe; reading mail without a server."""

from __future__ import annotations

import asyncio
import imaplib
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from chatfn.channels.email import check
from chatfn.channels.email.mail import read_mail, thread_root, without_quote
from chatfn.channels.email.settings import EmailSettings
from tests.channels.contract import Chat, Running, _unmark_last
from tests.channels.email.email_driver import EmailDriver, running
from tests.channels.email.mail_servers import DOMAIN, MailServers


async def run_row(bot: Any, driver: EmailDriver, message_id: str) -> Any:
    """The stored row of the user's message `message_id` (its chat_id)."""
    return await Running(bot, driver).user_row(Chat("private", ""), message_id)


def flags(servers: MailServers, user: str) -> list[str]:
    box = imaplib.IMAP4("127.0.0.1", servers.imap_port, timeout=15)
    try:
        box.login(user, servers.passwords[user])
        box.select("INBOX", readonly=True)
        _, found = box.fetch("1:*", "(FLAGS)")
        return [line.decode() for line in found if isinstance(line, bytes)]
    finally:
        box.logout()


@pytest.mark.services
async def test_a_thread_is_a_chat_and_replies_are_threaded(
    mail: EmailDriver, tmp_path: Path
) -> None:
    one = Chat("private", "3001")
    async with running(mail, tmp_path) as bot:
        first = await mail.say(one, "first")
        [reply] = await mail.sent(one, 1)
        second = await mail.say(one, "> first\n\nsecond\n\nOn Mon, someone wrote:\n> old")
        replies = await mail.sent(one, 2)
        other = EmailMessage()  # a new mail from the same user, not a reply: another thread
        other["From"], other["To"] = mail.user("3001"), mail.bot_user
        other["Subject"], other["Message-ID"] = "new topic", f"<new.{mail.n}@{DOMAIN}>"
        other.set_content("another thread")
        await asyncio.to_thread(mail.submit, mail.user("3001"), other)
        replies = await mail.sent(one, 3)
        ids = {row.chat_id for row in [await run_row(bot, mail, m) for m in (first, second)]}
        third = await run_row(bot, mail, f"new.{mail.n}@{DOMAIN}")
    assert len(ids) == 1 and third.chat_id not in ids
    assert third.chat_id.endswith(f":thread:new.{mail.n}@{DOMAIN}")
    inbox = await asyncio.to_thread(mail.inbox, "3001")
    mine = [m for m in inbox if mail.bot_user in str(m["From"])]
    assert [r.text for r in replies] == ["echo: first", "echo: second", "echo: another thread"]
    assert str(mine[0]["In-Reply-To"]) == f"<{first}>" and reply.quote == first
    assert str(mine[1]["In-Reply-To"]) == f"<{second}>"
    assert f"<{first}>" in str(mine[1]["References"])
    assert str(mine[0]["Subject"]) == "Re: chat 3001"
    assert str(mine[0]["Auto-Submitted"]) == "auto-replied"
    assert str(mine[2]["References"]).split()[0] == str(other["Message-ID"])


@pytest.mark.services
async def test_bounces_automatic_replies_and_strangers_are_not_answered(
    mail: EmailDriver, tmp_path: Path
) -> None:
    chat = Chat("private", "3002")
    async with running(mail, tmp_path):
        await mail.say(chat, "I am away", Auto_Submitted="auto-replied")
        await mail.say(chat, "list mail", Precedence="bulk")
        bounce = mail.mail(chat, "Delivery failed")
        bounce.replace_header("From", f"MAILER-DAEMON@{DOMAIN}")
        await asyncio.to_thread(mail.submit, mail.user("3002"), bounce)
        await mail.say(chat, "a real question")
        [reply] = await mail.sent(chat, 1)
    assert reply.text == "echo: a real question"
    seen = flags(mail.servers, mail.bot)
    assert len(seen) == 4 and all("\\Seen" in f for f in seen), seen


@pytest.mark.services
async def test_only_allowed_senders_reach_the_bot(mail: EmailDriver, tmp_path: Path) -> None:
    mail.settings["allowed_senders"] = [f"u3003.{mail.n}@{DOMAIN}"]
    async with running(mail, tmp_path):
        await mail.say(Chat("private", "3004"), "not allowed")
        await mail.say(Chat("private", "3003"), "allowed")
        [reply] = await mail.sent(Chat("private", "3003"), 1)
        assert await asyncio.to_thread(mail.inbox, "3004") == []
    assert reply.text == "echo: allowed"


@pytest.mark.services
async def test_a_reply_sent_again_keeps_its_message_id(mail: EmailDriver, tmp_path: Path) -> None:
    chat = Chat("private", "3005")
    async with running(mail, tmp_path) as bot:
        await mail.say(chat, "hello")
        [first] = await mail.sent(chat, 1)
        await _unmark_last(bot, "email", mail.chat_id(chat))
    async with running(mail, tmp_path):
        again = await mail.sent(chat, 2)
    assert first.message_id and first.message_id.startswith("chatfn.")
    assert [s.message_id for s in again] == [first.message_id] * 2


@pytest.mark.services
async def test_check_online(mail_servers: MailServers) -> None:
    user = mail_servers.account("bot60")
    good = EmailSettings.model_validate(
        {
            "imap_url": f"imap://127.0.0.1:{mail_servers.imap_port}",
            "smtp_url": f"smtp+plain://127.0.0.1:{mail_servers.smtp_port}",
            "username": "bot60",
            "password": "secret",
            "address": user,
            "allowed_senders": [DOMAIN],
        }
    )
    probes = await check(good, True)
    assert [p.status for p in probes] == ["ok", "ok", "ok"], probes
    bad = EmailSettings.model_validate({**good.model_dump(), "password": "wrong"})
    [_, imap, smtp] = await check(bad, True)
    assert imap.status == smtp.status == "fail"
    assert "channels.email.username/password" in imap.detail and "password" in smtp.detail
    closed = EmailSettings.model_validate(
        {**good.model_dump(), "password": "secret", "imap_url": "imap://127.0.0.1:1"}
    )
    [_, imap, _] = await check(closed, True)
    assert imap.status == "fail" and "not reachable" in imap.detail


@pytest.mark.services
async def test_a_voice_memo_is_transcribed(mail: EmailDriver, tmp_path: Path) -> None:
    """An audio attachment (a voice memo, OGG/Opus) goes to voice.stt beside the mail's text;
    the answer is threaded as any other."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, tone

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    memo = await asyncio.to_thread(tone, 2.0, "ogg")
    async with AudioApi(transcripts=["call me back"]) as api:
        stt = {"base_url": api.base_url, "api_key": api.key, "model": "whisper"}
        async with running(mail, tmp_path, voice={"stt": stt}):
            chat = Chat("private", "3005")
            msg = mail.mail(chat, "", voice=memo)
            await asyncio.to_thread(mail.submit, mail.user(chat.native), msg)
            [reply] = await mail.sent(chat, 1)
    assert reply.text == "echo: call me back"
    [req] = api.transcriptions
    assert 1.9 < req.seconds < 2.1


@pytest.mark.services
async def test_a_spoken_reply_is_attached(mail: EmailDriver, tmp_path: Path) -> None:
    """`voice.tts` on for the chat: the reply mail carries the spoken reply as an audio
    attachment (OGG/Opus that decodes to audio), its text as the body."""
    from tests.fakes.audio_api import FFMPEG, AudioApi, probe

    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed")
    async with AudioApi() as api:
        tts = {"provider": "openai", "base_url": api.base_url, "api_key": api.key}
        tts |= {"model": "tts-1", "voice": "nova"}
        config = {"voice": {"tts": tts}, "chats": [{"voice": {"tts": "on"}}]}
        async with running(mail, tmp_path, **config):
            chat = Chat("private", "3006")
            await mail.say(chat, "read it to me")
            [reply] = await mail.sent(chat, 1)
            [got] = await asyncio.to_thread(mail.inbox, chat.native)
    assert reply.text == "echo: read it to me"
    [part] = [p for p in got.walk() if p.get_content_maintype() == "audio"]
    fmt, seconds = probe(part.get_payload(decode=True))
    assert "ogg" in fmt and seconds > 0.5


def test_reading_mail() -> None:
    msg = EmailMessage()
    msg["From"] = "Ann <Ann@Example.org>"
    msg["To"] = "bot@example.org"
    msg["Subject"] = "Re: plans"
    msg["Message-ID"] = "<3@example.org>"
    msg["In-Reply-To"] = "<2@example.org>"
    msg["References"] = "<1@example.org> <2@example.org>"
    msg.set_content("New text\n\nOn Tue, Bot wrote:\n> old text\n")
    got, why = read_mail(msg.as_bytes())
    assert why is None and got is not None
    assert (got.root, got.sender, got.text) == ("1@example.org", "ann@example.org", "New text")
    assert thread_root("x@y", "<a@b>", None) == "a@b" and thread_root("x@y", None, None) == "x@y"
    assert without_quote("hi\n> quoted\nthere\n-- \nsig") == "hi\nthere"
    msg.add_attachment(b"OggS fake voice", maintype="audio", subtype="ogg", filename="m.ogg")
    got, _why = read_mail(msg.as_bytes())
    assert got is not None and got.audio == [("audio/ogg", b"OggS fake voice")]
    msg["Auto-Submitted"] = "auto-generated"
    assert read_mail(msg.as_bytes()) == (None, "Auto-Submitted: auto-generated")


def test_settings() -> None:
    with pytest.raises(ValidationError, match="imap_url"):
        EmailSettings(imap_url="http://x")
    with pytest.raises(ValidationError, match="allowed_senders"):
        EmailSettings(allowed_senders=["not a domain"])
    s = EmailSettings(allowed_senders=["ann@example.org", "example.com", "@corp.test"])
    assert s.allows("ann@example.org") and s.allows("bob@example.com")
    assert s.allows("x@mail.corp.test") and not s.allows("eve@example.org")
    assert "channels.email.imap_url" in (EmailSettings().problem() or "")
