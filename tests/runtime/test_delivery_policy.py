"""One delivery policy (chatfn/runtime/delivery_policy.py): a short rate limit is waited out in
place, a long one and a platform that is down wait in the outbox for the policy's time (not
tried on every pass), and a channel that says it is back gets its messages at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from chatfn.common.messages import (
    NotDelivered,
    OutgoingMessage,
    RateLimited,
    Unreachable,
)
from chatfn.runtime.bot import Bot
from chatfn.runtime.delivery_policy import DeliveryPolicy
from chatfn.runtime.settings import parse_settings
from tests.kit import until


async def test_a_rate_limit_within_the_limit_is_waited_out_in_place() -> None:
    answers: list[float | None] = [0.05, None]
    calls = 0

    async def call() -> str:
        nonlocal calls
        calls += 1
        if answers:
            wait = answers.pop(0)
            raise RateLimited("slow down", wait)
        return "sent"

    policy = DeliveryPolicy(max_retry_after=1.0, first=0.05)
    assert await policy.call("x", "chat", call) == "sent" and calls == 3


async def test_a_longer_rate_limit_is_raised_with_the_wait_it_needs() -> None:
    policy = DeliveryPolicy(max_retry_after=60.0).override("x", 0.5)
    assert policy.limit("x") == 0.5 and policy.limit("y") == 60.0

    async def named() -> None:
        raise RateLimited("wait 30 s", 30)

    with pytest.raises(RateLimited) as raised:
        await policy.call("x", "chat", named)
    assert raised.value.retry_after == 30

    async def unnamed() -> None:  # no wait given: the backoff's first (1 s) is over 0.5 s
        raise RateLimited("rate limit")

    began = time.monotonic()
    with pytest.raises(RateLimited) as raised:
        await policy.call("x", "chat", unnamed)
    assert time.monotonic() - began < 0.5 and raised.value.retry_after is not None


def test_when_the_outbox_tries_again() -> None:
    policy = DeliveryPolicy(first=1.0, cap=8.0, jitter=0.0)
    assert policy.retry_in(RateLimited("x", 30), 5) == 30
    assert [policy.retry_in(Unreachable("x"), n) for n in range(5)] == [1, 2, 4, 8, 8]
    assert policy.retry_in(NotDelivered("not connected yet"), 3) is None


def test_overrides_come_from_the_channel_sections(tmp_path: Path) -> None:
    settings = parse_settings(
        {
            "storage": {"outbox": {"max_retry_after": 20}},
            "channels": {"telegram": {"max_retry_after": 5}, "slack": {}},
        },
        base_dir=tmp_path,
    )
    policy = DeliveryPolicy.from_settings(settings)
    assert policy.limit("telegram") == 5 and policy.limit("slack") == 20


class Flaky:
    """A channel whose platform answers with `failures` first, then takes every message."""

    platform = "flaky"

    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.tries: list[float] = []
        self.sent: list[str] = []

    async def send(self, message: OutgoingMessage) -> None:
        self.tries.append(time.monotonic())
        if self.failures:
            raise self.failures.pop(0)
        self.sent.append(message.text)


def make_bot(tmp_path: Path) -> Bot:
    settings = parse_settings(
        {"storage": {"url": f"sqlite:///{tmp_path / 'p.db'}"}, "plugins": {"paths": []}},
        base_dir=tmp_path,
    )
    return Bot(settings, model=None, builtins=False, load_plugins=False)


async def test_the_outbox_waits_out_a_long_rate_limit_then_sends_in_order(
    tmp_path: Path,
) -> None:
    bot = make_bot(tmp_path)
    channel = Flaky([RateLimited("wait", 0.5)])
    bot.channel_host.register(channel)
    await bot.start()
    try:
        began = time.monotonic()
        await bot.send(OutgoingMessage("flaky", "private:1", "one"))
        await bot.send(OutgoingMessage("flaky", "private:1", "two"))
        await until(lambda: len(channel.sent) >= 2, 5, "both messages not sent")
        # One refused try, then nothing until the wait has passed (not a try every pass).
        assert channel.sent == ["one", "two"] and len(channel.tries) == 3
        assert channel.tries[1] - began >= 0.5
    finally:
        await bot.aclose()


async def test_a_platform_that_is_down_is_tried_with_a_backoff_and_at_once_when_back(
    tmp_path: Path,
) -> None:
    bot = make_bot(tmp_path)
    bot.outbox.policy = DeliveryPolicy(first=30.0, cap=60.0)
    channel = Flaky([Unreachable("down")])
    bot.channel_host.register(channel)
    await bot.start()
    try:
        await bot.send(OutgoingMessage("flaky", "private:1", "one"))
        await bot.outbox.drain()  # a pass: held back, not tried again
        assert len(channel.tries) == 1 and channel.sent == []
        bot.channel_host.kick()  # the channel is back
        await until(lambda: channel.sent == ["one"], 5, "not sent once the channel was back")
    finally:
        await bot.aclose()
