"""The Telegram channel: a bot account through the Bot API (channel.py; chat ids and mentions
parse.py, the way out send.py). This module is the channel's declaration, found through the
`chatfn.channels` entry point `telegram`; python-telegram-bot is imported only when the channel
is built or probed online."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from chatfn.channels.telegram.settings import DEFAULT_BASE_URL, TelegramSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe

README = """\
### Telegram

`pip install "chatfn[telegram]"`, then `python bot.py --channel telegram`.

1. In Telegram, talk to [@BotFather](https://t.me/BotFather): `/newbot`, pick a name and a
   username ending in `bot`; it answers with the token. Put it in `channels.telegram.token`.
2. For groups: add the bot to the group. With BotFather's default *privacy mode* the bot sees
   only commands, replies to its own messages and messages that mention it, which is what
   `respond_in_groups: at` needs; for `respond_in_groups: always` turn privacy mode off
   (`/setprivacy` -> Disable) and add the bot to the group again. `bot.trust_group_admins`
   needs no extra right (the bot asks getChatMember).

```yaml
channels:
  telegram:
    token: "123456:ABC-your-token"
    # base_url: https://api.telegram.org   # or your own Bot API server
    mode: polling                          # or webhook:
    # webhook_url: https://bot.example.com/telegram/hook   # path served on channels.http.port
    # secret_token: "a-long-random-string"                 # checked on every webhook POST
```

Chat ids (for `chats:` rules): `private:<user_id>`, `group:<chat_id>` (supergroups have ids
like `-1001234567890`) and `group:<chat_id>:topic:<message_thread_id>` for a forum topic (each
topic is its own conversation; match a whole forum with `group:-1001234567890*`). `bot.admins`
lists numeric Telegram user ids (ask @userinfobot for yours).

The bot answers when mentioned (`@username`), when a message replies to one of its own, and to
commands (`/help`, `/help@username`). Photos reach vision models (the largest size, downloaded
with getFile); a function's images are sent with sendPhoto. Replies are sent as MarkdownV2
(bold, italics, code, links), split within Telegram's 4096 characters, paced by
`send_rate`/`send_burst` per chat, and a 429's `retry_after` is waited out in order.

Webhook mode: `webhook_url` is registered with setWebhook and its path is served on the HTTP
channel's port (run `--channel http` too); put it behind your HTTPS reverse proxy. Settings:
`channels.telegram.token`, `base_url`, `mode`, `webhook_url`, `secret_token`, `poll_timeout`,
`max_message_length`, `send_rate`, `send_burst`, `max_retry_after`.
"""


def build(host: ChannelHost, settings: TelegramSettings) -> Any:
    # python-telegram-bot 22 warns on every 429 until time periods are timedeltas; send.py
    # reads either type, so opt in (the later majors' behaviour) and keep the log clean.
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    from chatfn.channels.telegram.channel import TelegramChannel

    return TelegramChannel(host, settings)


async def check(settings: TelegramSettings, online: bool) -> list[Probe]:
    if settings.token is None:
        return [Probe("fail", "channels.telegram.token is not set (the token @BotFather gave)")]
    where = settings.webhook_url if settings.mode == "webhook" else "getUpdates long polling"
    probes = [Probe("ok", f"{settings.mode} mode ({where}) via {settings.base_url}")]
    if settings.mode == "webhook" and settings.secret_token is None:
        probes.append(
            Probe(
                "warn", "channels.telegram.secret_token is not set: webhook POSTs are not checked"
            )
        )
    if settings.mode == "webhook" and settings.base_url == DEFAULT_BASE_URL:
        parts = urlsplit(settings.webhook_url or "")
        if parts.scheme != "https" or (parts.port or 443) not in (443, 80, 88, 8443):
            probes.append(
                Probe(
                    "warn",
                    f"channels.telegram.webhook_url {settings.webhook_url}: api.telegram.org "
                    "delivers only to https URLs on port 443, 80, 88 or 8443",
                )
            )
    if online:
        probes.append(await who_am_i(settings))
    return probes


async def who_am_i(settings: TelegramSettings) -> Probe:
    """getMe: the bot's username, or the reason the token or the server is not usable."""
    from telegram import Bot
    from telegram.error import InvalidToken, TelegramError

    bot = Bot(
        settings.token_value(),
        base_url=f"{settings.base_url}/bot",
        base_file_url=f"{settings.base_url}/file/bot",
    )
    name = "channel telegram getMe"
    try:
        async with bot:  # initialize() is getMe
            me = bot.bot
        return Probe("ok", f"@{me.username} (id {me.id}) at {settings.base_url}", name=name)
    except InvalidToken:
        return Probe("fail", "Telegram refused channels.telegram.token (unauthorized)", name=name)
    except TelegramError as exc:
        return Probe("fail", f"Telegram not reachable at {settings.base_url}: {exc}", name=name)


SPEC = ChannelSpec(
    name="telegram",
    settings=TelegramSettings,
    factory=build,
    summary="Telegram bots (Bot API: long polling or webhook)",
    extra="telegram",
    modules=("telegram",),
    check=check,
    readme=README,
)
