"""Failure isolation for plugins: a circuit breaker per plugin, and bounded start-up hooks.

A plugin (a plugin file or an installed package; the built-ins have no breaker, though the
console holds one off as any plugin: `hold`) whose functions or event handlers fail
`plugins.breaker.failures` times within `plugins.breaker.window` seconds (a handler that
raises or times out; a function that returns an error result on purpose does not count) is
switched off for `plugins.breaker.cooldown` seconds: its functions leave the registry (the
model is not offered them, a slash command does not find them) and its event handlers are
skipped. That is one log line, an admin notice (to the private chats `bot.admins` write to the
bot from, or to the chats of `plugins.breaker.notify` where it is set; and a row of the
console's audit, whose Plugins page says "cooling down until ..."), and
`chatfn_plugins_switched_off{plugin,reason}`; the rest of the bot goes on. After the cool-down
(on the bot's clock) the next message finds it on again: a half-open breaker, whose next
failure switches it off again at once (logged, counted and audited again; its admins are not
messaged again until a call of it has gone well).

A start-up hook that raises or takes longer than `plugins.startup_timeout` switches its plugin
off until the bot restarts, in the same three ways; the other plugins and the bot start.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from loguru import logger

from chatfn.common.config import BreakerSettings
from chatfn.common.metrics import Metrics
from function_calls.spec import FunctionSpec

#: What is told of each switch-off: the plugin, why (a sentence), the reason label, and whether
#: the admins were told of it before and it has not worked since (a repeat: no chat message).
Notify = Callable[[str, str, str, bool], Coroutine[Any, Any, None]]


@dataclass
class Breaker:
    """The failures of one plugin in the last `window` seconds, and until when it is off."""

    failures: int
    window: float
    cooldown: float
    times: deque[float] = field(default_factory=deque)
    open_until: float | None = None
    half_open: bool = False

    def fail(self, now: float) -> bool:
        """Count one failure at `now`; True when that opens the breaker."""
        if self.open_until is not None:
            return False
        self.times.append(now)
        while self.times and self.times[0] <= now - self.window:
            self.times.popleft()
        if self.half_open or len(self.times) >= self.failures:
            self.open_until = now + self.cooldown
            self.times.clear()
            self.half_open = False
            return True
        return False

    def succeed(self) -> None:
        """A call that went well after the cool-down: closed for good."""
        self.half_open = False

    def due(self, now: float) -> bool:
        """Whether an open breaker's cool-down is over (it goes half-open)."""
        if self.open_until is None or now < self.open_until:
            return False
        self.open_until = None
        self.half_open = True
        return True


