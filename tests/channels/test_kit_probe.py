"""The kit's online probe (`kit.probe.connects`): the channel built as the bot builds it, on a
host that runs nothing, its own `connect()` asked once and its `close()` run whatever came;
what `connect` says is the ✓, the sentence of what it raised the ✗. Also: the probe host is a
`ChannelHost` a channel can be built on (register, a webhook route, the delivery policy)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from chatfn.channels.kit import CredentialsRefused, PlatformChannel, Unreachable
from chatfn.channels.kit.declare import checks
from chatfn.channels.kit.probe import ProbeHost, connects
from chatfn.common.config import Section
from chatfn.common.messages import OutgoingMessage
from chatfn.runtime.channel_host import ChannelHost


class Settings(Section):
    answer: str = "ok"


class Probed(PlatformChannel[Settings], platform="probed", label="Probed"):
    closed: list[str] = []

    def __init__(self, host: ChannelHost, settings: Settings) -> None:
        super().__init__(host, settings)
        host.add_web_route("POST", "/probed/events", self._webhook)  # accepted, never served

    async def _webhook(self, request: Any) -> Any:
        raise AssertionError("a probe serves nothing")

    async def connect(self) -> str | None:
        said = self.cfg.answer
        if said == "refused":
            raise CredentialsRefused("Probed refused channels.probed.token: make a new one")
        if said == "down":
            raise Unreachable("Probed not reachable at https://probed.example")
        if said == "bug":
            raise KeyError("a bug in connect")
        return said or None

    async def close(self) -> None:
        Probed.closed.append(self.cfg.answer)

    async def deliver(self, message: OutgoingMessage) -> None:
        raise AssertionError("a probe sends nothing")


def build(host: ChannelHost, settings: Settings) -> Probed:
    return Probed(host, settings)


probe = connects(build, "channel probed whoami")


@pytest.fixture(autouse=True)
def _fresh() -> None:
    Probed.closed.clear()


async def test_what_connect_says_is_the_tick_and_the_channel_is_closed() -> None:
    found = await probe(Settings(answer="@bot (id 7), polling"))
    assert (found.status, found.detail, found.name) == (
        "ok",
        "@bot (id 7), polling",
        "channel probed whoami",
    )
    assert Probed.closed == ["@bot (id 7), polling"]
    assert (await probe(Settings(answer=""))).detail == "connected"  # connect says nothing


@pytest.mark.parametrize(
    ("answer", "sentence"),
    [
        ("refused", "Probed refused channels.probed.token: make a new one"),
        ("down", "Probed not reachable at https://probed.example"),
    ],
)
async def test_a_refusal_or_an_outage_is_the_cross_in_connects_own_words(
    answer: str, sentence: str
) -> None:
    found = await probe(Settings(answer=answer))
    assert (found.status, found.detail) == ("fail", sentence)
    assert Probed.closed == [answer]  # closed all the same


async def test_a_bug_in_connect_goes_on_up_after_closing() -> None:
    """check_system and the console show a crashing probe as one line of their own."""
    with pytest.raises(KeyError):
        await probe(Settings(answer="bug"))
    assert Probed.closed == ["bug"]


async def test_in_a_check_the_probe_runs_only_online() -> None:
    check = checks(lambda s: [], probe, unset=lambda s: None)
    assert await check(Settings(), False) == []
    assert [p.status for p in await check(Settings(answer="down"), True)] == ["fail"]


async def test_the_probe_host_takes_nothing() -> None:
    host: ChannelHost = ProbeHost()
    assert await host.recent_chats("probed", datetime.now(UTC)) == []
    assert not await host.was_stored("probed", "c", "1")
    assert await host.load_state("probed", "k") is None
    with pytest.raises(RuntimeError, match="takes no messages"):
        await host.handle(None)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="serves its own address"):
        host.web_listener("probed")
