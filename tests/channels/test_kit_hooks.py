"""The hooks a platform must write are abstract (`abc.abstractmethod`): a kit class whose
platform leaves one out cannot be built, and the TypeError names the hook, so a platform that
forgets one fails when it starts, not at its first call. Each hook is left out of a platform
that writes all the others: were it no longer abstract, the platform would be built and the
test would fail."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from chatfn.channels.kit.gateway import GatewaySocket
from chatfn.channels.kit.replies import AnswerSender, ReplyWindow
from chatfn.channels.kit.rest import ChannelApi


def _written(*args: Any) -> Any:
    return None


async def _written_async(*args: Any) -> Any:
    return None


#: Each kit class: how it is built, its hooks a platform must write (the ones tested), and
#: every hook a platform of it writes (the class's other abstract ones too).
CLASSES = [
    pytest.param(
        ChannelApi,
        lambda cls: cls(SimpleNamespace(), None),
        ("root", "answered"),
        {"root": property(lambda self: "http://127.0.0.1:9"), "answered": _written},
        id="ChannelApi",
    ),
    pytest.param(
        GatewaySocket,
        lambda cls: cls(None, SimpleNamespace(), None, None, None),
        ("address", "read", "beat"),
        {"address": _written_async, "read": _written_async, "beat": _written},
        id="GatewaySocket",
    ),
    pytest.param(
        AnswerSender,
        lambda cls: cls(None, SimpleNamespace(), None, ReplyWindow(5)),
        ("window",),
        {"window": _written, "parse_chat": _written, "send_parts": _written_async},
        id="AnswerSender",
    ),
]

LEFT_OUT = [
    pytest.param(kit_class, build, hook, hooks, id=f"{kit_class.__name__}.{hook}")
    for kit_class, build, tested, hooks in (case.values for case in CLASSES)
    for hook in tested
]


@pytest.mark.parametrize(("kit_class", "build", "tested", "hooks"), CLASSES)
def test_a_platform_that_writes_every_hook_is_built(
    kit_class: type[Any],
    build: Callable[[type[Any]], object],
    tested: tuple[str, ...],
    hooks: dict[str, Any],
) -> None:
    """With every hook written the platform is built: the TypeError below is the one hook
    left out's, not another's."""
    platform = type(f"Tiny{kit_class.__name__}", (kit_class,), dict(hooks))
    assert isinstance(build(platform), kit_class)


@pytest.mark.parametrize(("kit_class", "build", "hook", "hooks"), LEFT_OUT)
def test_a_hook_left_out_refuses_construction_naming_it(
    kit_class: type[Any],
    build: Callable[[type[Any]], object],
    hook: str,
    hooks: dict[str, Any],
) -> None:
    written = {name: value for name, value in hooks.items() if name != hook}
    platform = type(f"Tiny{kit_class.__name__}", (kit_class,), written)
    with pytest.raises(TypeError, match=rf"abstract method.*\b{hook}\b"):
        build(platform)
