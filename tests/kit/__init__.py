"""The test kit: what tests share to wait and to listen, instead of a copy per file.

- `until(predicate, timeout, message)` (async) / `until_sync(...)`: wait for a condition with a
  deadline, never a fixed sleep; `wait_event(event, timeout, message)` for an asyncio.Event a
  fake sets when the thing happens; `hang()` for something that never answers.
- `serve(app)`: an aiohttp app on port 0, with the port it got; `bound_port(site)` for a site
  started another way; `free_port()` only for a program told its port before it starts;
  `send_in_pieces(request, data, type)` answers a file in pieces, as a real network does.
- `wait_started(process, ready, timeout, what)`: a real server the tests started (Dovecot,
  ngIRCd, Prosody, Synapse) answering, or a RuntimeError naming why not.
"""

from tests.kit.ports import bound_port, free_port, send_in_pieces, serve
from tests.kit.servers import wait_started
from tests.kit.until import hang, until, until_sync, wait_event

__all__ = [
    "bound_port",
    "free_port",
    "hang",
    "send_in_pieces",
    "serve",
    "until",
    "until_sync",
    "wait_event",
    "wait_started",
]
