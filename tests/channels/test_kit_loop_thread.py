"""The kit's `LoopThread.sessions`, tested on its own with a tiny SDK link on its own thread:
a connect that fails is reported failing and tried again after the backoff, one refused is
reported refused, one that holds is reported connected and closed when it is lost or when the
link stops; `stop()` ends the thread cleanly."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from chatfn.channels.kit.loop_thread import LoopThread, Up
from chatfn.common.messages import CredentialsRefused, Unreachable
from tests.kit import until


class Refused(Exception):
    """The SDK's "bad token"."""


class Channel:
    """What the link tells the channel (a `kit.Lifecycle`'s up and down)."""

    stopping = False

    def __init__(self) -> None:
        self.said: list[Any] = []

    def up(self) -> None:
        self.said.append("up")

    def down(self, why: Exception) -> None:
        self.said.append(why)


class Link:
    """A connect that runs `steps` in turn: "fail", "refuse", "lose" (held, then lost), or
    "hold" (held until the link stops)."""

    def __init__(self, *steps: str) -> None:
        self.steps = list(steps)
        self.connects = 0
        self.closed = 0
        self.threads: set[str] = set()

    async def connect(self, lost: asyncio.Event) -> Up:
        self.threads.add(threading.current_thread().name)
        step = self.steps[self.connects] if self.connects < len(self.steps) else "hold"
        self.connects += 1
        if step == "fail":
            raise OSError("no route")
        if step == "refuse":
            raise Refused("token invalid")

        async def hold() -> None:
            if step == "lose":
                await asyncio.sleep(0.01)
                lost.set()
            await asyncio.Event().wait()

        async def close() -> None:
            self.closed += 1

        return Up(hold, close)


def thread(link: Link, channel: Channel) -> LoopThread:
    async def main(t: LoopThread) -> None:
        await t.sessions(link.connect, (Refused,))

    return LoopThread(
        "tiny-link",
        "Tiny",
        main,
        channel=channel,  # type: ignore[arg-type]
        refused=lambda detail: f"Tiny refused the token ({detail})",
    )


async def test_fail_then_hold_then_stop() -> None:
    link, channel = Link("fail", "hold"), Channel()
    t = thread(link, channel)
    t.start()
    await until(lambda: "up" in channel.said, 5, lambda: f"said: {channel.said}")
    failing = channel.said[0]
    assert isinstance(failing, Unreachable)
    assert str(failing) == "Tiny failed (OSError: no route)"
    assert link.threads == {"tiny-link"}
    await t.stop()
    assert link.connects == 2 and link.closed == 1
    assert t.loop is not None and t.loop.is_closed()


async def test_a_lost_connection_is_closed_and_made_again() -> None:
    link, channel = Link("lose", "hold"), Channel()
    t = thread(link, channel)
    t.start()
    await until(lambda: link.connects == 2 and channel.said.count("up") == 2, 5)
    assert link.closed == 1  # the lost one
    await t.stop()
    assert link.closed == 2


async def test_refused_credentials_are_said_and_wait_for_the_stop() -> None:
    link, channel = Link("refuse"), Channel()
    t = thread(link, channel)
    t.start()
    await until(lambda: channel.said, 5)
    (refused,) = channel.said
    assert isinstance(refused, CredentialsRefused)
    assert str(refused) == "Tiny refused the token (token invalid)"
    await asyncio.sleep(0.1)
    assert link.connects == 1  # the slow retry, not the backoff
    await t.stop()
    assert link.connects == 1 and link.closed == 0


async def test_stop_before_start_and_twice_is_harmless() -> None:
    t = thread(Link(), Channel())
    await t.stop()
    t.start()
    await t.stop()
    await t.stop()
