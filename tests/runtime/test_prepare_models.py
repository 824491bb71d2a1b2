"""The model SDKs load in a thread after start (`ModelSet.prepare`); a message arriving while
they load waits for that thread without blocking the event loop. Before, the first request
imported the SDK on the loop's thread, which then waited for the import lock the preparing
thread held: every chat and the signal handlers stalled for the import (4 s seen under load,
which made `tests/bot/test_shutdown.py` miss its bound)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from chatfn.common.messages import IncomingMessage, OutgoingMessage
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from providers.scripted import ScriptedModel
from providers.types import LLMResponse, Message, Usage
from tests.kit import until


class SlowToPrepare(ScriptedModel):
    """A model whose SDK loads until the test lets it (`loaded`), in whichever thread loads it;
    at most 5 s, so a load on the loop's thread (the bug) fails the test instead of hanging."""

    def __init__(self) -> None:
        super().__init__([self._answer], repeat_last=True)
        self.prepared_in: list[str] = []
        self.answered_after_prepare: list[bool] = []
        self.loading = threading.Event()
        self.loaded = threading.Event()

    def prepare(self) -> None:
        self.loading.set()
        self.loaded.wait(5)  # the import's cost, in the preparing thread
        self.prepared_in.append(threading.current_thread().name)

    def _answer(self, _messages: list[Message], _tools: object) -> LLMResponse:
        self.answered_after_prepare.append(bool(self.prepared_in))
        return LLMResponse(content="hi", finish_reason="stop", usage=Usage(1, 1))


async def _take(_out: OutgoingMessage) -> None:
    return None


async def test_a_message_during_the_sdk_load_waits_for_it_off_the_loop(tmp_path: Path) -> None:
    settings = parse_settings(
        {"storage": {"url": f"sqlite:///{tmp_path / 'p.db'}"}, "plugins": {"paths": []}},
        base_dir=tmp_path,
    )
    model = SlowToPrepare()
    bot = Bot(settings, model=model, builtins=False, load_plugins=False)
    await bot.start()
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:  # the loop's other work: must keep running during the load
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    ticking = asyncio.create_task(ticker())
    try:
        preparing = asyncio.create_task(bot.prepare_models())
        await until(model.loading.is_set, 5, "the SDK load did not begin")
        msg = IncomingMessage(platform="test", chat_id="c", sender_id="u", text="hello")
        began = ticks
        handling = asyncio.create_task(bot.handle(msg, _take))
        # The loop runs on while the load holds the message back.
        await until(lambda: ticks - began >= 10, 4, "the loop stalled during the SDK load")
        assert not handling.done() and model.answered_after_prepare == []
        model.loaded.set()
        sent = await handling
        assert [o.text for o in sent] == ["hi"]
        assert model.prepared_in == ["prepare-models"]  # once, in the preparing thread
        assert model.answered_after_prepare == [True]  # the request waited for the load
        await preparing
    finally:
        stop.set()
        await ticking
        await bot.aclose()


def test_a_preparing_thread_that_outlives_its_loop_ends_quietly() -> None:
    """The bot stopped (its loop closed) while an SDK was still loading: the thread's report
    back must not raise 'Event loop is closed' into threading.excepthook."""
    from chatfn.runtime.model_set import _in_daemon_thread

    gate = threading.Event()
    errors: list[BaseException | None] = []
    old_hook = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)
    try:
        loop = asyncio.new_event_loop()
        waiting = loop.create_task(_in_daemon_thread(lambda: gate.wait(5)))
        loop.run_until_complete(asyncio.sleep(0.05))
        [thread] = [t for t in threading.enumerate() if t.name == "prepare-models"]
        waiting.cancel()
        loop.run_until_complete(asyncio.gather(waiting, return_exceptions=True))
        loop.close()
        gate.set()
        thread.join(5)
        assert not thread.is_alive()
    finally:
        threading.excepthook = old_hook
    assert errors == []
