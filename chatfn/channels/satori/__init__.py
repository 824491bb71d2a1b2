"""The Satori channel: a Satori server's event stream in, its HTTP API out (channel.py,
send.py, api.py, elements.py; aiohttp: no Python client of the protocol is needed for what
it uses). One channel answers every platform account the server bridges (Koishi's
server-satori, Chronocat). This module is the declaration, found through the
`chatfn.channels` entry point `satori`."""

from __future__ import annotations

from typing import Any

from chatfn.channels.kit import Capabilities
from chatfn.channels.kit.declare import readme
from chatfn.channels.satori.settings import SatoriSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: SatoriSettings) -> Any:
    from chatfn.channels.satori.channel import SatoriChannel

    return SatoriChannel(host, settings)


async def check(settings: SatoriSettings, online: bool) -> list[Probe]:
    why = settings.problem()
    if why:
        return [Probe("fail", why)]
    only = f", platform {settings.platform}" if settings.platform else ", every platform"
    probes = [Probe("ok", f"{settings.endpoint}{only}")]
    if online:
        probes.append(await who_am_i(settings))
    return probes


async def who_am_i(settings: SatoriSettings) -> Probe:
    """POST /v1/meta: the logins the server serves, or what failed."""
    from chatfn.channels.satori.api import NETWORK_ERRORS, ApiError, SatoriApi
    from chatfn.channels.satori.channel import login_of

    name = "channel satori logins"
    api = SatoriApi(settings)
    try:
        meta = await api.meta()
    except ApiError as exc:
        if exc.status in (401, 403):
            return Probe(
                "fail", f"the Satori server refused channels.satori.token ({exc.text})", name=name
            )
        return Probe("fail", f"Satori answered {exc} at {settings.endpoint}", name=name)
    except NETWORK_ERRORS as exc:
        return Probe(
            "fail", f"Satori server not reachable at {settings.endpoint}: {exc!r}", name=name
        )
    finally:
        await api.aclose()
    logins = [login_of(x) for x in meta["logins"] if isinstance(x, dict)]
    ours = [f"{p}:{u}" for p, u in logins if settings.platform in ("", p)]
    if not ours:
        served = ", ".join(f"{p}:{u}" for p, u in logins) or "none"
        return Probe(
            "fail",
            f"no login of channels.satori.platform {settings.platform!r} (served: {served})",
            name=name,
        )
    return Probe("ok", ", ".join(ours), name=name)


SPEC = ChannelSpec(
    name="satori",
    settings=SatoriSettings,
    factory=build,
    summary="Satori (a Koishi / Chronocat server: its event stream and HTTP API)",
    extra="satori",
    check=check,
    readme=readme(__file__),
    capabilities=Capabilities(
        groups=True,
        dms=True,
        mentions=True,
        replies=True,
        images_in=True,
        images_out=True,
        voice_in=True,
        voice_out=True,
        markdown="Satori elements",
        connection=("long connection",),
    ),
)
