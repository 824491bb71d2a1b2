"""A webhook's answer, the same on every platform that POSTs its events and sends again what
is not answered in time.

Once the request is checked (the platform's secret or signature) and its event read, the rest
is one rule: while the channel is not ready (not logged in yet, or stopping) the answer is
"not ready" (503), so the platform sends the event again; else the event is taken
(`self.inbound.take/once`: chatfn/channels/kit/inbound.py) and the answer waits for its
message to be stored, at most the platform's few seconds: "taken" once it is, else "not
stored yet" with the status the platform sends again on. By the time the event comes again
its message is stored, and the resend, recognised by its key, is answered at once.

What is the platform's own: checking and reading the request, how long it waits, the status
it sends again on, and the shape of its answers (`Say`: plain text, or a JSON object whose
one field carries the words). A request the check refuses (`Refused`: not the platform's, or
not for this app; a body that is not the JSON object it sends: `json_request`) is answered
the same everywhere (`refused`): one warning, and the reason
with its status (401, 400), so the platform does not retry a forged request as if the bot
were failing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from aiohttp import web

from chatfn.channels.intake import Taken

__all__ = [
    "Refused",
    "Say",
    "answer",
    "json_request",
    "json_says",
    "refused",
    "stored",
    "text_says",
]

#: The platform's answer of `status` saying `words`.
Say = Callable[[int, str], web.Response]


def text_says(status: int, words: str) -> web.Response:
    """The words as a plain-text answer."""
    return web.Response(status=status, text=words)


def json_says(field: str) -> Say:
    """The words as the JSON object `{field: words}`."""
    return lambda status, words: web.json_response({field: words}, status=status)


class Refused(Exception):
    """A request that is not the platform's (or not for this app): answered HTTP `status`."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


def json_request(body: bytes | str, what: str = "body") -> dict[str, Any]:
    """`body` as the JSON object it should be, or Refused (400) saying "<what> is not JSON"
    or "<what> is not a JSON object"."""
    try:
        data = json.loads(body)
    except ValueError:
        raise Refused(400, f"{what} is not JSON") from None
    if not isinstance(data, dict):
        raise Refused(400, f"{what} is not a JSON object")
    return data


def refused(log: Any, what: str, exc: Refused, say: Say = text_says) -> web.Response:
    """The answer to a request `what` ("X callback") refused with `exc`: one warning on `log`
    (the channel's logger), and `exc`'s reason with its status."""
    log.warning("{} refused: {}", what, exc)
    return say(exc.status, str(exc))


class _Channel(Protocol):
    """What the answer reads of its channel (a `PlatformChannel`)."""

    logged_in: bool
    _stopping: asyncio.Event

    @property
    def stopping(self) -> bool: ...


async def stored(channel: _Channel, taken: Taken | Iterable[Taken], wait: float) -> bool:
    """Whether every one of `taken` may be confirmed within `wait` seconds (False as soon as
    the channel stops)."""
    takes = [taken] if isinstance(taken, Taken) else list(taken)
    confirmed = await asyncio.gather(*(t.wait(wait, channel._stopping) for t in takes))
    return all(confirmed)


async def answer(
    channel: _Channel,
    take: Callable[[], Taken | Iterable[Taken]],
    wait: float,
    ok: web.Response,
    say: Say = text_says,
    late: int = 503,
) -> web.Response:
    """The answer to a checked request (module docstring): "not ready" (503) before the
    channel logged in or once it stops; else `take()`'s events taken, and `ok` once their
    messages are stored within `wait` seconds, "not stored yet" with status `late` if not."""
    if not channel.logged_in or channel.stopping:
        return say(503, "not ready")
    if not await stored(channel, take(), wait):
        return say(late, "not stored yet")
    return ok
