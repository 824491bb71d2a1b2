"""The e-mail channel and real mail servers (Dovecot for IMAP, aiosmtpd delivering through
dovecot-lda: mail_servers.py) as the channel contract drives them, the users played by the
standard library's smtplib and imaplib (in threads).

Every driver has its own accounts (`bot<n>`, `u<native>.<n>`), so what one test leaves in a
mailbox is not seen by the next. A contract chat is one thread: the first mail of a chat has
the Message-ID `<t<native>.<n>@mail.test>` (the thread's root), the next ones reply to the
previous mail of the chat (In-Reply-To, References).
"""

from __future__ import annotations

import asyncio
import email
import imaplib
import itertools
import re
import smtplib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email import policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from chatfn.channels.email import SPEC
from chatfn.channels.email.channel import EmailChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.channel_host import ChannelHost
from chatfn.runtime.settings import parse_settings
from chatfn.testing import ScriptedModel
from function_calls.registry import Registry
from tests.channels.contract import Chat, Sent, _echo, contract_registry
from tests.channels.email.mail_servers import DOMAIN, MailServers
from tests.kit import until

_COUNTER = itertools.count(1)


def delivery_order(mail: EmailMessage) -> str:
    """The id of the topmost Received line (the test MTA's: mail_servers.py)."""
    found = re.search(r" id (\d+);", str(mail.get("Received") or ""))
    return found.group(1) if found else ""


