"""The Mattermost channel: the WebSocket's events in, REST API v4 out (send.py).

Connect: GET /api/v4/users/me (who the bot is; 401: the token is refused) and GET
/api/v4/teams/name/{team} (the team it answers in). Serve: the WebSocket at
/api/v4/websocket (https://developers.mattermost.com/api-documentation/#/#websocket),
authenticated by the `authentication_challenge` action with the token; Mattermost says
`hello` (with the connection's id), then sends events, each with its sequence number. After
a drop the socket is opened again with `connection_id` and `sequence_number`, and the
server sends the events missed meanwhile. A `posted` event carries the post (JSON in
`data.post`), the channel's type (`D` direct, `G` group message, `O` / `P` channels), its
team and the ids it mentions (`data.mentions`). The bot's own posts, system posts (a
`type`) and other teams' channels are skipped. A dropped socket is connected again (the
kit's backoff).

Chats: a direct message is `private:<channel id>`, any other channel `group:<channel id>`,
and a post in a thread adds `:thread:<root id>` (answers go into the thread). A group post
mentioning the bot (its id in `data.mentions`) is for the bot; `@botname` is cut from the
text. Images: the post's `file_ids`, GET /api/v4/files/{id} with the token. `user_added`
(someone added to a channel) is the member-joined event. With `bot.trust_group_admins` a
channel admin (its membership's `scheme_admin`) counts as the chat's admin.
"""

from __future__ import annotations

import json
import re
from typing import Any

from chatfn.channels import kit
from chatfn.channels.kit.downloads import downloaded
from chatfn.channels.mattermost.api import NETWORK_ERRORS, ApiError, MattermostApi
from chatfn.channels.mattermost.send import ERRORS, MattermostSender
from chatfn.channels.mattermost.settings import MattermostSettings
from chatfn.common import audio
from chatfn.common.messages import IncomingMessage, SystemEvent
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["MattermostChannel"]

_ERRORS: tuple[type[BaseException], ...] = (ApiError, *NETWORK_ERRORS)
_SOCKET_ERRORS: tuple[type[BaseException], ...] = (*NETWORK_ERRORS, ApiError)
HEARTBEAT = 30.0


