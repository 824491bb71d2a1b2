"""The QQ channel: a bot of the QQ open platform (the official bot API, not OneBot) in QQ
groups, C2C chats, guild channels and guild DMs (channel.py; the token and calls api.py, the
WebSocket gateway gateway.py, webhook signatures webhook.py, chat ids parse.py, the way out
send.py). This module is the channel's declaration, found through the `chatfn.channels`
entry point `qq`; it needs aiohttp (a base dependency) and, for webhook mode, cryptography
(the `qq` extra)."""

from __future__ import annotations

from typing import Any

from chatfn.channels.qq.settings import QQSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe

README = """\
### QQ (official bot API)

`pip install "chatfn[qq]"` (cryptography, for webhook signatures), then
`python bot.py --channel qq`. This is QQ's own bot platform: unlike a OneBot account on a
personal QQ number, the bot is not risk-controlled or banned for being a bot.

1. At <https://q.qq.com> register as a developer and create a bot (机器人). *Development ->
   Settings* (开发设置) shows the **AppID** (`app_id`) and **AppSecret** (`secret`; generate
   it there: it is shown once).
2. Until the bot is published it works only in the sandbox: *Development -> Sandbox*
   (沙箱配置) lists the QQ groups, members and guild channels allowed to use it. Set
   `sandbox: true` to call the sandbox API root (`https://sandbox.api.sgroup.qq.com`); the
   published bot uses `https://api.sgroup.qq.com`.
3. Events, one of:
   - `mode: websocket` (default; no public address): the gateway. Intents default to
     GUILDS, GUILD_MEMBERS, DIRECT_MESSAGE, GROUP_AND_C2C_EVENT and PUBLIC_GUILD_MESSAGES
     (`1 | 1<<1 | 1<<12 | 1<<25 | 1<<30`). DIRECT_MESSAGE and GROUP_AND_C2C_EVENT need
     the bot's approval for them: QQ closes a connection asking for intents the bot lacks
     (code 4014, logged), so set `intents` to what it has (`33554432`, `1<<25`, for groups
     and C2C only). A private-domain bot may add GUILD_MESSAGES (`1<<9`) to read every
     message in its guild channels. Tencent has announced the end of the WebSocket way:
     prefer the webhook.
   - `mode: webhook`: *Development -> Callback configuration* (回调配置): the request URL
     `https://bot.example.com/qq/webhook` (served on the HTTP channel's port: run
     `--channel http` too, behind your HTTPS reverse proxy; `webhook_path` changes the path),
     and tick the events: C2C and group messages, guild @-messages, DMs, member events. QQ
     validates the URL (op 13) and signs every request with Ed25519 keys derived from the
     AppSecret; unsigned or badly signed requests are refused.
4. *Development -> Message URL settings* (消息URL配置): register the domains of links the bot
   may send. A message with an unregistered link is refused; the channel sends it again with
   its links replaced by `[link]` and logs once which setting to change.

```yaml
channels:
  qq:
    app_id: "102012345"
    secret: ${QQ_BOT_SECRET}
    sandbox: false
    # mode: webhook          # callbacks at /qq/webhook on channels.http.port
    # api_base: https://api.sgroup.qq.com
```

Chat ids (for `chats:` rules): `group:<group_openid>` (a QQ group), `c2c:<user_openid>` (a
private chat), `channel:<channel_id>` (a guild text channel) and `dm:<guild_id>` (a guild DM
session). Openids are per bot: `bot.admins` and `sender_id`s are the `member_openid` (groups),
`user_openid` (C2C) or guild user id the events carry (the bot's log shows them).

QQ sends a group's messages to the bot only when they @-mention it (the mention is removed),
so `respond_in_groups: always` has no effect in QQ groups. Replies are passive: they carry the
`msg_id` of the message answered and a `msg_seq`, and QQ takes them within 5 minutes (60 in
C2C chats), 5 per message; a crash between QQ taking a reply and the outbox marking it never
sends it twice in groups and C2C chats (QQ refuses the repeated `msg_seq`). QQ no longer
accepts active messages in groups and C2C chats (since April 2025): a reminder or a late
reply past the window is refused, and the log says so. Text is plain (QQ's Markdown needs an
approved template in groups): the model's Markdown is made readable (`**bold**` -> bold, links
as `label (url)`), split within `max_message_length` (2000). Images users send reach vision
models; a function's images are uploaded (groups, C2C) or attached (guilds). A 429 or a rate
code is waited out with doubling waits in the chat's order. A member joining a guild is
welcomed in the guild's first text channel. `bot.trust_group_admins`: guild creators (role 4)
and administrators (role 2) may use the per-chat admin commands in that channel; QQ reports
no roles in QQ groups. Settings: `channels.qq.app_id`, `secret`, `sandbox`, `api_base`,
`token_url`, `mode`, `webhook_path`, `intents`, `max_message_length`, `send_rate`,
`send_burst`, `max_retry_after`, `group_reply_window`, `c2c_reply_window`.
"""


def build(host: ChannelHost, settings: QQSettings) -> Any:
    from chatfn.channels.qq.channel import QQChannel

    return QQChannel(host, settings)


async def check(settings: QQSettings, online: bool) -> list[Probe]:
    if (missing := settings.missing()) is not None:
        return [Probe("fail", missing)]
    how = (
        "the WebSocket gateway"
        if settings.mode == "websocket"
        else f"webhook at {settings.webhook_path} on the HTTP channel's port (needs --channel http)"
    )
    probes = [Probe("ok", f"bot {settings.app_id}: events by {how} via {settings.api_root}")]
    if online:
        probes.append(await who_am_i(settings))
    return probes


async def who_am_i(settings: QQSettings) -> Probe:
    """An access token, then GET /users/@me: the bot, or why the credentials or the API are
    not usable."""
    import aiohttp

    from chatfn.channels.qq.api import QQApi, QQApiError, QQAuthError

    name = "channel qq /users/@me"
    async with aiohttp.ClientSession() as session:
        api = QQApi(settings, session)
        try:
            me = await api.call("GET", "/users/@me")
            return Probe(
                "ok",
                f"bot {me.get('username')} (id {me.get('id')}) at {settings.api_root}",
                name=name,
            )
        except QQAuthError as exc:
            return Probe(
                "fail",
                f"QQ refused channels.qq.app_id / channels.qq.secret ({exc}) at "
                f"{settings.token_url}",
                name=name,
            )
        except QQApiError as exc:
            return Probe("fail", f"QQ GET /users/@me failed: {exc}", name=name)
        except (aiohttp.ClientError, TimeoutError) as exc:
            return Probe("fail", f"QQ not reachable ({exc})", name=name)


SPEC = ChannelSpec(
    name="qq",
    settings=QQSettings,
    factory=build,
    summary="QQ official bots (groups, C2C, guilds: WebSocket gateway or webhook)",
    extra="qq",
    modules=("cryptography",),
    check=check,
    readme=README,
)
