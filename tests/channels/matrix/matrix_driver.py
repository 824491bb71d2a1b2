"""The Matrix channel against a real Synapse (synapse_server.py) as the channel contract kit
drives it (the `Driver` of tests/channels/contract.py: test_contract_matrix.py), plus what the
Matrix-only tests (test_matrix.py) use.

Every driver registers its own accounts (a fresh bot and fresh people, names suffixed with a
run id), so tests sharing the session's Synapse never see each other's rooms. People are real
clients: matrix-nio AsyncClients logged in with their own tokens, talking to Synapse
directly; the bot talks through a MatrixProxy (matrix_proxy.py), which can answer a send with
429 or cut the connections.

Contract chats map to rooms the driver creates on first use: a private chat "1001" is a
direct chat (`is_direct`) that the person `u1001-<run>` opens with the bot; a group "5001" is
a named room made by an owner account, to which the bot and each sender are invited. A
sender's `role` is its power level there (admin 50, owner 100).
"""

from __future__ import annotations

import asyncio
import html
import io
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from nio import AsyncClient, AsyncClientConfig, RoomCreateResponse, RoomPreset, UploadResponse

from chatfn.channels.matrix import SPEC
from chatfn.channels.matrix.channel import MatrixChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.channel_host import ChannelHost
from chatfn.runtime.settings import parse_settings
from chatfn.testing import ScriptedModel
from tests.channels.contract import Chat, Sent, _echo, contract_registry
from tests.channels.matrix.matrix_proxy import MatrixProxy
from tests.channels.matrix.synapse_server import Account, Synapse
from tests.kit import until

BOT_NAME = "Contract Bot"
GROUP_MEMBERS = ("1001", "1002", "1011")
_LEVELS = {"admin": 50, "administrator": 50, "moderator": 50, "owner": 100, "creator": 100}


class Person:
    """A Matrix user with a real client."""

    def __init__(self, synapse: Synapse, account: Account) -> None:
        self.account = account
        self.user_id = account.user_id
        self.client = AsyncClient(
            synapse.url,
            account.user_id,
            device_id=account.device_id,
            config=AsyncClientConfig(encryption_enabled=False, store_sync_tokens=False),
        )
        self.client.access_token = account.access_token
        self.client.user_id = account.user_id

    async def close(self) -> None:
        await self.client.close()


def _ok(response: Any, what: str) -> Any:
    if (
        hasattr(response, "status_code")
        and not hasattr(response, "event_id")
        and not hasattr(response, "room_id")
    ):
        raise AssertionError(f"{what}: {response}")
    return response