class MattermostChannel(
    kit.PlatformChannel[MattermostSettings], platform="mattermost", label="Mattermost"
):
    def __init__(self, host: ChannelHost, settings: MattermostSettings) -> None:
        super().__init__(host, settings)
        self.api = MattermostApi(settings)
        self.sender = MattermostSender(self.api, settings, self.policy)
        self.bot_id = ""
        self.bot_name = ""
        self.team_id = ""
        self._connection = ""  # the WebSocket connection's id (to resume after a drop)
        self._seq = -1  # the last event's sequence number on it

    async def connect(self) -> str:
        try:
            me = await self.api.me()
            team = await self.api.team(self.cfg.team)
        except ERRORS.every as exc:
            if isinstance(exc, ApiError) and exc.status in (403, 404):
                raise kit.CredentialsRefused(
                    f"Mattermost: the bot is not in the team channels.mattermost.team "
                    f"{self.cfg.team!r} ({exc.message}): add it to the team"
                ) from None
            fix = "make a new one in System Console -> Integrations -> Bot Accounts"
            raise ERRORS.for_connect(exc, self.cfg.url, fix, refused=(401,)) from None
        self.bot_id, self.bot_name = str(me["id"]), str(me.get("username") or "")
        self.team_id = str(team["id"])
        return f"@{self.bot_name} ({self.bot_id}) in team {self.cfg.team}"

    async def serve(self) -> None:
        """Read the WebSocket's events until the channel stops; a dropped socket is opened
        again after the backoff (a refused token: back to the kit's connect loop)."""
        where = f"Mattermost WebSocket at {self.cfg.websocket}"
        await self.serve_socket(self._socket, _SOCKET_ERRORS, where)

    def _socket_url(self) -> str:
        """The WebSocket's URL; after a drop, with the connection's id and the next sequence
        number, so the server sends what was missed (Mattermost's reliable WebSocket)."""
        if not self._connection:
            return self.cfg.websocket
        return (
            f"{self.cfg.websocket}?connection_id={self._connection}&sequence_number={self._seq + 1}"
        )

    async def _socket(self) -> None:
        session = self.api.session()
        async with session.ws_connect(self._socket_url(), heartbeat=HEARTBEAT) as ws:
            token = self.cfg.secret_text("token")
            challenge = {"seq": 1, "action": "authentication_challenge", "data": {"token": token}}
            await ws.send_json(challenge)
            async for event in kit.json_frames(ws, "Mattermost WebSocket"):
                if event.get("seq_reply") == 1 and event.get("status") == "FAIL":
                    await self.connect()  # a refused token raises CredentialsRefused here
                    raise ConnectionResetError(f"authentication refused: {event.get('error')}")
                self._event(event)
        raise ConnectionResetError("the WebSocket closed")

    def _event(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        raw = event.get("data")
        data: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if isinstance(event.get("seq"), int):
            self._seq = event["seq"]
        if kind == "hello":
            connection = str(data.get("connection_id") or "")
            if connection != self._connection:
                self._connection, self._seq = connection, int(event.get("seq") or 0)
            self.up()
        elif kind == "posted":
            self._posted(data)
        elif kind == "user_added":
            broadcast = event.get("broadcast")
            self._added(data, broadcast if isinstance(broadcast, dict) else {})
        elif event.get("status") == "FAIL":
            self.log.warning("Mattermost WebSocket refused: {}", event.get("error"))

    def _posted(self, data: dict[str, Any]) -> None:
        try:
            post = json.loads(data.get("post") or "")
        except ValueError:
            return
        if not isinstance(post, dict) or not post.get("id") or not post.get("channel_id"):
            return
        if post.get("user_id") == self.bot_id or post.get("type"):
            return  # the bot's own, or a system post (join, header change, ...)
        team = data.get("team_id") or ""
        if team and team != self.team_id:
            return
        group = data.get("channel_type") != "D"
        chat = f"{'group' if group else 'private'}:{post['channel_id']}"
        if post.get("root_id"):
            chat += f":thread:{post['root_id']}"
        if not self.inbound.first_sight(post["id"]):
            return
        self.inbound.message(chat, str(post["id"]), lambda: self._incoming(chat, group, data, post))

    async def _incoming(
        self, chat: str, group: bool, data: dict[str, Any], post: dict[str, Any]
    ) -> IncomingMessage | None:
        try:
            mentions = json.loads(data.get("mentions") or "[]")
        except ValueError:
            mentions = []
        at_bot = isinstance(mentions, list) and self.bot_id in mentions
        text = str(post.get("message") or "")
        if self.bot_name:
            text = re.sub(rf"(?<![\w.-])@{re.escape(self.bot_name)}\b", "", text).strip()
        files = [d for d in [await self._file(f) for f in post.get("file_ids") or []] if d]
        images: list[str] = []
        voices: list[str] = []
        for content in files:
            if (mime := kit.image_mime(content)) is not None:
                images.append(kit.data_uri(content, mime))
            elif (mime := audio.audio_mime(content)) != "application/octet-stream":
                voices.append(kit.data_uri(content, mime))  # a recorded voice message, a clip
        sender = str(post.get("user_id") or "")
        name = str(data.get("sender_name") or "").lstrip("@")
        roles = await self._roles(str(post["channel_id"]), sender) if group else []
        return self.incoming(
            chat,
            sender,
            text,
            sender_name=name,
            chat_name=str(data.get("channel_display_name") or ""),
            is_group=group,
            is_at_bot=at_bot,
            message_id=str(post["id"]),
            time=kit.sent_at(post.get("create_at"), ms=True),
            images=images,
            audio=voices,
            sender_roles=roles,
            # a bot account's post (props.from_bot): marked, answered where a chats: rule
            # sets answer_bots (docs/groups.md, "The loop guard")
            sender_is_bot=_from_bot(post),
        )

    async def _roles(self, channel: str, user: str) -> list[str]:
        """["admin"] for a channel admin (`scheme_admin`, or `channel_admin` among its
        roles), read when `bot.trust_group_admins` is on (not kept: a role given a moment ago
        counts at once)."""
        bot = getattr(self.host.settings, "bot", None)
        if not getattr(bot, "trust_group_admins", False):
            return []
        try:
            member = await self.api.member(channel, user)
        except _ERRORS as exc:
            self.log.debug("Mattermost roles of {} in {} not read: {}", user, channel, exc)
            return []
        admin = (
            member.get("scheme_admin") is True
            or "channel_admin" in str(member.get("roles") or "").split()
        )
        return ["admin"] if admin else []

    async def _file(self, file_id: str) -> bytes | None:
        """A post's file (images and audio are kept; what else it is, is not read)."""
        what, limit = f"Mattermost file {file_id}", kit.MAX_IMAGE_IN
        return await downloaded(what, _ERRORS, self.api.file, str(file_id), limit, log=self.log)

    def _added(self, data: dict[str, Any], broadcast: dict[str, Any]) -> None:
        user, channel = str(data.get("user_id") or ""), str(broadcast.get("channel_id") or "")
        if not user or not channel or user == self.bot_id:
            return
        if data.get("team_id") and data.get("team_id") != self.team_id:
            return
        chat = f"group:{channel}"
        self.inbound.events(chat, lambda: self._joined(chat, user))

    async def _joined(self, chat: str, user: str) -> list[SystemEvent]:
        try:
            got = await self.api.user(user)
        except _ERRORS:
            got = {}
        name = str(got.get("nickname") or got.get("username") or user)
        return [kit.member_joined("mattermost", chat, user, name)]

    async def close(self) -> None:
        await self.api.aclose()


def _from_bot(post: dict[str, Any]) -> bool:
    """Mattermost marks a bot account's posts with `props.from_bot` ("true", a string)."""
    props = post.get("props")
    return isinstance(props, dict) and str(props.get("from_bot") or "").lower() == "true"
