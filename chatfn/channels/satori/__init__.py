"""The Satori channel: a Satori server's event stream in, its HTTP API out (channel.py,
send.py, api.py, elements.py; aiohttp: no Python client of the protocol is needed for what
it uses). One channel answers every platform account the server bridges (Koishi's
server-satori, Chronocat). This module is the declaration, found through the
`chatfn.channels` entry point `satori`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, asked, checks, readme
from chatfn.channels.satori.settings import SatoriSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: SatoriSettings) -> Any:
    from chatfn.channels.satori.channel import SatoriChannel

    return SatoriChannel(host, settings)


def offline(settings: SatoriSettings) -> list[Probe]:
    only = f", platform {settings.platform}" if settings.platform else ", every platform"
    return [Probe("ok", f"{settings.endpoint}{only}")]


async def who_am_i(settings: SatoriSettings) -> Probe:
    """POST /v1/meta: the logins the server serves, or what failed."""
    from chatfn.channels.satori.api import NETWORK_ERRORS, ApiError, SatoriApi
    from chatfn.channels.satori.channel import login_of

    api = SatoriApi(settings)

    async def ask() -> str:
        meta = await api.meta()
        logins = [login_of(x) for x in meta["logins"] if isinstance(x, dict)]
        ours = [f"{p}:{u}" for p, u in logins if settings.platform in ("", p)]
        if not ours:
            served = ", ".join(f"{p}:{u}" for p, u in logins) or "none"
            raise _NoLogin(
                f"no login of channels.satori.platform {settings.platform!r} (served: {served})"
            )
        return ", ".join(ours)

    def failed(exc: Exception) -> str | None:
        if isinstance(exc, ApiError) and exc.status in (401, 403):
            return f"the Satori server refused channels.satori.token ({exc.text})"
        if isinstance(exc, ApiError):
            return f"Satori answered {exc} at {settings.endpoint}"
        if isinstance(exc, NETWORK_ERRORS):
            return f"Satori server not reachable at {settings.endpoint}: {exc!r}"
        return str(exc) if isinstance(exc, _NoLogin) else None

    return await asked("channel satori logins", ask, failed, api.aclose)


class _NoLogin(LookupError):
    """The server serves no login of the configured platform: the probe's ✗."""


check = checks(offline, who_am_i)

SPEC = ChannelSpec(
    name="satori",
    settings=SatoriSettings,
    factory=build,
    summary="Satori (a Koishi / Chronocat server: its event stream and HTTP API)",
    extra="satori",
    check=check,
    readme=readme(__file__),
    capabilities=replace(CHAT, markdown="Satori elements", connection=("long connection",)),
)
