"""`/healthz` and `/metrics`: the process's own state, served by the runtime on the web server.

They belong to the bot, not to a channel: a part of the web server (chatfn/runtime/web_parts.py)
mounted on the main listener at every start at which it has an address
(`channels.http.host`/`port`). `/metrics` needs the bearer token `channels.http.token` when one
is set, as `/v1/*` does; `/healthz` stays open for load balancers and container health checks.

And the gate of the main listener: once the bot is stopping, every POST there (the API, a
webhook, the console, /mcp) is answered 503 "send again in a moment" instead of starting work
the stop would cut.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from chatfn.common import bearer
from chatfn.runtime.channel_host import ApiHost, channel_state
from chatfn.runtime.web import WebServer

__all__ = ["OpsRoutes", "serve"]


def serve(api: ApiHost) -> None:
    """The web part (chatfn/runtime/web_parts.py): mount on `api.web`'s main listener."""
    OpsRoutes(api).mount(api.web)


def http_token(api: ApiHost) -> str | None:
    """`channels.http.token`, where the documentation keeps the web routes' bearer token."""
    channels = getattr(api.settings, "channels", None)
    token = getattr(getattr(channels, "http", None), "token", None)
    return token if isinstance(token, str) and token else None


class OpsRoutes:
    """The handlers of `/healthz` and `/metrics` for one bot's `ApiHost`."""

    def __init__(self, api: ApiHost) -> None:
        self.api = api
        self.token = http_token(api)

    def mount(self, server: WebServer) -> None:
        app = server.main.app
        app.middlewares.insert(0, self.gate)  # first: before any owner's own checks
        server.main.mount("GET", "/healthz", self.healthz)
        server.main.mount("GET", "/metrics", self.metrics)

    @web.middleware
    async def gate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.api.closing and request.method == "POST":
            return web.json_response(
                {"error": "the bot is shutting down; send again in a moment"}, status=503
            )
        return await handler(request)

    async def healthz(self, _request: web.Request) -> web.Response:
        return web.json_response(
            {
                "status": "ok",
                "model": self.api.model_name,
                "outbox": self.api.outbox.stats(),
                # Each channel up or down, and why (refused credentials, not reachable).
                "channels": [
                    channel_state(name, sender)
                    for name, sender in sorted(self.api.outbox.channels.items())
                ],
            }
        )

    async def metrics(self, request: web.Request) -> web.Response:
        if not bearer.admitted(request, self.token):
            return bearer.refusal()
        body, content_type = self.api.metrics.render()
        if self.api.settings.broker.url is not None:
            # A gateway: its workers serve no port; their counters come from the snapshots
            # they write to the shared database (chatfn/runtime/metric_snapshots.py).
            body += (await self.api.console.worker_metrics()).encode()
        return web.Response(body=body, headers={"Content-Type": content_type})
