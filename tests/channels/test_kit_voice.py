"""The kit's `voice.unsent`: a spoken reply that cannot be sent is one warning, and the text
stays the answer. What it catches is the kit's (not audio, not convertible, refused) plus the
platform's own SDK errors named in `also`; anything else goes on up, so a bug or a stop is
never swallowed as "voice not sent"."""

from __future__ import annotations

import asyncio

import pytest
from loguru import logger

from chatfn.channels.kit.voice import spoken_audio, unsent
from chatfn.common.audio import AudioError
from chatfn.common.messages import DeliveryRefused


class SdkError(Exception):
    """A platform SDK's own error for a refused upload."""


@pytest.mark.parametrize(
    "error",
    [AudioError("ffmpeg failed"), ValueError("not audio"), DeliveryRefused("too big")],
)
def test_the_kits_failures_are_one_warning(logs: list[str], error: Exception) -> None:
    with unsent(logger, "Tiny", "group:1"):
        raise error
    assert logs == [f"WARNING Tiny voice reply to group:1 not sent: {error}"]


def test_a_platforms_own_error_is_caught_only_where_named(logs: list[str]) -> None:
    with unsent(logger, "Tiny", "private:2", also=(SdkError,)):
        raise SdkError("413 upload refused")
    assert logs == ["WARNING Tiny voice reply to private:2 not sent: 413 upload refused"]
    with pytest.raises(SdkError), unsent(logger, "Tiny", "private:2"):
        raise SdkError("413 upload refused")
    assert len(logs) == 1


def test_other_errors_and_cancellation_go_on_up(logs: list[str]) -> None:
    with pytest.raises(KeyError), unsent(logger, "Tiny", "group:1", also=(SdkError,)):
        raise KeyError("a bug")
    with pytest.raises(asyncio.CancelledError), unsent(logger, "Tiny", "group:1"):
        raise asyncio.CancelledError
    assert logs == []


def test_a_reply_that_is_not_audio_names_what_the_platform_plays(logs: list[str]) -> None:
    with unsent(logger, "Tiny", "group:1"):
        spoken_audio("https://example.com/a.ogg", "Tiny plays only uploaded OGG")
    assert logs == [
        "WARNING Tiny voice reply to group:1 not sent: not an audio data URI "
        "(Tiny plays only uploaded OGG)"
    ]