class EmailDriver:
    platform = "email"
    max_length = 100_000
    # no "credentials": the contract case timed out twice in the CI services lane (Dovecot takes
    # 2 s per refused login, under load)
    features = frozenset(
        {
            "plain",
            "images_in",
            "images_out",
            "reconnect",
            "crash_redelivery",
        }
    )

    def __init__(self, servers: MailServers, **settings: Any) -> None:
        self.servers = servers
        self.settings = settings
        self.n = next(_COUNTER)
        self.bot = f"bot{self.n}"
        self.bot_user = servers.account(self.bot)
        self.channel: EmailChannel | None = None
        self._task: asyncio.Task[None] | None = None
        self._last: dict[str, str] = {}  # chat native -> the last Message-ID sent in it
        self._mails = itertools.count(1)

    def user(self, native: str) -> str:
        return self.servers.account(f"u{native}.{self.n}")

    def root(self, chat: Chat) -> str:
        return f"t{chat.native}.{self.n}@{DOMAIN}"

    # -- the Driver protocol -----------------------------------------------------------------
    def channel_settings(self) -> dict[str, Any]:
        return {
            "imap_url": f"imap://127.0.0.1:{self.servers.imap_port}",
            "smtp_url": f"smtp+plain://127.0.0.1:{self.servers.smtp_port}",
            "username": self.bot,
            "password": "secret",
            "address": self.bot_user,
            "allowed_senders": [DOMAIN],
            "send_rate": 0,
            **self.settings,
        }

    async def attach(self, host: ChannelHost, settings: Any, *, ready: bool = True) -> None:
        self.channel = SPEC.build(host, settings)
        self._task = asyncio.create_task(self.channel.run())
        if ready:
            async with asyncio.timeout(20):
                await self.channel.wait_ready()

    async def detach(self) -> None:
        if self.channel is not None:
            await self.channel.stop()
            self.channel = None
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def close(self) -> None:
        await self.detach()
        self.servers.account(self.bot)  # its password back, should a test have changed it

    def chat_id(self, chat: Chat) -> str:
        return f"private:{self.user(chat.native)}:thread:{self.root(chat)}"

    async def say(
        self,
        chat: Chat,
        text: str,
        *,
        sender: str = "1001",
        mention: bool = False,
        image: bytes | None = None,
        role: str | None = None,
        **headers: str,
    ) -> str:
        msg = self.mail(chat, text, image=image, **headers)
        await asyncio.to_thread(self.submit, self.user(chat.native), msg)
        return str(msg["Message-ID"]).strip("<>")

    def mail(
        self,
        chat: Chat,
        text: str,
        *,
        image: bytes | None = None,
        voice: bytes | None = None,
        **headers: str,
    ) -> EmailMessage:
        msg = EmailMessage()
        msg["From"] = f"User {chat.native} <{self.user(chat.native)}>"
        msg["To"] = self.bot_user
        msg["Subject"] = f"chat {chat.native}"
        last = self._last.get(chat.native)
        mid = self.root(chat) if last is None else f"m{next(self._mails)}.{self.n}@{DOMAIN}"
        msg["Message-ID"] = f"<{mid}>"
        if last is not None:
            msg["In-Reply-To"] = f"<{last}>"
            msg["References"] = (
                f"<{self.root(chat)}> <{last}>" if last != self.root(chat) else f"<{last}>"
            )
        for key, value in headers.items():
            msg[key.replace("_", "-")] = value
        msg.set_content(text)
        if image is not None:
            msg.add_attachment(image, maintype="image", subtype="png", filename="cat.png")
        if voice is not None:  # a voice memo, as phones attach one
            msg.add_attachment(voice, maintype="audio", subtype="ogg", filename="memo.ogg")
        self._last[chat.native] = mid
        return msg

    def submit(self, address: str, msg: EmailMessage) -> None:
        """Send `msg` as the user `address` by SMTP (submission with AUTH)."""
        with smtplib.SMTP("127.0.0.1", self.servers.smtp_port, timeout=15) as smtp:
            smtp.login(address, self.servers.passwords[address.split("@", 1)[0]])
            smtp.send_message(msg)

    def inbox(self, native: str) -> list[EmailMessage]:
        """Every mail in the user's INBOX, oldest first (imaplib, read only)."""
        user = f"u{native}.{self.n}"
        box = imaplib.IMAP4("127.0.0.1", self.servers.imap_port, timeout=15)
        try:
            box.login(user, self.servers.passwords[user])
            box.select("INBOX", readonly=True)
            _, found = box.search(None, "ALL")
            mails: list[EmailMessage] = []
            for num in found[0].split():
                _, data = box.fetch(num, "(BODY.PEEK[])")
                raw = next(part[1] for part in data if isinstance(part, tuple))
                mails.append(email.message_from_bytes(raw, policy=policy.default))
            # in the order the MTA delivered them (a Maildir's numbering may differ)
            return sorted(mails, key=delivery_order)
        finally:
            box.logout()

    def as_sent(self, chat: Chat, mails: list[EmailMessage]) -> list[Sent]:
        out: list[Sent] = []
        for mail in mails:
            if self.bot_user not in str(mail["From"]):
                continue
            body = mail.get_body(preferencelist=("plain",))
            text = str(body.get_content()).strip() if body is not None else ""
            images = [
                p.get_payload(decode=True)
                for p in mail.walk()
                if p.get_content_maintype() == "image"
            ]
            out.append(
                Sent(
                    chat=chat,
                    text=text,
                    images=[i for i in images if isinstance(i, bytes)],
                    quote=str(mail["In-Reply-To"] or "").strip("<>") or None,
                    message_id=str(mail["Message-ID"]).strip("<>"),
                )
            )
        return out

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        found: list[Sent] = []

        async def enough() -> bool:
            nonlocal found
            found = self.as_sent(chat, await asyncio.to_thread(self.inbox, chat.native))
            return len(found) >= count

        await until(enough, timeout, f"{count} mails to {chat}")
        return found

    async def drop_connection(self) -> None:
        assert self.channel is not None
        channel = self.channel
        was = channel.imap
        await channel.drop_connection()
        await until(lambda: channel.imap is not was and channel.connected, 30, "reconnected")

    async def refuse_credentials(self, refused: bool) -> None:
        self.servers.account(self.bot, "not-the-bots" if refused else "secret")
        if refused and self.channel is not None:
            await self.channel.drop_connection()

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        raise NotImplementedError

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        raise NotImplementedError


@asynccontextmanager
async def running(
    driver: EmailDriver, tmp_path: Path, *, registry: Registry | None = None, **config: Any
) -> AsyncIterator[Bot]:
    data: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{tmp_path / 'email.db'}"},
        "plugins": {"paths": []},
        "bot": {"name": "mailbot", "admins": ["9999"], **config.pop("bot", {})},
        **config,
        "channels": {"email": driver.channel_settings()},
    }
    settings = parse_settings(data, base_dir=tmp_path)
    bot = Bot(
        settings,
        registry=registry or contract_registry(),
        model=ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    try:
        await driver.attach(bot.channel_host, settings.channels.email)  # type: ignore[attr-defined]
        await bot.start()
        yield bot
    finally:
        await driver.detach()
        await bot.aclose()
