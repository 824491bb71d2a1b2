"""The Slack channel: a Slack app's bot user through the Web API, events by Socket Mode or the
Events API (channel.py; chat ids and incoming markup parse.py, the way out send.py). This
module is the channel's declaration, found through the `chatfn.channels` entry point `slack`;
slack_sdk is imported only when the channel is built or probed online."""

from __future__ import annotations

from typing import Any

from chatfn.channels.slack.settings import SlackSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe

README = """\
### Slack

`pip install "chatfn[slack]"` (slack-sdk), then `python bot.py --channel slack`.

1. At <https://api.slack.com/apps> create an app ("From scratch") in your workspace.
2. *OAuth & Permissions* -> Bot Token Scopes: `app_mentions:read`, `chat:write`,
   `channels:history`, `groups:history`, `im:history`, `mpim:history` (messages in channels,
   private channels, DMs and group DMs), `files:read` (images users send), `files:write`
   (images the bot sends), `users:read` (names, and workspace admins/owners for
   `bot.trust_group_admins`). Install the app; the *Bot User OAuth Token* (`xoxb-...`) is
   `bot_token`.
3. Events, one of:
   - Socket Mode (no public address): *Socket Mode* -> enable; *Basic Information* -> App-Level
     Tokens -> a token with `connections:write` (`xapp-...`) is `app_token`.
   - Events API: *Basic Information* -> Signing Secret is `signing_secret`; *Event
     Subscriptions* -> Request URL `https://bot.example.com/slack/events` (served on the HTTP
     channel's port: run `--channel http` too, behind your HTTPS reverse proxy).
4. *Event Subscriptions* -> Subscribe to bot events: `app_mention`, `message.channels`,
   `message.groups`, `message.im`, `message.mpim`, `member_joined_channel`. *App Home* ->
   allow users to send messages to the app (DMs). Invite the bot to a channel with
   `/invite @yourbot`.

```yaml
channels:
  slack:
    bot_token: ${SLACK_BOT_TOKEN}       # xoxb-...
    app_token: ${SLACK_APP_TOKEN}       # xapp-... : Socket Mode
    # signing_secret: ${SLACK_SIGNING_SECRET}   # instead: the Events API at /slack/events
    # api_base: https://slack.com/api
```

Chat ids (for `chats:` rules): `private:<D...>` (the DM's channel id), `group:<C...>` (a
channel, private channel or group DM) and `group:<C...>:thread:<thread_ts>` for a thread: each
thread is its own conversation, and the bot answers a message in a thread inside that thread
(match a channel with its threads as `group:C0123ABCD*`). `bot.admins` and `sender_id`s are
Slack user ids (`U...`; a member's profile -> ⋮ -> Copy member ID).

In channels the bot answers when mentioned (`@yourbot`, removed from the text it reads); a
message that comes both as `app_mention` and `message.*`, or is retried by Slack, is answered
once. With `reply_with_quote` a top-level message is answered in a thread under it. Images
users send reach vision models (downloaded with the bot token); a function's images are
uploaded (files_upload_v2). Replies are sent as mrkdwn (bold, italics, code, links; `&`, `<`,
`>` escaped), split within `max_message_length` (4000; Slack cuts at 40000), paced per chat,
and a 429's `Retry-After` is waited out in order. A Slack command-like text such as `/persona`
must follow the mention (`@yourbot /persona pirate`: Slack itself takes a leading `/`).
Settings: `channels.slack.bot_token`, `app_token`, `signing_secret`, `api_base`,
`max_message_length`, `send_rate`, `send_burst`, `max_retry_after`, `user_cache_seconds`.
"""


def build(host: ChannelHost, settings: SlackSettings) -> Any:
    from chatfn.channels.slack.channel import SlackChannel

    return SlackChannel(host, settings)


async def check(settings: SlackSettings, online: bool) -> list[Probe]:
    if settings.bot_token is None:
        return [Probe("fail", "channels.slack.bot_token is not set (the app's xoxb- token)")]
    if not settings.mode:
        return [
            Probe(
                "fail",
                "set channels.slack.app_token (Socket Mode) or channels.slack.signing_secret "
                "(Events API at /slack/events on the HTTP channel's port)",
            )
        ]
    how = (
        "Socket Mode (app_token)"
        if settings.mode == "socket"
        else "Events API at /slack/events on the HTTP channel's port (needs --channel http)"
    )
    probes = [Probe("ok", f"{how} via {settings.api_base}")]
    if online:
        probes.append(await who_am_i(settings))
        if settings.mode == "socket":
            probes.append(await socket_mode_open(settings))
    return probes


async def who_am_i(settings: SlackSettings) -> Probe:
    """auth.test: the bot user and workspace, or the reason the token or the API is not
    usable."""
    import aiohttp
    from slack_sdk.errors import SlackApiError

    from chatfn.channels.slack.channel import web_client
    from chatfn.channels.slack.send import AUTH_ERRORS, error_code

    name = "channel slack auth.test"
    client = web_client(settings, settings.secret("bot_token"))
    try:
        me = await client.auth_test()
        return Probe(
            "ok",
            f"bot user {me.get('user')} ({me.get('user_id')}) in {me.get('team')} at "
            f"{settings.api_base}",
            name=name,
        )
    except SlackApiError as exc:
        code = error_code(exc)
        if code in AUTH_ERRORS:
            return Probe("fail", f"Slack refused channels.slack.bot_token ({code})", name=name)
        return Probe("fail", f"Slack auth.test failed: {code or exc}", name=name)
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Probe("fail", f"Slack not reachable at {settings.api_base}: {exc}", name=name)
    finally:
        if client.session is not None:
            await client.session.close()


async def socket_mode_open(settings: SlackSettings) -> Probe:
    """apps.connections.open with the app-level token (the URL it gives is left unused)."""
    import aiohttp
    from slack_sdk.errors import SlackApiError

    from chatfn.channels.slack.channel import web_client
    from chatfn.channels.slack.send import AUTH_ERRORS, error_code

    name = "channel slack apps.connections.open"
    client = web_client(settings, settings.secret("bot_token"))
    try:
        await client.apps_connections_open(app_token=settings.secret("app_token"))
        return Probe("ok", "Socket Mode accepts channels.slack.app_token", name=name)
    except SlackApiError as exc:
        code = error_code(exc)
        if code in AUTH_ERRORS:
            return Probe("fail", f"Slack refused channels.slack.app_token ({code})", name=name)
        return Probe("fail", f"Slack apps.connections.open failed: {code or exc}", name=name)
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Probe("fail", f"Slack not reachable at {settings.api_base}: {exc}", name=name)
    finally:
        if client.session is not None:
            await client.session.close()


SPEC = ChannelSpec(
    name="slack",
    settings=SlackSettings,
    factory=build,
    summary="Slack apps (Socket Mode or the Events API)",
    extra="slack",
    modules=("slack_sdk",),
    check=check,
    readme=README,
)
