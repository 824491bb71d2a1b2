"""The console's channel login (issue 42): for a channel whose spec has a `ChannelLogin`
(WeChat's QR code), an owner starts the flow from the Channels page; it runs in the
background (one at a time per channel), its QR code is drawn as SVG (`qrcode.image.svg`, no
PIL) with the link it holds, and the page polls the status. On confirm what the flow gives is
kept as `chatfn login NAME` keeps it (chatfn/storage/channel_state.py) and audited; the channel
picks a new login up without a restart."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from chatfn.runtime.console.errors import ConsoleError

Console = Any


def qr_svg(content: str) -> str:
    """`content` as an SVG QR code, or "" without the `qrcode` package."""
    try:
        import qrcode  # type: ignore[import-untyped]
        import qrcode.image.svg  # type: ignore[import-untyped]
    except ImportError:
        return ""
    image = qrcode.make(content, image_factory=qrcode.image.svg.SvgPathImage, border=1)
    text: str = image.to_string(encoding="unicode")
    return text


@dataclass
class Login:
    status: str = "wait"  # wait / scanned / confirmed / expired / failed
    link: str = ""
    svg: str = ""
    reason: str = ""
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    def shown(self) -> dict[str, Any]:
        return {"status": self.status, "link": self.link, "svg": self.svg, "reason": self.reason}


class ChannelLogins:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.running: dict[str, Login] = {}

    def _spec(self, name: str) -> Any:
        from chatfn.runtime.channel_registry import ChannelNotFound, installed_channels

        try:
            spec = installed_channels().get(name)
        except ChannelNotFound:
            raise ConsoleError(404, f"no channel {name}") from None
        if spec.login is None:
            raise ConsoleError(409, f"the {name} channel has no login")
        return spec

    async def start(self, user: str, address: str, name: str) -> dict[str, Any]:
        from chatfn.runtime.channel_host import section_of

        spec = self._spec(name)
        now = self.running.get(name)
        if now is not None and now.task is not None and not now.task.done():
            return now.shown()
        login = Login()
        shown = asyncio.Event()

        def show(kind: str, text: str) -> None:
            if kind == "qr":
                login.link, login.svg, login.status = text, qr_svg(text), "wait"
                shown.set()
            elif "scan" in text.lower():
                login.status = "scanned"

        section = section_of(self.console.settings, spec.name, spec.settings)

        async def run() -> None:
            try:
                kept: str = await spec.login.flow(section, show)
            except Exception as exc:  # noqa: BLE001 - the flow's own reason, shown
                reason = str(exc) or type(exc).__name__
                login.status = "expired" if "expire" in reason.lower() else "failed"
                login.reason = reason
                shown.set()
                return
            from chatfn.storage import channel_state

            engine = self.console.storage.engine
            await asyncio.to_thread(channel_state.save, engine, spec.name, spec.login.key, kept)
            login.status = "confirmed"
            await self.console.audit(user, address, "channel.login", detail={"channel": name})

        login.task = asyncio.get_running_loop().create_task(run())
        self.running[name] = login
        await self.console.audit(user, address, "channel.login.start", detail={"channel": name})
        await asyncio.wait_for(shown.wait(), 30)
        return login.shown()

    def status(self, name: str) -> dict[str, Any]:
        login = self.running.get(name)
        if login is None:
            raise ConsoleError(404, f"no login of {name} running")
        return login.shown()
