"""The outbound discipline shared by channels: splitting, per-chat rate, per-chat order."""

from __future__ import annotations

import asyncio
import time

from hypothesis import given
from hypothesis import strategies as st

from chatfn.channels.outbound import OrderedRunner, Outbound, RateLimiter, split_text


def test_split_on_line_boundaries() -> None:
    text = "\n".join(["a" * 40] * 5)
    parts = split_text(text, 100)
    assert parts == ["a" * 40 + "\n" + "a" * 40] * 2 + ["a" * 40]
    assert split_text("short", 100) == ["short"]


def test_overlong_line_breaks_at_a_space_or_hard() -> None:
    assert split_text("word " * 10, 12) == ["word word"] * 4 + ["word word "]
    assert split_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


@given(st.text(alphabet="ab \n", max_size=400), st.integers(min_value=5, max_value=60))
def test_split_never_exceeds_limit_and_keeps_all_words(text: str, limit: int) -> None:
    parts = split_text(text, limit)
    assert all(len(p) <= limit for p in parts) or parts == [text]
    assert "".join("".join(parts).split()) == "".join(text.split())


def test_rate_limiter_burst_then_rate() -> None:
    now = [0.0]
    limiter = RateLimiter(rate=2.0, burst=2, clock=lambda: now[0])
    assert [limiter.delay("c") for _ in range(2)] == [0.0, 0.0]
    assert limiter.delay("c") == 0.5
    assert limiter.delay("other") == 0.0  # per chat
    now[0] = 10.0
    assert limiter.delay("c") == 0.0
    assert RateLimiter(rate=0).delay("c") == 0.0


async def test_ordered_runner_keeps_submission_order_per_key() -> None:
    runner = OrderedRunner()
    seen: list[tuple[str, int]] = []

    def job(key: str, n: int, pause: float):  # noqa: ANN202
        async def run() -> None:
            await asyncio.sleep(pause)
            if n == 1:
                raise ValueError("a failed job does not block the next")
            seen.append((key, n))

        return run

    tasks = [runner.submit(k, job(k, n, 0.03 - n * 0.01)) for n in range(3) for k in "ab"]
    await asyncio.gather(*tasks, return_exceptions=True)
    assert [n for k, n in seen if k == "a"] == [0, 2]
    assert [n for k, n in seen if k == "b"] == [0, 2]
    assert runner.pending() == 0


async def test_deliver_splits_rate_limits_and_orders() -> None:
    outbound = Outbound(max_length=10, rate=20.0, burst=1)
    sent: list[tuple[str, int]] = []

    async def send(part: str, index: int) -> None:
        sent.append((part, index))

    start = time.monotonic()
    await asyncio.gather(
        outbound.deliver("c", "aaaa\nbbbb\ncccc", send), outbound.deliver("c", "dddd", send)
    )
    assert sent == [("aaaa\nbbbb", 0), ("cccc", 1), ("dddd", 0)]
    assert time.monotonic() - start >= 0.09  # three sends at 20/s after a burst of one


async def test_retry_after_waits_resends_the_part_and_keeps_the_chats_order() -> None:
    """A 429 on the first part of one message: that part is sent again after the wait, and the
    next message of the chat (queued meanwhile) goes out only after it; another chat is not
    held up."""
    from chatfn.channels.outbound import RetryAfter

    outbound = Outbound(max_length=100)
    sent: list[tuple[str, str]] = []
    refused: set[str] = set()

    def sender(chat: str):
        async def send_part(part: str, index: int) -> None:
            if part == "first" and part not in refused:
                refused.add(part)
                raise RetryAfter(0.3)
            sent.append((chat, part))

        return send_part

    began = time.monotonic()
    one = asyncio.create_task(outbound.deliver("a", "first", sender("a")))
    two = asyncio.create_task(outbound.deliver("a", "second", sender("a")))
    other = asyncio.create_task(outbound.deliver("b", "elsewhere", sender("b")))
    await asyncio.gather(one, two, other)
    assert [p for c, p in sent if c == "a"] == ["first", "second"]
    assert sent[0] == ("b", "elsewhere")  # not behind chat a's wait
    assert time.monotonic() - began >= 0.3


async def test_retry_after_beyond_the_bound_reaches_the_caller() -> None:
    from chatfn.channels.outbound import RetryAfter

    outbound = Outbound(max_length=100, max_retry_wait=0.2)

    async def always_slow(part: str, index: int) -> None:
        raise RetryAfter(0.15)

    try:
        await outbound.deliver("a", "x", always_slow)
    except RetryAfter:
        pass
    else:
        raise AssertionError("the wait bound was not enforced")


async def test_a_markdown_aware_splitter_and_backoff() -> None:
    from chatfn.channels.markdown import to_telegram_markdown_v2
    from chatfn.channels.outbound import Backoff
    from chatfn.channels.split import split_message

    outbound = Outbound(
        max_length=60,
        split=lambda t: split_message(t, 60, render=to_telegram_markdown_v2),
    )
    parts = outbound.split("para one.\n\n```\n" + "x = 1\n" * 20 + "```")
    assert parts[0] == "para one." and all(p.startswith("```") for p in parts[1:])
    backoff = Backoff(first=0.5, cap=4.0, jitter=0.0)
    assert [backoff.next_delay() for _ in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    backoff.reset()
    stop = asyncio.Event()
    stop.set()
    assert await backoff.wait(stop) is False  # stopping: no wait