class PluginGuard:
    """The breakers of a bot's plugins, and what switching one off or on again changes:
    `remove(name)` / `add(spec)` on the registry, its event handlers skipped meanwhile."""

    def __init__(
        self,
        settings: BreakerSettings,
        clock: Callable[[], float],
        metrics: Metrics,
        add: Callable[[FunctionSpec], object],
        remove: Callable[[str], object],
        notify: Notify,
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._metrics = metrics
        self._add = add
        self._remove = remove
        self._notify = notify
        self._breakers: dict[str, Breaker] = {}
        self._specs: dict[str, list[FunctionSpec]] = {}
        self._owner: dict[str, str] = {}  # function name -> plugin
        self._dead: set[str] = set()  # off until a restart (start-up failed)
        self._held: set[str] = set()  # switched off in the console (until switched on)
        self._told: set[str] = set()  # switched off, the admins told, no call went well since
        self._tasks: set[asyncio.Task[None]] = set()

    def watch(self, plugin: str, specs: list[FunctionSpec]) -> None:
        """Guard `plugin`, whose functions are `specs`."""
        s = self._settings
        self._breakers[plugin] = Breaker(s.failures, s.window, s.cooldown)
        self._specs[plugin] = list(specs)
        for spec in specs:
            self._owner[spec.name] = plugin

    def plugins(self) -> set[str]:
        return set(self._breakers)

    def owner(self, function: str) -> str | None:
        return self._owner.get(function)

    def dead(self, plugin: str) -> bool:
        """Whether `plugin`'s start-up failed (off until a restart)."""
        return plugin in self._dead

    def hold(self, plugin: str) -> None:
        """Switched off in the console: its handlers skipped, its cool-downs not ending it
        (the caller takes its functions out of the registry)."""
        self._held.add(plugin)

    def release(self, plugin: str) -> bool:
        """Switched on again in the console; whether its functions belong in the registry now
        (not while its breaker is open or its start-up failed)."""
        self._held.discard(plugin)
        breaker = self._breakers.get(plugin)
        return plugin not in self._dead and (breaker is None or breaker.open_until is None)

    def is_off(self, plugin: str) -> bool:
        if plugin in self._dead or plugin in self._held:
            return True
        breaker = self._breakers.get(plugin)
        return breaker is not None and breaker.open_until is not None

    def held(self, plugin: str) -> bool:
        """Whether `plugin` was switched off in the console (not by its breaker)."""
        return plugin in self._held

    def off_until(self, plugin: str) -> float | None:
        """When `plugin`'s cool-down ends (epoch seconds, the bot's clock); None: not cooling
        down."""
        breaker = self._breakers.get(plugin)
        return breaker.open_until if breaker is not None else None

    def state(self, plugin: str) -> str | None:
        """Why `plugin` is off now (None: it is not)."""
        if plugin in self._dead:
            return "off: its start-up hook failed (until a restart)"
        if plugin in self._held:
            return "off: switched off in the console"
        until = self.off_until(plugin)
        if until is not None:
            when = datetime.fromtimestamp(until, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            left = until - self._clock()
            return f"off: too many failures, cooling down until {when} (on again in {left:.0f} s)"
        return None

    def tick(self) -> None:
        """Switch on again each plugin whose cool-down is over (called for each message)."""
        now = self._clock()
        for plugin, breaker in self._breakers.items():
            if plugin not in self._dead and breaker.due(now) and plugin not in self._held:
                for spec in self._specs[plugin]:
                    self._add(spec)
                logger.info("plugin {} on again after its cool-down", plugin)

    def record(self, plugin: str | None, ok: bool) -> None:
        """One call of `plugin`'s function or handler went well (`ok`) or failed."""
        breaker = self._breakers.get(plugin) if plugin is not None else None
        if breaker is None or plugin is None:
            return
        if ok:
            breaker.succeed()
            self._told.discard(plugin)
            return
        again = breaker.half_open
        if breaker.fail(self._clock()):
            s = self._settings
            why = f"{s.failures} failures within {s.window:g} s"
            why = "it failed again after its cool-down" if again else why
            self._switch_off(plugin, f"{why}; off for {s.cooldown:g} s", "failures")

    def start_failed(self, plugin: str, why: str) -> None:
        """`plugin`'s start-up hook raised or hung: off until a restart."""
        self._dead.add(plugin)
        self._switch_off(plugin, f"its start-up hook {why}; off until a restart", "startup")

    def _switch_off(self, plugin: str, why: str, reason: str) -> None:
        for spec in self._specs.get(plugin, []):
            self._remove(spec.name)
        logger.error("plugin {} switched off: {}", plugin, why)
        self._metrics.plugins_switched_off.labels(plugin, reason).inc()
        repeat = plugin in self._told
        self._told.add(plugin)
        notice = self._notify(plugin, why, reason, repeat)
        task = asyncio.get_running_loop().create_task(notice)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the notices under way (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


async def bounded(hook: Callable[[], Awaitable[None]], timeout: float) -> str | None:
    """Run a start-up hook for at most `timeout` seconds; None when it went well, else what
    went wrong ("raised ValueError: ...", "took longer than 30 s")."""
    try:
        async with asyncio.timeout(timeout):
            await hook()
    except TimeoutError:
        return f"took longer than {timeout:g} s"
    except Exception as exc:
        logger.opt(exception=exc).debug("start-up hook failed")
        return f"raised {type(exc).__name__}: {exc}"
    return None
