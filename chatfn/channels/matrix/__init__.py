"""The Matrix channel: a Matrix account on any homeserver through the client-server API
(channel.py; chat ids, mentions and replies parse.py; the way out send.py; Markdown as HTML
format.py). This module is the channel's declaration, found through the `chatfn.channels`
entry point `matrix`; matrix-nio is imported only when the channel is built or probed
online."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from chatfn.channels.matrix.settings import MatrixSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe

README = """\
### Matrix

`pip install "chatfn[matrix]"`, then `python bot.py --channel matrix`.

1. Create an account for the bot on your homeserver, like any user (Element: *Create
   account*; on your own Synapse: `register_new_matrix_user -c homeserver.yaml
   http://localhost:8008`). Give it a display name: people mention it by that name.
2. Either put its password in `channels.matrix.password` (the bot logs in itself and keeps
   the access token it gets in `store_path`), or log in once and copy an access token:
   Element -> *Settings* -> *Help & About* -> *Access Token*, or
   `curl -XPOST https://matrix.example.org/_matrix/client/v3/login -d
   '{"type":"m.login.password","identifier":{"type":"m.id.user","user":"bot"},"password":"...","device_id":"CHATFNBOT"}'`
   (its `access_token` and `device_id` go into the config). Do not log that session out.
3. Invite the bot to a room, or start a direct chat with it: it joins by itself
   (`autojoin`). In a room it answers when mentioned (a pill, or its name at the start) or
   when someone replies to it (`respond_in_groups: at`); in a direct chat, to everything.
   For `bot.trust_group_admins`, room members with power level 50 (moderators) or more, and
   the room's creators, count as the room's admins.

```yaml
channels:
  matrix:
    homeserver: https://matrix.example.org
    user_id: "@chatfn:example.org"
    access_token: "syt_..."          # or: password: "..."
    device_id: CHATFNBOT              # keep it: sends are deduplicated per device
    # store_path: data/matrix         # sync position (+ a password login's token)
```

Chat ids (for `chats:` rules): `private:<room_id>` for a direct chat (an `is_direct` invite,
or a room of two members) and `group:<room_id>` for other rooms, e.g.
`group:!aBcDeF:example.org` (room version 12 ids have no server part). `bot.admins` lists
user ids (`@you:example.org`).

Messages: Markdown replies are sent as HTML (`formatted_body`, the spec's allowed tags only)
with a plain `body`; long replies are split (`max_message_length`, and within the 64 KiB event
limit); images come in through the authenticated media API and go out as `m.image`; an
`M_LIMIT_EXCEEDED` is waited out (`retry_after_ms`). Each message's transaction id comes from
its outbox row, so a restart never posts it twice. The sync position is kept in `store_path`:
after a restart the bot answers what came meanwhile, once. End-to-end encrypted rooms are not
supported (the bot says so in its log): use unencrypted rooms. Settings:
`channels.matrix.homeserver`, `user_id`, `access_token`, `password`, `device_id`,
`store_path`, `autojoin`, `sync_timeout`, `timeline_limit`, `max_message_length`,
`send_rate`, `send_burst`, `max_retry_after`. `check_system.py --online` asks
`/account/whoami`. How the channel behaves: [docs/channels.md](docs/channels.md#matrix).
"""


def build(host: ChannelHost, settings: MatrixSettings) -> Any:
    # matrix-nio logs every room state event it applies at INFO ("Room ... handling event of
    # type ..."): a line per event of every sync. Its warnings and errors still come through.
    logging.getLogger("nio").setLevel(logging.WARNING)
    from chatfn.channels.matrix.channel import MatrixChannel

    return MatrixChannel(host, settings)


async def check(settings: MatrixSettings, online: bool) -> list[Probe]:
    problem = settings.problem()
    if problem is not None:
        return [Probe("fail", problem)]
    how = "access token" if settings.access_token is not None else "password login"
    probes = [Probe("ok", f"{settings.user_id} on {settings.homeserver} ({how})")]
    if settings.device_id is None:
        probes.append(
            Probe(
                "warn",
                "channels.matrix.device_id is not set: set the device of the token (sends "
                "are deduplicated per device)",
            )
        )
    folder = Path(settings.store_path)
    if folder.exists() and not folder.is_dir():
        probes.append(Probe("fail", f"channels.matrix.store_path {folder} is not a folder"))
    if online:
        probes.append(await who_am_i(settings))
    return probes


async def who_am_i(settings: MatrixSettings) -> Probe:
    """/account/whoami with the access token (configured, or kept from a password login):
    the account and device, or why the token or the homeserver is not usable."""
    from nio import WhoamiResponse

    from chatfn.channels.matrix.login import make_client
    from chatfn.channels.matrix.store import SyncStore

    name = "channel matrix whoami"
    token = settings.secret("access_token")
    if not token:
        token = str(
            SyncStore(settings.store_path, settings.user_id or "").load().get("access_token") or ""
        )
    if not token:
        return Probe(
            "warn",
            "no access token yet: the bot logs in with channels.matrix.password when it starts",
            name=name,
        )
    client = make_client(settings)
    client.access_token = token
    try:
        got = await client.whoami()
    except Exception as exc:
        return Probe(
            "fail", f"Matrix homeserver not reachable at {settings.homeserver}: {exc!r}", name=name
        )
    finally:
        await client.close()
    if isinstance(got, WhoamiResponse):
        if got.user_id != settings.user_id:
            return Probe(
                "fail",
                f"the access token is {got.user_id}'s, not channels.matrix.user_id "
                f"{settings.user_id}",
                name=name,
            )
        return Probe(
            "ok", f"{got.user_id} (device {got.device_id}) at {settings.homeserver}", name=name
        )
    return Probe(
        "fail",
        f"Matrix refused channels.matrix.access_token ({got.status_code}: {got.message})",
        name=name,
    )


SPEC = ChannelSpec(
    name="matrix",
    settings=MatrixSettings,
    factory=build,
    summary="Matrix rooms and direct chats (client-server API, any homeserver)",
    extra="matrix",
    modules=("nio",),
    check=check,
    readme=README,
)
