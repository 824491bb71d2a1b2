"""The Matrix channel: a Matrix account on any homeserver through the client-server API
(channel.py; chat ids, mentions and replies parse.py; the way out send.py; Markdown as HTML
format.py). This module is the channel's declaration, found through the `chatfn.channels`
entry point `matrix`; matrix-nio is imported only when the channel is built or probed
online."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from chatfn.channels.kit.declare import CHAT, readme
from chatfn.channels.kit.probe import connects
from chatfn.channels.matrix.settings import MatrixSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


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


#: /account/whoami with the configured access token: the channel's own connect
#: (kit/probe.py), as the bot asks it at start.
token_whoami = connects(build, "channel matrix whoami")


async def who_am_i(settings: MatrixSettings) -> Probe:
    """/account/whoami: the account and device, or why the token or the homeserver is not
    usable. With `access_token` set, the channel's own connect, which then only asks whoami.
    Without it the bot logs in with the password, which makes a new device (and keeps its
    token in the store) each time: the probe never does that; it asks whoami with the token
    kept from the bot's last password login, if there is one."""
    if settings.secret_text("access_token"):  # a password login never follows: refused, said
        return await token_whoami(settings)
    from nio import WhoamiResponse

    from chatfn.channels.matrix.login import make_client
    from chatfn.channels.matrix.store import SyncStore

    name = "channel matrix whoami"
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
    readme=readme(__file__),
    capabilities=replace(CHAT, markdown="HTML", delivery_ids=True, connection=("long connection",)),
)
