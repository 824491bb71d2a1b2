"""The kit's `PlatformSender.retried`, tested on its own with a tiny platform: a call the
platform fails without saying when to try again is made again after the policy's pauses, its
`retries` times, then refused with an error line; one that may have gone out is looked for
first and not made again when found; one lost with its connection is made again once at once;
any other error is raised as it is. A third-party channel relies on exactly this."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from chatfn.channels.kit.sender import ChatTarget, Owed, PlatformSender
from chatfn.common.messages import DeliveryRefused, OutgoingMessage
from chatfn.runtime.channel_host import DeliveryPolicy


class Failed(Exception):
    """The platform's failure code: no word on when to try again."""


class Dropped(ConnectionError):
    """The connection went while the call was out: it may have been carried out."""


class TimedOut(Exception):
    """No answer in time: a failure, and it may have been carried out."""


class TinyRefused(DeliveryRefused):
    """The platform's own refusal, caught by name by its callers."""


class TinySender(PlatformSender[ChatTarget], platform="tiny", label="Tiny"):
    refused = TinyRefused

    def parse_chat(self, chat_id: str) -> ChatTarget:
        return ChatTarget(False, chat_id)

    async def send_parts(self, ref: ChatTarget, out: OutgoingMessage, owed: Owed) -> Any:
        return None

    def failure(self, exc: Exception) -> str | None:
        if isinstance(exc, Failed | TimedOut):
            return str(exc)
        return None

    def unsure(self, exc: Exception) -> bool:
        return isinstance(exc, Dropped | TimedOut)


def sender(retries: int = 2, pause: float = 0.001) -> TinySender:
    return TinySender(None, SimpleNamespace(), DeliveryPolicy(retry_pause=pause, retries=retries))


def scripted(*steps: Any) -> tuple[Any, list[int]]:
    """A call that raises or returns each of `steps` in turn, counting its calls."""
    calls: list[int] = []

    async def call() -> Any:
        calls.append(1)
        step = steps[len(calls) - 1]
        if isinstance(step, Exception):
            raise step
        return step

    return call, calls


async def test_a_failure_every_time_is_tried_retries_times_then_refused(logs: list[str]) -> None:
    call, calls = scripted(Failed("code 1"), Failed("code 2"), Failed("code 3"), "never")
    with pytest.raises(TinyRefused, match="code 3"):
        await sender(retries=2).retried("private:7", call, what="send", about="hello there")
    assert len(calls) == 3
    warnings = [line for line in logs if line.startswith("WARNING")]
    assert warnings == [
        "WARNING send to private:7 failed (code 1): trying again in 0.0 s",
        "WARNING send to private:7 failed (code 2): trying again in 0.0 s",
    ]
    assert [line for line in logs if line.startswith("ERROR")] == [
        "ERROR message to private:7 not delivered: send code 1 then code 2 then code 3: "
        "'hello there'"
    ]


async def test_the_pauses_are_the_policys_doubling_from_retry_pause() -> None:
    call, calls = scripted(Failed("a"), Failed("b"), "done")
    started = time.monotonic()
    assert await sender(retries=2, pause=0.05).retried("c", call, what="send") == "done"
    # 0.05 then 0.1 s.
    assert time.monotonic() - started >= 0.14
    assert len(calls) == 3


async def test_a_failure_then_success_returns_the_answer(logs: list[str]) -> None:
    call, calls = scripted(Failed("busy"), {"id": 5})
    assert await sender(retries=1).retried("c", call, what="send") == {"id": 5}
    assert len(calls) == 2
    assert not [line for line in logs if line.startswith("ERROR")]


async def test_no_retries_refuses_at_the_first_failure() -> None:
    call, calls = scripted(Failed("busy"), "never")
    with pytest.raises(TinyRefused):
        await sender(retries=0).retried("c", call, what="send")
    assert len(calls) == 1


async def test_an_unsure_call_found_sent_is_not_made_again(logs: list[str]) -> None:
    call, calls = scripted(Dropped("reset"), "never")
    looked: list[datetime] = []
    before = datetime.now(UTC)

    async def sent(since: datetime) -> bool:
        looked.append(since)
        return True

    assert await sender().retried("group:1", call, what="send", sent=sent) is None
    assert len(calls) == 1
    assert len(looked) == 1 and before <= looked[0] <= datetime.now(UTC)
    assert "INFO message to group:1 was sent before the connection dropped: not resent" in logs


async def test_an_unsure_failure_found_sent_is_not_made_again() -> None:
    call, calls = scripted(TimedOut("no answer"), "never")

    async def sent(since: datetime) -> bool:
        return True

    assert await sender().retried("c", call, what="send", sent=sent) is None
    assert len(calls) == 1


async def test_an_unsure_failure_not_found_is_retried_after_the_pause() -> None:
    call, calls = scripted(TimedOut("no answer"), TimedOut("no answer"), "done")
    looked: list[datetime] = []

    async def sent(since: datetime) -> bool:
        looked.append(since)
        return False

    assert await sender(retries=2).retried("c", call, what="send", sent=sent) == "done"
    assert len(calls) == 3
    assert len(looked) == 2
    assert looked[0] == looked[1]  # always since the first try


async def test_a_call_lost_with_its_connection_is_made_again_once_at_once(logs: list[str]) -> None:
    call, calls = scripted(Dropped("reset"), "done")

    async def sent(since: datetime) -> bool:
        return False

    started = time.monotonic()
    result = await sender(pause=5).retried("c", call, what="send", sent=sent)
    assert result == "done"
    assert len(calls) == 2
    assert time.monotonic() - started < 1  # at once, not after the policy's pause
    assert "WARNING send to c: connection dropped before the answer; resending" in logs


async def test_a_call_lost_twice_is_raised_as_it_is() -> None:
    call, calls = scripted(Dropped("first"), Dropped("second"), "never")
    with pytest.raises(Dropped, match="second"):
        await sender().retried("c", call, what="send")
    assert len(calls) == 2


async def test_without_sent_a_lost_call_is_not_looked_for_and_made_again() -> None:
    call, calls = scripted(Dropped("reset"), "done")
    assert await sender().retried("c", call, what="send") == "done"
    assert len(calls) == 2


async def test_any_other_error_is_raised_as_it_is_without_a_retry(logs: list[str]) -> None:
    call, calls = scripted(KeyError("bug"), "never")
    looked: list[datetime] = []

    async def sent(since: datetime) -> bool:
        looked.append(since)
        return True

    with pytest.raises(KeyError):
        await sender().retried("c", call, what="send", sent=sent)
    assert len(calls) == 1
    assert not looked  # not unsure: never looked for
    assert not logs
