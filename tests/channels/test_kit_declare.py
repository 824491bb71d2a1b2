"""The channel kit's declaration helpers (chatfn/channels/kit/declare.py): the shape every
channel's `check` and online probe now share, tested on their own so a change to the shape
is seen here and not only as sixteen channels' sentences drifting."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from chatfn.channels.kit import declare
from chatfn.channels.kit.errors import CredentialsRefused
from chatfn.runtime.channel_host import Probe


@dataclass
class Settings:
    missing: str | None = None
    warn: bool = False

    def problem(self) -> str | None:
        return self.missing


def offline(settings: Settings) -> list[Probe]:
    probes = [Probe("ok", "configured")]
    if settings.warn:
        probes.append(Probe("fail", "a setting that cannot work"))
    return probes


async def test_checks_stops_at_the_settings_problem_and_asks_online_only_when_told() -> None:
    asked: list[Settings] = []

    async def online(settings: Settings) -> Probe:
        asked.append(settings)
        return Probe("ok", "who am I", name="channel x me")

    check = declare.checks(offline, online)
    assert await check(Settings(missing="channels.x.token must be set"), True) == [
        Probe("fail", "channels.x.token must be set")
    ]
    assert await check(Settings(), False) == [Probe("ok", "configured")]
    assert asked == []
    assert await check(Settings(), True) == [
        Probe("ok", "configured"),
        Probe("ok", "who am I", name="channel x me"),
    ]
    # An offline failure is the answer: the platform is not asked with settings that cannot work.
    assert [p.status for p in await check(Settings(warn=True), True)] == ["ok", "fail"]
    assert len(asked) == 1


async def test_checks_takes_several_online_probes_and_its_own_unset_sentence() -> None:
    async def online(settings: Settings) -> list[Probe]:
        return [Probe("ok", "login"), Probe("warn", "keys")]

    check = declare.checks(offline, online, unset=lambda s: "no app id" if s.warn else None)
    assert [p.detail for p in await check(Settings(missing="ignored"), True)] == [
        "configured",
        "login",
        "keys",
    ]
    assert await check(Settings(warn=True), True) == [Probe("fail", "no app id")]


async def test_asked_turns_the_platforms_answer_into_one_probe_and_always_closes() -> None:
    closed: list[int] = []

    async def close() -> None:
        closed.append(1)

    async def me() -> str:
        return "@bot (42)"

    async def refused() -> str:
        raise PermissionError("401")

    async def broken() -> str:
        raise KeyError("user")

    def failed(exc: Exception) -> str | None:
        return f"X refused channels.x.token ({exc})" if isinstance(exc, PermissionError) else None

    assert await declare.asked("channel x me", me, failed, close) == Probe(
        "ok", "@bot (42)", name="channel x me"
    )
    assert await declare.asked("channel x me", refused, failed, close) == Probe(
        "fail", "X refused channels.x.token (401)", name="channel x me"
    )
    with pytest.raises(KeyError):  # not the platform's answer: a bug, and it goes up
        await declare.asked("channel x me", broken, failed, close)
    assert len(closed) == 3


async def test_asked_without_a_sentence_says_the_kits_own_error() -> None:
    async def refused() -> str:
        raise CredentialsRefused("X refused channels.x.password for bot@x")

    probe = await declare.asked("channel x login", refused)
    assert probe == Probe("fail", "X refused channels.x.password for bot@x", name="channel x login")


def test_chat_is_the_usual_capabilities_and_a_channel_changes_only_what_differs() -> None:
    caps = replace(declare.CHAT, voice_out=False, connection=("webhook",))
    assert caps.groups and caps.dms and caps.mentions and caps.images_out and not caps.voice_out
    assert declare.CHAT.voice_out and declare.CHAT.connection == ()
