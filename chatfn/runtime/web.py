"""The bot's one web server: a runtime service every web-facing part mounts on.

The HTTP API channel (`/v1/*`, SSE, the web page), the runtime's own `/healthz` and `/metrics`
(ops_web.py), `/mcp`, the admin console and the platforms' webhooks (Telegram, Slack, Feishu,
QQ, a third-party channel's) are routes of one aiohttp application, served by one `AppRunner`
whose lifespan the runtime owns: the components mount their routes while they are built, the
runtime starts the server once every channel is built, and stops it after the channels
(NoneBot2's driver is the model: one server, the adapters mount on it).

A listener is one address (host and port) with its own route table: the main one,
`channels.http.host`/`port`, serves the API and the webhooks; a channel with a port setting of
its own gets a listener of its own (`listener(name)`), so a route on one port is never
reachable on another (the API bound to 127.0.0.1 stays off a WebSocket port opened to the
network). Every listener starts and stops with the server.

The bot's parts (`part`: /healthz and /metrics, the admin console, /mcp; web_parts.py) are not
a channel's: the runtime registers them once, and they mount on the main listener at every
start at which it has an address, whichever channel gave it (so a part costs nothing in a
process that serves no web, a worker, and is there again after a restart of the server).

Stopping: each listener stops accepting, lets the handlers in flight finish within the grace
(`bot.shutdown_grace`, not aiohttp's 60 s), closes them; then the lifespans mounted with the
routes (the MCP session manager, the admin console's background work) stop, last started first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from loguru import logger

__all__ = ["MAIN", "Listener", "Part", "WebHandler", "WebServer"]

#: An aiohttp handler: `async def handler(request: web.Request) -> web.StreamResponse`.
WebHandler = Callable[[Any], Awaitable[Any]]
Hook = Callable[[], Awaitable[None]]
#: A part of the bot served on the main listener: `part(server)` mounts its routes,
#: middlewares, lifespans and listening hooks there (`WebServer.part`).
Part = Callable[["WebServer"], None]
#: The main listener's name: `channels.http.host`/`port`.
MAIN = "http"


class Listener:
    """One address of the server and the routes served there. `app` is the aiohttp
    application to mount on until the server starts (its router freezes then)."""

    def __init__(self, name: str, grace: float = 10.0) -> None:
        self.name = name
        self.grace = grace
        self.app = web.Application()
        self.host: str | None = None
        self.port: int | None = None
        #: The port actually bound once started (the configured one, or the one port 0 got).
        self.bound_port: int | None = None
        self._runner: web.AppRunner | None = None

    @property
    def running(self) -> bool:
        return self._runner is not None

    @property
    def address(self) -> str:
        return f"http://{self.host}:{self.bound_port or self.port}"

    def listen(self, host: str, port: int) -> None:
        """Serve this listener's routes on `host`:`port` (0: a free port, see `bound_port`)."""
        self.host, self.port = host, port

    def mount(self, method: str, path: str, handler: WebHandler) -> None:
        """Serve `handler` for `method` `path`; before the server starts."""
        if self._runner is not None:
            raise RuntimeError(f"{method} {path}: the web server is serving; mount before it")
        self.app.router.add_route(method, path, handler)

    @property
    def connections(self) -> int:
        """Connections open now (0 when not listening)."""
        server = self._runner.server if self._runner is not None else None
        return len(server.connections) if server is not None else 0

    async def start(self) -> None:
        """Listen (the server starts every listener; a channel run alone starts its own)."""
        if self._runner is not None or self.host is None:
            return
        self._runner = runner = web.AppRunner(
            self.app,
            access_log=None,
            handler_cancellation=True,
            # Requests still open at shutdown get the bot's grace period, not aiohttp's 60 s.
            shutdown_timeout=self.grace,
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        server = site._server  # aiohttp keeps the asyncio server private
        sockets = getattr(server, "sockets", None) or []
        self.bound_port = sockets[0].getsockname()[1] if sockets else self.port

    async def stop(self) -> None:
        """Stop accepting, let handlers in flight finish within the grace, close them. The
        listener is new again: no address, nothing mounted (an aiohttp application serves
        once)."""
        runner, self._runner = self._runner, None
        try:
            if runner is not None:
                await runner.cleanup()
        finally:
            self.app = web.Application()
            self.host = self.port = self.bound_port = None


class WebServer:
    """The process's web server (see the module's docstring). Built by the runtime with the
    bot; `start` and `stop` are the runtime's (`chatfn run`, the test harness through the
    HTTP channel's `start`); both are safe to call twice."""

    def __init__(self, grace: float = 10.0) -> None:
        self.grace = grace
        self.listeners: dict[str, Listener] = {MAIN: Listener(MAIN, grace)}
        self._lifespans: list[tuple[Hook | None, Hook | None]] = []
        self._hooks_started: list[Hook | None] = []
        self._parts: list[Part] = []
        self._listening: list[Callable[[], None]] = []
        self.running = False

    @property
    def main(self) -> Listener:
        """The listener on `channels.http.host`/`port`: the API, the webhooks, /mcp, /admin/."""
        return self.listeners[MAIN]

    def listener(self, name: str) -> Listener:
        """The listener called `name` (made on first use): a channel's own port."""
        if name not in self.listeners:
            self.listeners[name] = Listener(name, self.grace)
        return self.listeners[name]

    def mount(self, method: str, path: str, handler: WebHandler) -> None:
        """Serve `handler` at `path` on the main listener."""
        self.main.mount(method, path, handler)

    def lifespan(self, start: Hook | None = None, stop: Hook | None = None) -> None:
        """Run `start` before the server listens and `stop` after it closed (in reverse
        order of mounting): what a mounted component needs running while it serves."""
        self._lifespans.append((start, stop))

    def part(self, mount: Part) -> None:
        """Register a part of the bot (not a channel's) served on the main listener: `mount`
        runs at every `start` at which the main listener has an address (a channel gave it
        one), before the lifespans start, and mounts there what the part serves."""
        self._parts.append(mount)

    def when_listening(self, hook: Callable[[], None]) -> None:
        """Call `hook` once every listener of this start listens (its bound port known): a
        line naming an address. Mounted again before the next start, as the lifespans."""
        self._listening.append(hook)

    def unbound(self) -> list[str]:
        """Paths mounted on a listener that no one gave an address (a webhook channel run
        without the HTTP channel): they would never be served."""
        return sorted(
            {
                r.resource.canonical
                for listener in self.listeners.values()
                if listener.host is None
                for r in listener.app.router.routes()
                if r.resource is not None
            }
        )

    async def start(self) -> None:
        """Mount the parts (when the main listener has an address), start the lifespans, then
        listen on every listener with an address."""
        if self.running:
            return
        self.running = True
        try:
            if self.main.host is not None:
                for mount in self._parts:
                    mount(self)
            for start, stop in self._lifespans:
                if start is not None:
                    await start()
                self._hooks_started.append(stop)
            for listener in self.listeners.values():
                await listener.start()  # one with no address is not served
            for hook in self._listening:
                hook()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Stop every listener (accepting, then in-flight handlers within the grace), then the
        lifespans, last started first. One that fails is logged; the rest still stop. The server
        is then as new: components mount again before the next start."""
        if not self.running:
            return
        self.running = False
        self._lifespans = []
        self._listening = []
        for listener in self.listeners.values():
            try:
                await listener.stop()
            except Exception as exc:  # noqa: BLE001 - the other listeners must still close
                logger.opt(exception=exc).error("web listener {} did not stop", listener.name)
        hooks, self._hooks_started = self._hooks_started, []
        for stop in reversed(hooks):
            if stop is None:
                continue
            try:
                await stop()
            except Exception as exc:  # noqa: BLE001 - the other lifespans must still stop
                logger.opt(exception=exc).error("web lifespan {} did not stop", stop)
