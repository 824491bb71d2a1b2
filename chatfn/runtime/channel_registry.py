"""Finding channels: the `chatfn.channels` entry-point group, built-ins included.

Each entry point names a `ChannelSpec` (chatfn/runtime/channel_host.py), e.g. in a channel package's
pyproject.toml:

    [project.entry-points."chatfn.channels"]
    echo3p = "echo3p_channel:SPEC"

so a separately installed distribution adds a channel without touching chatfn, as NoneBot2's
adapters do. A source checkout run without `pip install` has no entry points of its own:
the built-ins are then loaded from `BUILTIN` (the same targets pyproject.toml declares), so
`python bot.py` works from a clone.

Loading an entry point imports only the channel's spec module (its settings model and a
factory that imports the platform SDK when the channel is built), so finding every installed
channel stays cheap. One that fails to import is kept as an error and reported when its
channel is asked for or configured, instead of stopping bots that do not use it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points

from chatfn.runtime.channel_host import ChannelSpec

GROUP = "chatfn.channels"

#: The built-in channels, as pyproject.toml's entry points name them.
BUILTIN: dict[str, str] = {
    "console": "chatfn.channels.console:SPEC",
    "http": "chatfn.channels.http:SPEC",
    "onebot": "chatfn.channels.onebot:SPEC",
    "mcp": "chatfn.channels.mcp:SPEC",
    "discord": "chatfn.channels.discord:SPEC",
    "telegram": "chatfn.channels.telegram:SPEC",
    "slack": "chatfn.channels.slack:SPEC",
    "feishu": "chatfn.channels.feishu:SPEC",
    "qq": "chatfn.channels.qq:SPEC",
    "matrix": "chatfn.channels.matrix:SPEC",
    "dingtalk": "chatfn.channels.dingtalk:SPEC",
    "wecom": "chatfn.channels.wecom:SPEC",
    "wechat_mp": "chatfn.channels.wechat_mp:SPEC",
    "irc": "chatfn.channels.irc:SPEC",
    "xmpp": "chatfn.channels.xmpp:SPEC",
    "email": "chatfn.channels.email:SPEC",
    "weixin": "chatfn.channels.weixin:SPEC",
    "line": "chatfn.channels.line:SPEC",
    "whatsapp": "chatfn.channels.whatsapp:SPEC",
    "mattermost": "chatfn.channels.mattermost:SPEC",
    "satori": "chatfn.channels.satori:SPEC",
    "teams": "chatfn.channels.teams:SPEC",
    "kook": "chatfn.channels.kook:SPEC",
}


class ChannelNotFound(LookupError):
    """`--channel NAME` or `channels.NAME:` names no installed channel (or a broken one)."""


@dataclass
class Channels:
    """The channels found: `specs` by name, and `broken` (name -> why it failed to load)."""

    specs: dict[str, ChannelSpec] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)  # name -> "module:attr"

    def names(self) -> list[str]:
        return sorted(self.specs)

    def get(self, name: str) -> ChannelSpec:
        """The spec of `name`; ChannelNotFound naming the installed ones (or why `name`
        failed to load)."""
        spec = self.specs.get(name)
        if spec is not None:
            return spec
        if name in self.broken:
            raise ChannelNotFound(f"channel {name!r} failed to load: {self.broken[name]}")
        raise ChannelNotFound(
            f"no channel named {name!r} is installed (found: {', '.join(self.names())}); "
            "a third-party channel is installed with pip and found by its "
            f"{GROUP!r} entry point"
        )


def _load(target: str) -> ChannelSpec:
    module_name, _, attr = target.partition(":")
    value = importlib.import_module(module_name)
    for part in attr.split(".") if attr else []:
        value = getattr(value, part)
    return _checked(value, target)


def _checked(value: object, target: str) -> ChannelSpec:
    if callable(value) and not isinstance(value, ChannelSpec):
        value = value()  # an entry point may name a function returning the spec
    if not isinstance(value, ChannelSpec):
        raise TypeError(f"{target} is {type(value).__name__}, not a ChannelSpec")
    return value


def find_channels(extra: list[EntryPoint] | None = None) -> Channels:
    """The built-ins (the targets chatfn's own entry points name, loaded whether or not it
    was installed), then every other channel of the `chatfn.channels` group. A name taken
    already keeps its channel: the second is reported broken, naming both, never silently
    replacing it. `extra`: entry points to add (tests)."""
    found = Channels()
    for name, target in BUILTIN.items():
        _add(found, name, target, lambda t=target: _load(t))
    points = list(entry_points(group=GROUP)) + list(extra or [])
    for point in points:
        _add(found, point.name, point.value, lambda p=point: _checked(p.load(), p.value))
    return found


def _add(found: Channels, name: str, target: str, load: object) -> None:
    if name in found.specs or name in found.broken:
        if found.origin.get(name) != target:
            found.broken.setdefault(
                f"{name} ({target})",
                f"channel name {name!r} is taken by {found.origin.get(name)}",
            )
        return
    found.origin[name] = target
    if name == "run":  # `channels.run` is the list of channels to run, not a channel's section
        found.broken[name] = "the name 'run' is taken by the channels.run setting"
        return
    try:
        spec = load()  # type: ignore[operator]
    except Exception as exc:  # an installed channel that cannot load must not stop the bot
        found.broken[name] = f"{type(exc).__name__}: {exc}"
        return
    if spec.name != name:
        found.broken[name] = f"entry point {name!r} names a spec called {spec.name!r}"
        return
    found.specs[name] = spec


_cache: Channels | None = None


def installed_channels() -> Channels:
    """`find_channels()`, once per process (entry points do not change while it runs)."""
    global _cache
    if _cache is None:
        _cache = find_channels()
    return _cache


def forget_channels() -> None:
    """Look again on the next `installed_channels()` (a test that installed a channel)."""
    global _cache
    _cache = None
