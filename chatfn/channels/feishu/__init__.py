"""The Feishu / Lark channel: a custom app's bot through lark-oapi (channel.py; the REST calls
and the tenant token api.py, chat ids and incoming content parse.py, the card markdown
render.py, the way out send.py, events by the long connection ws.py or by webhook
webhook.py). This module is the channel's declaration, found through the `chatfn.channels`
entry point `feishu`; lark-oapi is imported only when the channel is built or probed
online."""

from __future__ import annotations

from typing import Any

from chatfn.channels.feishu.settings import FeishuSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe

README = """\
### Feishu / Lark

`pip install "chatfn[feishu]"` (lark-oapi), then `python bot.py --channel feishu`.

1. In the developer console (<https://open.feishu.cn/app>, or <https://open.larksuite.com/app>
   for Lark) create a *custom app*; *Credentials & Basic Info* gives `app_id` (`cli_...`) and
   `app_secret`. *Add features* -> *Bot*.
2. *Permissions & Scopes*: `im:message:send_as_bot` (send), `im:message.p2p_msg:readonly`
   (one-to-one chats), `im:message.group_at_msg:readonly` (group messages that mention the
   bot; `im:message.group_msg` instead for `respond_in_groups: always`), `im:resource`
   (images both ways), `im:chat:readonly` (a group's owner and managers, for
   `bot.trust_group_admins`).
3. *Events & Callbacks*: add `im.message.receive_v1`, `im.chat.member.user.added_v1` (the
   welcome) and `im.chat.member.bot.added_v1`, and choose how they arrive:
   - `mode: websocket` (default; no public address): *Receive events through persistent
     connection*. The bot must be running when you save this choice.
   - `mode: webhook`: *Send events to developer's server*, request URL
     `https://bot.example.com/feishu/events` (served on the HTTP channel's port: run
     `--channel http` too, behind your HTTPS reverse proxy). *Encryption strategy* gives the
     `verification_token` (required) and the `encrypt_key` (recommended: events are then
     AES-encrypted and signed).
4. Publish a version of the app (*Version Management & Release*) and add the bot to groups.

```yaml
channels:
  feishu:
    app_id: cli_a1b2c3d4e5f6
    app_secret: ${FEISHU_APP_SECRET}
    domain: feishu                 # feishu | lark | an origin such as https://open.feishu.cn
    mode: websocket                # websocket | webhook
    # verification_token: ${FEISHU_VERIFICATION_TOKEN}   # webhook mode (required there)
    # encrypt_key: ${FEISHU_ENCRYPT_KEY}                 # webhook mode: decrypt + signatures
```

Chat ids (for `chats:` rules): `private:<oc_...>` for a one-to-one chat with the bot,
`group:<oc_...>` for a group (Feishu's chat_id either way) and
`group:<oc_...>:thread:<om_...>` for a thread or topic (named by its root message; the bot
answers inside it). `bot.admins` and `sender_id`s are the users' open_ids (`ou_...`, per
app). In groups the bot answers when @-mentioned (the mention is removed from what the model
reads). Replies are interactive cards (Markdown:
bold, italics, code, code blocks, links; everything else escaped), split within
`max_message_length`, with `reply_with_quote` sent as Feishu replies; each carries a `uuid`
so a reply is never sent twice across a crash. Settings: `channels.feishu.app_id`,
`app_secret`, `domain`, `mode`, `verification_token`, `encrypt_key`, `webhook_path`,
`max_message_length`, `send_rate`, `send_burst`, `max_retry_after`, `role_cache_seconds`.
"""


def build(host: ChannelHost, settings: FeishuSettings) -> Any:
    from chatfn.channels.feishu.channel import FeishuChannel

    return FeishuChannel(host, settings)


def _offline(settings: FeishuSettings) -> Probe:
    if not settings.app_id or settings.app_secret is None:
        return Probe(
            "fail",
            "channels.feishu.app_id and app_secret are not set (the app's Credentials & "
            "Basic Info page)",
        )
    if settings.mode == "webhook":
        how = (
            f"webhook at {settings.webhook_path} on the HTTP channel's port (needs --channel "
            "http), " + ("encrypted and signed" if settings.encrypt_key else "not encrypted")
        )
    else:
        how = "the long connection (websocket)"
    return Probe("ok", f"events by {how}, API at {settings.base_url}")


async def check(settings: FeishuSettings, online: bool) -> list[Probe]:
    first = _offline(settings)
    if first.status == "fail":
        return [first]
    probes = [first]
    if settings.mode == "webhook" and settings.encrypt_key is None:
        probes.append(
            Probe(
                "warn",
                "channels.feishu.encrypt_key is not set: webhook events arrive unencrypted "
                "and unsigned (only the verification_token is checked)",
            )
        )
    if online:
        probes.append(await who_am_i(settings))
    return probes


async def who_am_i(settings: FeishuSettings) -> Probe:
    """A tenant_access_token and bot/v3/info: the bot's name and open_id, or why not."""
    from chatfn.channels.feishu.api import NETWORK_ERRORS, AuthRefused, FeishuApi, FeishuError

    name = "channel feishu bot/v3/info"
    api = FeishuApi(settings)
    try:
        bot = await api.bot_info()
    except AuthRefused as exc:
        return Probe(
            "fail", f"Feishu refused channels.feishu.app_id / app_secret ({exc})", name=name
        )
    except FeishuError as exc:
        return Probe("fail", f"Feishu bot/v3/info failed: {exc}", name=name)
    except NETWORK_ERRORS as exc:
        return Probe("fail", f"Feishu not reachable at {settings.base_url}: {exc}", name=name)
    finally:
        await api.aclose()
    return Probe(
        "ok", f"bot {bot.get('app_name')} ({bot.get('open_id')}) at {settings.base_url}", name=name
    )


SPEC = ChannelSpec(
    name="feishu",
    settings=FeishuSettings,
    factory=build,
    summary="Feishu / Lark apps (long connection or webhook)",
    extra="feishu",
    modules=("lark_oapi",),
    check=check,
    readme=README,
)
