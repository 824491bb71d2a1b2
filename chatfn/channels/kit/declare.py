"""What a channel's declaration (`SPEC` in its `__init__`) uses: its documentation, kept as a
Markdown file beside the package (README.md) rather than as a string in the code; the shape
of its `check` (`checks`) and of an online probe (`asked`); the usual capabilities (`CHAT`).
The declaration then states only what is its own: its sentences, its calls, what it can do."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar, cast, overload

from chatfn.channels.kit.errors import NotDelivered
from chatfn.runtime.channel_host import Capabilities, Probe

__all__ = ["CHAT", "Configured", "asked", "checks", "readme"]

S = TypeVar("S")

#: What most chat platforms' channels do: group chats and DMs, mentions, replies, images and
#: voice both ways. A channel declares `dataclasses.replace(CHAT, ...)` with what differs.
CHAT = Capabilities(
    groups=True,
    dms=True,
    mentions=True,
    replies=True,
    images_in=True,
    images_out=True,
    voice_in=True,
    voice_out=True,
)


class Configured(Protocol):
    """Settings that say what keeps the channel from starting (`PlatformSettings.problem`)."""

    def problem(self) -> str | None: ...


C = TypeVar("C", bound=Configured)
Check = Callable[[S, bool], Awaitable[list[Probe]]]
Offline = Callable[[S], Sequence[Probe]]
Online = Callable[[S], Awaitable[Probe | Sequence[Probe]]]


def _problem(settings: Configured) -> str | None:
    return settings.problem()


def _said(exc: Exception) -> str | None:
    return str(exc) if isinstance(exc, NotDelivered) else None


def readme(module_file: str) -> str:
    """The README.md beside `module_file` (pass `__file__`): `ChannelSpec.readme`."""
    return (Path(module_file).parent / "README.md").read_text(encoding="utf-8")


@overload
def checks(offline: Offline[C], online: Online[C] | None = None) -> Check[C]: ...
@overload
def checks(
    offline: Offline[S], online: Online[S] | None = None, *, unset: Callable[[S], str | None]
) -> Check[S]: ...
def checks(
    offline: Offline[S],
    online: Online[S] | None = None,
    *,
    unset: Callable[[S], str | None] | None = None,
) -> Check[S]:
    """`ChannelSpec.check`: a ✗ with what keeps the channel from starting (`unset`, by default
    the settings' `problem()`) and nothing more; else the `offline` probes, and when asked
    `online` and none of those failed, what `online` finds (one probe or several)."""

    probe = online  # the parameter's name is `check`'s own flag's

    async def check(settings: S, online: bool) -> list[Probe]:
        if why := (unset or cast(Callable[[S], str | None], _problem))(settings):
            return [Probe("fail", why)]
        probes = list(offline(settings))
        if not online or probe is None or any(p.status == "fail" for p in probes):
            return probes
        found = await probe(settings)
        return probes + ([found] if isinstance(found, Probe) else list(found))

    return check


async def asked(
    name: str,
    ask: Callable[[], Awaitable[str]],
    failed: Callable[[Exception], str | None] | None = None,
    close: Callable[[], Awaitable[object]] | None = None,
) -> Probe:
    """One online probe named `name`: ✓ with what `ask` (the platform's "who am I") says, or ✗
    with the sentence `failed` makes of its exception (the platform's refusal naming the key,
    another answer, the network); an exception `failed` gives None for goes on up. Without
    `failed`, the kit's failures (`NotDelivered` and its kinds) say their own text. `close`
    (the probe's own client) runs either way."""
    try:
        said = await ask()
    except Exception as exc:
        why = (failed or _said)(exc)
        if why is None:
            raise
        return Probe("fail", why, name=name)
    finally:
        if close is not None:
            await close()
    return Probe("ok", said, name=name)
