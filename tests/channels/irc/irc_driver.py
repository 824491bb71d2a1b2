"""The IRC channel and a real IRC server (ngircd, ngircd_server.py) as the channel contract
drives them (the `Driver` of tests/channels/contract.py), the users played by independent
socket clients (irc_user.py).

Contract groups are channels `#<native>`, private chats queries with the nick `u<native>`
(an IRC nick cannot begin with a digit). Before the bot connects, a watcher (an IRC
operator, the channels' first joiner and so their operator) and the group users join every
group channel, so that only the contract's `member_joins` is a JOIN the bot sees. A user's
role "admin" is channel-operator status (`MODE +o`), given by the watcher.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from chatfn.channels.irc import SPEC
from chatfn.channels.irc.channel import IrcChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.channel_host import ChannelHost
from chatfn.runtime.settings import parse_settings
from chatfn.testing import ScriptedModel
from function_calls.registry import Registry
from tests.channels.contract import Chat, Sent, _echo, contract_registry
from tests.channels.irc.irc_user import IrcUser, Line
from tests.channels.irc.ngircd_server import NgIrcd
from tests.kit import until

BOT_NICK = "chatbot"
#: The contract's group chats (tests/channels/contract.py) and the IRC tests' own.
GROUPS = [f"#{n}" for n in range(5001, 5009)] + ["#irc1", "#irc2"]
GROUP_SENDERS = ("1001", "1002", "1011")
_MENTION = re.compile(r"^u(\d+): ")
_BOT = re.compile(rf"^{BOT_NICK}_*$", re.IGNORECASE)


def nick_of(user: str) -> str:
    return f"u{user}"


def is_bot(nick: str) -> bool:
    return bool(_BOT.match(nick))


class IrcDriver:
    platform = "irc"
    # 512 bytes less CR LF and ":n PRIVMSG #x :"; the relayed line is checked in test_irc.py
    max_length = 497
    bot_user = BOT_NICK
    features = frozenset(
        {
            "groups",
            "plain",
            "split",
            "reconnect",
            "crash_redelivery",
            "member_joined",
            "roles",
            "credentials",
        }
    )

    def __init__(self, server: NgIrcd, **settings: Any) -> None:
        self.server = server
        self.settings = settings
        self.users: dict[str, IrcUser] = {}
        self.watcher: IrcUser | None = None
        self.channel: IrcChannel | None = None
        self._task: asyncio.Task[None] | None = None
        self._ops: set[tuple[str, str]] = set()

    async def open(self) -> IrcDriver:
        self.watcher = await IrcUser(self.server.port, "watcher").connect()
        await self.watcher.oper()
        await self.watcher.join(*GROUPS)  # first: the channels' operator

        async def group_user(user: str) -> None:
            client = await self.user(user)
            await client.join(*GROUPS)

        await asyncio.gather(*(group_user(u) for u in GROUP_SENDERS))
        return self

    async def user(self, user: str) -> IrcUser:
        if user not in self.users:
            self.users[user] = await IrcUser(self.server.port, nick_of(user)).connect(
                self.server.password
            )
        return self.users[user]

    async def close(self) -> None:
        await self.detach()
        if self.server.password:  # a test that failed half way: the next starts open
            await asyncio.to_thread(self.server.set_password, "")
        for client in [*self.users.values(), self.watcher]:
            if client is not None:
                await client.close()

    # -- the Driver protocol -----------------------------------------------------------------
    def channel_settings(self) -> dict[str, Any]:
        return {
            "server": "127.0.0.1",
            "port": self.server.port,
            "tls": False,
            "nick": BOT_NICK,
            "channels": GROUPS,
            # The test server has no penalty (MaxPenaltyTime = 0): the bot's own pace is the
            # only flood control, fast here (test_irc.py tests the pace itself).
            "flood_rate": 20.0,
            "flood_burst": 10,
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

    def chat_id(self, chat: Chat) -> str:
        if chat.kind == "group":
            return f"group:#{chat.native}"
        return f"private:{nick_of(chat.native)}"

    def bot_nick(self) -> str:
        return self.channel.nick if self.channel is not None else BOT_NICK

    async def say(
        self,
        chat: Chat,
        text: str,
        *,
        sender: str = "1001",
        mention: bool = False,
        image: bytes | None = None,
        role: str | None = None,
    ) -> str:
        if chat.kind == "private":
            client = await self.user(chat.native)
            await client.say(self.bot_nick(), text)
            return ""
        channel = f"#{chat.native}"
        client = await self.user(sender)
        if role is not None:
            await self.set_role(channel, client.nick, op=role in ("admin", "owner"))
        await client.say(channel, f"{self.bot_nick()}: {text}" if mention else text)
        return ""

    async def set_role(self, channel: str, nick: str, *, op: bool) -> None:
        assert self.watcher is not None
        if op == ((channel, nick) in self._ops):
            return
        await self.watcher.mode(channel, "+o" if op else "-o", nick)
        (self._ops.add if op else self._ops.discard)((channel, nick))

    def lines(self, chat: Chat) -> list[Line]:
        if chat.kind == "group":
            assert self.watcher is not None
            return self.watcher.privmsgs(is_bot, f"#{chat.native}")
        client = self.users.get(chat.native)
        return [] if client is None else client.privmsgs(is_bot, client.nick)

    def as_sent(self, chat: Chat) -> list[Sent]:
        out: list[Sent] = []
        for line in self.lines(chat):
            text = line.params[-1]
            mentions: list[str] = []
            if (found := _MENTION.match(text)) is not None:
                mentions, text = [found.group(1)], text[found.end() :]
            out.append(Sent(chat=chat, text=text, mentions=mentions))
        return out

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        await until(lambda: len(self.as_sent(chat)) >= count, timeout, f"{count} lines in {chat}")
        # The lines of one reply go out one by one: let the chat's queue finish first.
        sender = self.channel.sender if self.channel is not None else None
        if sender is not None:
            key = self.chat_id(chat).lower()
            await until(lambda: key not in sender.runner._tails, 120, "sends to finish")
        return self.as_sent(chat)

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        client = await IrcUser(self.server.port, name).connect()
        self.users[f"joined-{name}"] = client
        await client.join(f"#{chat.native}")

    async def drop_connection(self) -> None:
        """The server cuts the bot (an operator's KILL); back once it has joined again."""
        assert self.watcher is not None and self.channel is not None
        channel = self.channel
        was = channel.conn
        await self.watcher.kill(channel.nick)
        await until(lambda: channel.conn is not was and channel.connected, 30, "reconnected")

    async def refuse_credentials(self, refused: bool) -> None:
        """A server password the bot does not have (rehashed), and its connection cut."""
        assert self.watcher is not None
        if refused:
            await asyncio.to_thread(self.server.set_password, "not-the-bots")
            if self.channel is not None:
                await self.watcher.kill(self.channel.nick)
        else:
            await asyncio.to_thread(self.server.set_password, "")


@asynccontextmanager
async def running(
    driver: IrcDriver, tmp_path: Path, *, registry: Registry | None = None, **config: Any
) -> AsyncIterator[Bot]:
    """A real bot (SQLite file under tmp_path) with the driver's channel attached."""
    data: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{tmp_path / 'irc.db'}"},
        "plugins": {"paths": []},
        "bot": {"name": "ircbot", "admins": ["9999"], **config.pop("bot", {})},
        **config,
        "channels": {"irc": driver.channel_settings()},
    }
    settings = parse_settings(data, base_dir=tmp_path)
    bot = Bot(
        settings,
        registry=registry or contract_registry(),
        model=ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    try:
        await driver.attach(bot.channel_host, settings.channels.irc)  # type: ignore[attr-defined]
        await bot.start()
        yield bot
    finally:
        await driver.detach()
        await bot.aclose()
