"""The bot's models: the default one, those chats switch to, the vision model. Built on first
use, so a `models:` entry no chat uses costs nothing (no SDK import, no client), and closed
together at shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable

from loguru import logger

from chatfn.common.config import ConfigError
from chatfn.runtime.settings import Settings
from providers.base import ChatModel
from providers.fallback import Cooldowns, FallbackChain, chain_names

# Seconds after the channels start before the model SDKs load (ModelSet.prepare).
PREPARE_DELAY = 0.5


def _served(model: ChatModel) -> ChatModel:
    """A model the bot serves takes requests only through its accounting (usage rows, metrics,
    limits: function_calls.model_calls), so no plugin can spend on it uncounted."""
    model.guarded = True
    return model


async def _in_daemon_thread(job: Callable[[], None]) -> None:
    """`job` in a daemon thread: a stop during a slow SDK import (seconds on a loaded machine)
    exits at once, where the loop's executor would make the interpreter wait for the import."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def run() -> None:
        outcome: BaseException | None = None
        try:
            job()
        except BaseException as exc:  # handed to the waiting coroutine, raised there
            outcome = exc
        # The loop may be gone by now (the bot stopped during the import): nobody waits then.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, done, outcome)

    threading.Thread(target=run, name="prepare-models", daemon=True).start()
    await done


def _settle(done: asyncio.Future[None], exc: BaseException | None) -> None:
    if done.done():
        return
    if exc is None:
        done.set_result(None)
    else:
        done.set_exception(exc)


class ModelSet:
    def __init__(
        self,
        settings: Settings,
        prebuilt: dict[str, ChatModel] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`prebuilt`: models made in code (tests, benchmarks), by name. `clock`: seconds, for
        the cooldown of a model that failed (`models.<name>.cooldown`)."""
        self.settings = settings
        self.cooldowns = Cooldowns(clock)
        self._models: dict[str, ChatModel] = {}
        # Set while `prepare` runs: `ready` waits for it instead of importing on the loop.
        self._prepared: asyncio.Event | None = None
        self._hurry: asyncio.Event | None = None
        for model in (prebuilt or {}).values():
            self._adopt(model)
        self.default: ChatModel | None = None

    def _adopt(self, model: ChatModel) -> ChatModel:
        """Keep `model` under its name, served (accounted), with its config's `price` and its
        fallback chain when it has one."""
        self._models.setdefault(model.name, _served(model))
        cfg = self.settings.models.get(model.name)
        if cfg is not None and cfg.price is not None and model.price is None:
            model.price = cfg.price
        names = chain_names(model.name, self._fallbacks_of)
        if names and model.fallback is None:
            model.fallback = FallbackChain(
                names, self.named_exactly, self.cooldowns, self._cooldown
            )
        return model

    def _fallbacks_of(self, name: str) -> list[str]:
        cfg = self.settings.models.get(name)
        return list(cfg.fallback) if cfg is not None else []

    def _cooldown(self, name: str) -> float:
        cfg = self.settings.models.get(name)
        return cfg.cooldown if cfg is not None else 60.0

    def named_exactly(self, name: str) -> ChatModel | None:
        """The model `name`, built on first use; None when it is not configured (no default
        stands in: a fallback chain must not answer with the model that just failed)."""
        found = self._models.get(name)
        if found is not None:
            return found
        if name in self.settings.models:
            return self._build(name)
        return None

    def names(self) -> list[str]:
        """The models chats may use: the `models:` entries, and any prebuilt one."""
        return list(dict.fromkeys([*self.settings.models, *self._models]))

    def knows(self, name: str) -> bool:
        """Whether `name` is one of `names()` (without building the list)."""
        return name in self.settings.models or name in self._models

    def set_default(self, model: ChatModel | None) -> ChatModel | None:
        """The default model: `model` when given, else `bot.model` (built now, so a bad entry
        is a start-up error), else the first prebuilt one, else none (slash commands only)."""
        if model is None:
            model = self._configured_default()
        if model is not None:
            self._adopt(model)
        self.default = model
        return model

    def _configured_default(self) -> ChatModel | None:
        name = self.settings.chat_model_name()
        if name is None:
            if self._models:
                return next(iter(self._models.values()))
            logger.warning("no model configured: only slash commands will work")
            return None
        if name in self._models:
            return self._models[name]
        if name not in self.settings.models:
            raise ConfigError(
                f"bot.model: {name!r} is not a key of models "
                f"(have: {', '.join(self.settings.models) or 'none'})"
            )
        return self._build(name)

    def _build(self, name: str) -> ChatModel:
        from providers.errors import ProviderError
        from providers.factory import build_model

        try:
            model = build_model(name, self.settings.models[name])
        except ProviderError as exc:  # e.g. no API key for api.openai.com: a config problem
            raise ConfigError(f"models.{name}: {exc}") from None
        return self._adopt(model)

    def named(self, name: str | None) -> ChatModel | None:
        """The model `name` (built on first use), or the default model when `name` is None or
        no longer configured (an override naming a model removed from the config)."""
        if name is None or (self.default is not None and name == self.default.name):
            return self.default
        found = self._models.get(name)
        if found is not None:
            return found
        if name in self.settings.models:
            return self._build(name)
        logger.warning("model {!r} is not configured any more: using the default", name)
        return self.default

    def vision(self) -> ChatModel | None:
        """`bot.vision_model` (built on first use): describes images for models without vision."""
        name = self.settings.bot.vision_model
        return self.named(name) if name is not None else None

    async def prepare(self) -> None:
        """Load the models' SDKs in a thread (`ChatModel.prepare`), after the channels answer:
        importing the openai SDK takes about 0.5 s that start-up no longer waits for, and the
        first message does not pay it either. It waits `PREPARE_DELAY` first (cut short when
        a message wants a model: `ready`): a thread importing holds the GIL half the time, and
        the channels should bind and answer before it starts. A failure is logged; the first
        request then meets it again and reports it as usual."""
        self._prepared, self._hurry = asyncio.Event(), asyncio.Event()
        try:
            try:
                await asyncio.wait_for(self._hurry.wait(), PREPARE_DELAY)
            except TimeoutError:
                pass
            for model in list(self._models.values()):
                try:
                    await _in_daemon_thread(model.prepare)
                except Exception as exc:
                    logger.opt(exception=exc).warning("model {}: preparing failed", model.name)
        finally:
            self._prepared.set()

    async def ready(self) -> None:
        """Wait (without blocking the loop) for `prepare` if it is under way. Otherwise the
        first request would import the SDK on the event loop's thread, waiting there for the
        import lock the preparing thread holds: every chat, and the signal handlers, stalled
        for the import (seconds on a loaded machine)."""
        if self._prepared is not None and not self._prepared.is_set():
            assert self._hurry is not None
            self._hurry.set()
            await self._prepared.wait()

    async def aclose(self) -> None:
        for model in self._models.values():
            try:
                await model.aclose()
            except Exception as exc:  # one client failing to close must not keep others open
                logger.opt(exception=exc).error("closing model {} failed", model.name)
