"""The channel kit's read loop for a platform read by asking again and again
(`PlatformChannel.serve_polls`: Telegram's getUpdates, iLink WeChat's getupdates, Matrix's sync,
Slack's Socket Mode) and its "until it works" (`PlatformChannel.retrying`: Telegram's
setWebhook, a session's connect again), tested on their own: when the channel is up or down,
when the backoff starts over, a wait the platform asked for, refused credentials and a stop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chatfn.channels.kit import (
    Backoff,
    CredentialsRefused,
    PlatformChannel,
    RateLimited,
    Unreachable,
)
from chatfn.common.config import Section
from chatfn.common.messages import OutgoingMessage


class _Host:
    """The least a channel needs (it never sends)."""

    def register(self, sender: object) -> None:
        pass

    def kick(self) -> None:
        pass


class Polled(PlatformChannel[Section], platform="polled", label="Polled"):
    async def connect(self) -> None:
        pass

    async def deliver(self, message: OutgoingMessage) -> None:
        raise AssertionError("never sends")


def channel() -> Polled:
    return Polled(_Host(), Section())  # type: ignore[arg-type]


def scripted(ch: Polled, steps: list[Callable[[], Any]], seen: list[tuple[Any, ...]]) -> Any:
    """A fetch that runs `steps` one a call (each returns what came or raises), noting the
    channel's state and the backoff's attempt before each; the channel stops after the last."""
    backoff = Backoff(0.001, 0.004, jitter=0)

    async def fetch() -> Any:
        seen.append((ch.connected, backoff.attempt))
        step = steps.pop(0)
        if not steps:
            await ch.stop()
        return step()

    return fetch, backoff


def fail(why: Exception) -> Callable[[], Any]:
    def step() -> Any:
        raise why

    return step


async def test_serve_polls_up_down_backoff_and_a_wait_asked_for() -> None:
    ch = channel()
    seen: list[tuple[Any, ...]] = []
    handled: list[Any] = []
    steps = [
        lambda: 1,
        fail(Unreachable("gone")),
        fail(Unreachable("still gone")),
        lambda: 2,  # works again: up, the backoff starts over
        fail(RateLimited("slow down", 0.001)),  # a wait asked for: not down
        lambda: 3,
        lambda: 4,  # stopped while it was asked: not handled
    ]
    fetch, backoff = scripted(ch, steps, seen)
    await ch.serve_polls(fetch, handled.append, backoff)
    assert handled == [1, 2, 3]
    assert seen == [
        (False, 0),
        (True, 0),
        (False, 1),  # down after the first failure
        (False, 2),
        (True, 0),
        (True, 0),  # the wait asked for left it up
        (True, 0),
    ]
    assert ch.status == "stopped"


async def test_serve_polls_a_failure_after_going_up_during_the_fetch_starts_over() -> None:
    """A socket read until it drops: the fetch says up itself (a hello), then fails; the
    backoff starts over, as after a fetch that worked."""
    ch = channel()
    seen: list[tuple[Any, ...]] = []

    def hello_then_drop() -> Any:
        ch.up()
        raise Unreachable("dropped")

    steps = [fail(Unreachable("no")), fail(Unreachable("no")), hello_then_drop, lambda: None]
    fetch, backoff = scripted(ch, steps, seen)
    await ch.serve_polls(fetch, None, backoff)
    assert seen == [(False, 0), (False, 1), (False, 2), (False, 1)]


async def test_serve_polls_raises_refused_credentials() -> None:
    ch = channel()
    fetch, backoff = scripted(ch, [fail(CredentialsRefused("token refused")), lambda: 0], [])
    with pytest.raises(CredentialsRefused, match="token refused"):
        await ch.serve_polls(fetch, None, backoff)
    await ch.stop()


async def test_retrying_until_it_works_or_stops_and_refused_raised() -> None:
    ch = channel()
    calls: list[int] = []

    async def twice_down() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise Unreachable("not yet")

    assert await ch.retrying(twice_down, Backoff(0.001, 0.002, jitter=0)) is True
    assert calls == [1, 1, 1] and not ch.connected and ch.status == "down: not yet"

    async def refused() -> None:
        raise CredentialsRefused("token refused")

    with pytest.raises(CredentialsRefused):
        await ch.retrying(refused)

    async def stopping() -> None:
        await ch.stop()
        raise Unreachable("gone")

    assert await ch.retrying(stopping) is False
    assert await ch.retrying(twice_down) is False  # stopped: not called
    assert len(calls) == 3
