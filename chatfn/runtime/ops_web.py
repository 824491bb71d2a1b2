"""`/healthz` and `/metrics`: the process's own state, served by the runtime on the web server.

They belong to the bot, not to a channel: the runtime mounts them on the main listener as
standing routes (kept across a restart of the server), served wherever the main listener has
an address (`channels.http.host`/`port`). The HTTP channel's token check covers `/metrics`
as it covers `/v1/*` (`channels.http.token`); `/healthz` stays open for load balancers and
container health checks.
"""

from __future__ import annotations

from aiohttp import web

from chatfn.runtime.channel_host import ApiHost, channel_state
from chatfn.runtime.web import WebServer

__all__ = ["OpsRoutes"]


class OpsRoutes:
    """The handlers of `/healthz` and `/metrics` for one bot's `ApiHost`."""

    def __init__(self, api: ApiHost) -> None:
        self.api = api

    def mount(self, server: WebServer) -> None:
        server.main.standing("GET", "/healthz", self.healthz)
        server.main.standing("GET", "/metrics", self.metrics)

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

    async def metrics(self, _request: web.Request) -> web.Response:
        body, content_type = self.api.metrics.render()
        if self.api.settings.broker.url is not None:
            # A gateway: its workers serve no port; their counters come from the snapshots
            # they write to the shared database (chatfn/runtime/metric_snapshots.py).
            body += (await self.api.console.worker_metrics()).encode()
        return web.Response(body=body, headers={"Content-Type": content_type})