class MatrixDriver:
    platform = "matrix"
    features = frozenset(
        {
            "groups",
            "quote",
            "images_in",
            "images_out",
            "markdown",
            "split",
            "rate_limit",
            "reconnect",
            "crash_redelivery",
            "message_ids",  # transaction ids: the homeserver never posts a send twice
            "member_joined",
            "roles",
            "credentials",
        }
    )
    # The channel's own default is 16000 characters (within Matrix's 64 KiB events); the
    # contract's long reply is shorter than that, so the driver sets a lower limit to see it
    # split.
    max_length = 2000

    def __init__(self, synapse: Synapse, proxy: MatrixProxy, store: Path, **settings: Any) -> None:
        self.synapse = synapse
        self.proxy = proxy
        self.store = store
        self.settings = settings
        self.run = uuid.uuid4().hex[:6]
        self.bot: Account | None = None
        self.bot_user = ""
        self.people: dict[str, Person] = {}
        self.rooms: dict[tuple[str, str], str] = {}  # (kind, native) -> room id
        self.members: dict[str, set[str]] = {}  # room id -> joined labels
        self.channel: MatrixChannel | None = None
        self._task: asyncio.Task[None] | None = None
        self._http = aiohttp.ClientSession()

    @classmethod
    async def create(
        cls, synapse: Synapse, proxy: MatrixProxy, store: Path, **settings: Any
    ) -> MatrixDriver:
        driver = cls(synapse, proxy, store, **settings)
        driver.bot = await asyncio.to_thread(synapse.register, f"bot{driver.run}")
        driver.bot_user = driver.bot.user_id
        await driver.api(
            driver.bot.access_token,
            "PUT",
            f"/profile/{driver.bot_user}/displayname",
            {"displayname": BOT_NAME},
        )
        return driver

    async def close(self) -> None:
        await self.detach()
        for person in self.people.values():
            await person.close()
        await self._http.close()

    # -- the channel ---------------------------------------------------------------------------
    def channel_settings(self) -> dict[str, Any]:
        assert self.bot is not None
        return {
            "homeserver": self.proxy.url,
            "user_id": self.bot.user_id,
            "access_token": self.bot.access_token,
            "device_id": self.bot.device_id,
            "store_path": str(self.store),
            "send_rate": 0,
            "sync_timeout": 10,
            "max_message_length": self.max_length,
            **self.settings,
        }

    async def attach(self, host: ChannelHost, settings: Any) -> None:
        self.channel = SPEC.build(host, settings)
        self._task = asyncio.create_task(self.channel.run())
        async with asyncio.timeout(30):
            await self.channel.wait_ready()

    async def detach(self) -> None:
        if self.channel is not None:
            await self.channel.stop()
            self.channel = None
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    # -- accounts and rooms --------------------------------------------------------------------
    async def api(self, token: str, method: str, path: str, body: Any = None) -> Any:
        """A client-server API call of one account, straight to Synapse."""
        url = f"{self.synapse.url}/_matrix/client/v3{path}"
        async with self._http.request(
            method, url, json=body, headers={"Authorization": f"Bearer {token}"}
        ) as response:
            data = await response.json(content_type=None)
            if response.status != 200:
                raise AssertionError(f"{method} {path}: {response.status} {data}")
            return data

    async def person(self, label: str, name: str | None = None) -> Person:
        if label not in self.people:
            account = await asyncio.to_thread(self.synapse.register, f"u{label}-{self.run}")
            person = Person(self.synapse, account)
            await person.client.set_displayname(name or f"User {label}")
            self.people[label] = person
        return self.people[label]

    def user_of(self, label: str) -> str:
        return f"@u{label}-{self.run}:localhost"

    def label_of(self, user_id: str) -> str:
        m = re.match(rf"^@u(.+)-{self.run}:", user_id)
        return m.group(1) if m else user_id

    async def room(self, chat: Chat, first: str = "1001") -> str:
        """The room of a contract chat, made on first use (the bot invited, and joined)."""
        key = (chat.kind, chat.native)
        if key in self.rooms:
            return self.rooms[key]
        if chat.kind == "private":
            owner = await self.person(chat.native)
            made = await owner.client.room_create(
                is_direct=True, invite=[self.bot_user], preset=RoomPreset.trusted_private_chat
            )
        else:
            owner = await self.person("owner", "Room Owner")
            made = await owner.client.room_create(
                name=f"group {chat.native}", preset=RoomPreset.private_chat
            )
        assert isinstance(made, RoomCreateResponse), made
        room_id = made.room_id
        self.rooms[key] = room_id
        self.members[room_id] = {chat.native if chat.kind == "private" else "owner"}
        if chat.kind == "group":
            # The contract's speakers are members before the bot comes (their joins are
            # history to it: no welcome); a join after that is a member joining.
            for label in GROUP_MEMBERS:
                await self.join(chat, label)
            _ok(await owner.client.room_invite(room_id, self.bot_user), "invite")
        await self.wait_member(owner, room_id, self.bot_user)
        return room_id

    async def wait_member(self, who: Person, room_id: str, user: str, timeout: float = 15) -> None:
        async def joined() -> bool:
            got = await self.api(
                who.account.access_token, "GET", f"/rooms/{room_id}/joined_members"
            )
            return user in got.get("joined", {})

        await until(joined, timeout, f"{user} did not join {room_id}")

    def owner_of(self, chat: Chat) -> Person:
        return self.people[chat.native if chat.kind == "private" else "owner"]

    async def join(self, chat: Chat, label: str, name: str | None = None) -> Person:
        """`label` invited to the group and joined."""
        room_id = await self.room(chat)
        person = await self.person(label, name)
        if label not in self.members[room_id]:
            owner = self.owner_of(chat)
            _ok(await owner.client.room_invite(room_id, person.user_id), "invite")
            _ok(await person.client.join(room_id), "join")
            self.members[room_id].add(label)
        return person

    async def set_level(self, chat: Chat, user: str, level: int | None) -> None:
        room_id = await self.room(chat)
        owner = self.owner_of(chat)
        token = owner.account.access_token
        levels = await self.api(token, "GET", f"/rooms/{room_id}/state/m.room.power_levels/")
        users = levels.setdefault("users", {})
        if level is None:
            if user not in users:
                return
            users.pop(user)
        elif users.get(user) == level:
            return
        else:
            users[user] = level
        await self.api(token, "PUT", f"/rooms/{room_id}/state/m.room.power_levels/", levels)

    # -- the contract's Driver -----------------------------------------------------------------
    def platform_id(self, chat: Chat) -> str:
        return self.rooms[(chat.kind, chat.native)]

    def chat_id(self, chat: Chat) -> str:
        room = self.rooms.get((chat.kind, chat.native), f"(no room for {chat.native} yet)")
        return f"{chat.kind}:{room}"

    async def say(
        self,
        chat: Chat,
        text: str,
        *,
        sender: str = "1001",
        mention: bool = False,
        image: bytes | None = None,
        role: str | None = None,
        reply_to: str | None = None,
    ) -> str:
        room_id = await self.room(chat)
        if chat.kind == "private":
            person = self.people[chat.native]
        else:
            person = await self.join(chat, sender)
            await self.set_level(chat, person.user_id, _LEVELS.get(role or ""))
        content: dict[str, Any]
        if image is not None:
            uploaded, _ = await person.client.upload(
                io.BytesIO(image),
                content_type="image/png",
                filename="pixel.png",
                filesize=len(image),
            )
            assert isinstance(uploaded, UploadResponse), uploaded
            content = {
                "msgtype": "m.image",
                "body": text or "pixel.png",
                "filename": "pixel.png",
                "url": uploaded.content_uri,
                "info": {"mimetype": "image/png", "size": len(image), "w": 1, "h": 1},
            }
        else:
            content = {"msgtype": "m.text", "body": text}
        if mention:
            pill = f'<a href="https://matrix.to/#/{self.bot_user}">{BOT_NAME}</a>'
            content["body"] = f"{BOT_NAME}: {text}"
            content["format"] = "org.matrix.custom.html"
            content["formatted_body"] = f"{pill}: {html.escape(text)}"
            content["m.mentions"] = {"user_ids": [self.bot_user]}
        if reply_to is not None:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        sent = await person.client.room_send(room_id, "m.room.message", content)
        return str(_ok(sent, "send").event_id)

    async def say_content(self, chat: Chat, content: dict[str, Any], sender: str = "1001") -> str:
        """A message with exactly this content (mentions, pills, reply fallbacks as a given
        client writes them)."""
        room_id = await self.room(chat)
        person = (
            self.people[chat.native] if chat.kind == "private" else await self.join(chat, sender)
        )
        sent = await person.client.room_send(room_id, "m.room.message", content)
        return str(_ok(sent, "send").event_id)

    async def events(self, chat: Chat, sender: str | None = None) -> list[dict[str, Any]]:
        """The room's m.room.message events (of `sender`, default the bot), oldest first."""
        room_id = self.rooms[(chat.kind, chat.native)]
        token = self.owner_of(chat).account.access_token
        got = await self.api(token, "GET", f"/rooms/{room_id}/messages?dir=b&limit=500")
        who = sender or self.bot_user
        found = [
            e
            for e in got.get("chunk", [])
            if e.get("type") == "m.room.message" and e.get("sender") == who
        ]
        return list(reversed(found))

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        await self.room(chat)
        found: list[dict[str, Any]] = []

        async def arrived() -> bool:
            nonlocal found
            found = await self.events(chat)
            return len(found) >= count

        await until(arrived, timeout, lambda: f"{len(found)} of {count} messages in {chat}")
        return [await self.as_sent(chat, e) for e in found]

    async def as_sent(self, chat: Chat, event: dict[str, Any]) -> Sent:
        content = event.get("content") or {}
        body = str(content.get("body") or "")
        mentioned = list((content.get("m.mentions") or {}).get("user_ids") or [])
        images: list[bytes | str] = []
        if content.get("msgtype") == "m.image":
            images.append(await self.download(chat, str(content.get("url"))))
            if content.get("filename") in (None, body):
                body = ""
        for user in mentioned:
            room = self.rooms[(chat.kind, chat.native)]
            for name in (await self.display_name(chat, room, user), user):
                if body.startswith(f"{name}: "):
                    body = body[len(name) + 2 :]
        formatted = str(content.get("formatted_body") or "")
        styles: set[str] = set()
        if re.search(r"<(strong|b)>", formatted):
            styles.add("bold")
        if re.search(r"<(em|i)>", formatted):
            styles.add("italic")
        if "<code" in formatted:
            styles.add("code")
        if re.search(r'<a href="(?!https://matrix\.to/)', formatted):
            styles.add("link")
        reply = (content.get("m.relates_to") or {}).get("m.in_reply_to") or {}
        return Sent(
            chat=chat,
            text=body,
            mentions=[self.label_of(u) for u in mentioned],
            quote=reply.get("event_id"),
            images=images,
            styles=styles,
            message_id=str(event.get("event_id")),
        )

    async def display_name(self, chat: Chat, room_id: str, user: str) -> str:
        token = self.owner_of(chat).account.access_token
        try:
            got = await self.api(token, "GET", f"/rooms/{room_id}/state/m.room.member/{user}")
        except AssertionError:
            return user
        return str(got.get("displayname") or user)

    async def download(self, chat: Chat, mxc: str) -> bytes:
        """Media as a person reads it: the authenticated media API with its token."""
        server, media = mxc[len("mxc://") :].split("/", 1)
        token = self.owner_of(chat).account.access_token
        url = f"{self.synapse.url}/_matrix/client/v1/media/download/{server}/{media}"
        async with self._http.get(url, headers={"Authorization": f"Bearer {token}"}) as response:
            assert response.status == 200, (response.status, await response.text())
            return await response.read()

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        await self.join(chat, user, name)

    async def drop_connection(self) -> None:
        # The bot's /sync poll at least: between two polls (one answered, the next not yet
        # asked) nothing is in flight, and a drop then would cut nothing.
        await until(lambda: self.proxy.in_flight, 10, "no request of the bot's in flight")
        assert self.proxy.drop() >= 1

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        room_id = await self.room(chat)
        self.proxy.rate_limit_next(room_id, retry_after * 1000)

    async def refuse_credentials(self, refused: bool) -> None:
        self.proxy.refused_token = self.bot.access_token if refused else None
        if refused:
            self.proxy.drop()


# -- a bot for the Matrix-only tests (the contract kit has its own) ------------------------------
@asynccontextmanager
async def running(
    driver: MatrixDriver,
    tmp_path: Path,
    registry: Any = None,
    *,
    channel: dict[str, Any] | None = None,
    **config: Any,
) -> AsyncIterator[Bot]:
    """A real bot (SQLite file under tmp_path: the same file each time, so a second `running`
    is a restart) with the driver's channel attached."""
    data: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{tmp_path / 'matrix.db'}"},
        "plugins": {"paths": []},
        "bot": {"name": "matrixbot", "admins": ["@nobody:localhost"], **config.pop("bot", {})},
        **config,
        "channels": {"matrix": {**driver.channel_settings(), **(channel or {})}},
    }
    settings = parse_settings(data, base_dir=tmp_path)
    bot = Bot(
        settings,
        registry=registry or contract_registry(),
        model=ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    try:
        await driver.attach(bot.channel_host, settings.channels.matrix)
        await bot.start()
        yield bot
    finally:
        await driver.detach()
        await bot.aclose()
