"""The XMPP channel and a real XMPP server (Prosody, prosody_server.py) as the channel
contract drives them (the `Driver` of tests/channels/contract.py), the users played by
slixmpp clients (xmpp_user.py).

Contract groups are rooms `r<native>@conference.localhost`, private chats the accounts
`u<native>@localhost`. Before the bot connects, a watcher (the rooms' first occupant and so
their owner) and the group users join every group room, so that only the contract's
`member_joins` is an arrival the bot sees. A user's role "admin" is the room affiliation
admin, given by the watcher.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from chatfn.channels.xmpp import SPEC
from chatfn.channels.xmpp.channel import XmppChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.channel_host import ChannelHost
from chatfn.runtime.settings import parse_settings
from chatfn.testing import ScriptedModel
from function_calls.registry import Registry
from tests.channels.contract import Chat, Sent, _echo, contract_registry
from tests.channels.xmpp.prosody_server import DOMAIN, MUC, Prosody
from tests.channels.xmpp.xmpp_user import Got, XmppUser
from tests.kit import until

BOT_NICK = "chatbot"
GROUPS = [str(n) for n in range(5001, 5009)] + ["x1", "x2"]
GROUP_SENDERS = ("1001", "1002", "1011")
_MENTION = re.compile(r"^u(\d+): ")


def room_of(native: str) -> str:
    return f"r{native}@{MUC}"


class XmppDriver:
    platform = "xmpp"
    max_length = 4000
    bot_user = BOT_NICK
    features = frozenset(
        {
            "groups",
            "images_out",
            "plain",
            "split",
            "reconnect",
            "crash_redelivery",
            "member_joined",
            "roles",
            "credentials",
        }
    )

    def __init__(self, server: Prosody, **settings: Any) -> None:
        self.server = server
        self.settings = settings
        self.users: dict[str, XmppUser] = {}
        self.watcher: XmppUser | None = None
        self.channel: XmppChannel | None = None
        self._task: asyncio.Task[None] | None = None
        self._affiliations: dict[tuple[str, str], str] = {}

    async def open(self) -> XmppDriver:
        self.watcher = await XmppUser(self.server, "watcher").connect()
        watcher = self.watcher
        # first: the rooms' owner
        await asyncio.gather(*(watcher.join(room_of(native)) for native in GROUPS))

        async def group_user(user: str) -> None:
            client = await self.user(user)
            await asyncio.gather(*(client.join(room_of(native)) for native in GROUPS))

        await asyncio.gather(*(group_user(u) for u in GROUP_SENDERS))
        return self

    async def user(self, user: str, nick: str = "") -> XmppUser:
        if user not in self.users:
            account = await asyncio.to_thread(self.server.account, f"u{user}")
            del account
            self.users[user] = await XmppUser(self.server, f"u{user}", nick).connect()
        return self.users[user]

    async def close(self) -> None:
        await self.detach()
        if self.server.accounts.get(f"bot@{DOMAIN}") != "secret":
            await asyncio.to_thread(self.server.account, "bot", "secret")
        await asyncio.gather(
            *(c.close() for c in [*self.users.values(), self.watcher] if c is not None)
        )

    # -- the Driver protocol -----------------------------------------------------------------
    def channel_settings(self) -> dict[str, Any]:
        return {
            "jid": f"bot@{DOMAIN}",
            "password": "secret",
            "server": f"127.0.0.1:{self.server.port}",
            "rooms": [room_of(n) for n in GROUPS],
            "nick": BOT_NICK,
            "tls": False,
            "send_rate": 0,
            **self.settings,
        }

    async def attach(self, host: ChannelHost, settings: Any, *, ready: bool = True) -> None:
        self.channel = SPEC.build(host, settings)
        self._task = asyncio.create_task(self.channel.run())
        if ready:
            async with asyncio.timeout(30):
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
            return f"group:{room_of(chat.native)}"
        return f"private:u{chat.native}@{DOMAIN}"

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
            client.say(f"bot@{DOMAIN}", text)
            return ""
        room = room_of(chat.native)
        client = await self.user(sender)
        if role is not None:
            await self.set_role(room, client.jid, "admin" if role in ("admin", "owner") else "none")
        client.say(room, f"{BOT_NICK}: {text}" if mention else text, group=True)
        return ""

    async def set_role(self, room: str, jid: str, affiliation: str) -> None:
        assert self.watcher is not None
        if self._affiliations.get((room, jid), "none") == affiliation:
            return
        await self.watcher.set_affiliation(room, jid, affiliation)
        self._affiliations[(room, jid)] = affiliation
        if self.channel is not None:  # the room tells every occupant: wait until the bot knows
            channel = self.channel
            nick = jid.split("@", 1)[0]
            want = [] if affiliation == "none" else [affiliation]
            await until(lambda: channel._roles(room, nick) == want, 10, "the bot sees the role")

    def received(self, chat: Chat) -> list[Got]:
        if chat.kind == "group":
            assert self.watcher is not None
            room = room_of(chat.native)
            return [
                g
                for g in self.watcher.got
                if g.kind == "groupchat" and g.sender == f"{room}/{BOT_NICK}" and not g.delayed
            ]
        client = self.users.get(chat.native)
        if client is None:
            return []
        return [g for g in client.got if g.sender.startswith(f"bot@{DOMAIN}")]

    def as_sent(self, chat: Chat) -> list[Sent]:
        out: list[Sent] = []
        for got in self.received(chat):
            text, mentions = got.body, []
            if (found := _MENTION.match(text)) is not None:
                mentions, text = [found.group(1)], text[found.end() :]
            if got.oob and got.body == got.oob and out:  # an image after its text
                out[-1].images.append(got.oob)
                continue
            images: list[bytes | str] = [got.oob] if got.oob and got.body == got.oob else []
            text = "" if images else text
            out.append(
                Sent(
                    chat=chat, text=text, mentions=mentions, images=images, message_id=got.origin_id
                )
            )
        return out

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        await until(lambda: len(self.as_sent(chat)) >= count, timeout, f"{count} in {chat}")
        sender = self.channel.sender if self.channel is not None else None
        if sender is not None:
            key = self.chat_id(chat)
            await until(lambda: key not in sender.runner._tails, 30, "sends to finish")
        return self.as_sent(chat)

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        client = await XmppUser(self.server, f"u{user}", name).connect()
        self.users[f"joined-{user}"] = client
        await client.join(room_of(chat.native))

    async def drop_connection(self) -> None:
        assert self.channel is not None
        channel = self.channel
        was = channel.client
        await channel.drop_connection()
        await until(lambda: channel.client is not was and channel.connected, 30, "reconnected")

    async def refuse_credentials(self, refused: bool) -> None:
        password = "not-the-bots" if refused else "secret"
        await asyncio.to_thread(self.server.account, "bot", password)
        if refused and self.channel is not None:
            await self.channel.drop_connection()


@asynccontextmanager
async def running(
    driver: XmppDriver, tmp_path: Path, *, registry: Registry | None = None, **config: Any
) -> AsyncIterator[Bot]:
    data: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{tmp_path / 'xmpp.db'}"},
        "plugins": {"paths": []},
        "bot": {"name": "xmppbot", "admins": ["9999"], **config.pop("bot", {})},
        **config,
        "channels": {"xmpp": driver.channel_settings()},
    }
    settings = parse_settings(data, base_dir=tmp_path)
    bot = Bot(
        settings,
        registry=registry or contract_registry(),
        model=ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    try:
        await driver.attach(bot.channel_host, settings.channels.xmpp)  # type: ignore[attr-defined]
        await bot.start()
        yield bot
    finally:
        await driver.detach()
        await bot.aclose()
