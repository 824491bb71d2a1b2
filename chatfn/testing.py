"""A test harness a plugin author can import: a real Bot on a temporary SQLite file with a
scripted (or any) model, and one call to send a message as anyone, anywhere.

    from chatfn.testing import TestBot, ScriptedModel, call, say

    async def test_my_plugin(tmp_path):
        tb = TestBot(tmp_path, model=ScriptedModel([call("weather", city="Oslo"), say("Sunny")]),
                     plugins=["plugins/weather.py"])
        replies = await tb.send("weather in Oslo?")
        assert "Oslo" in replies[0]

or with the `testbot` pytest fixture (registered for pytest when chatfn is installed), which
also starts the bot (start-up hooks run) and closes it after the test:

    async def test_my_plugin(testbot):
        tb = await testbot(plugins=["plugins/weather.py"], config={"weather": {"units": "metric"}})

The plugin also guards every test against database work on the event loop: a SQL statement
that runs on the thread of a running event loop (a plugin reading a table synchronously from an
`async def` function, instead of through `await plugin.database(ctx).run(...)`) fails the test,
with the statement and where it ran (chatfn/storage/loop_guard.py). A test opts out with
`@pytest.mark.allow_db_on_loop`, a whole suite with `chatfn_loop_guard = false` in its pytest
ini options.

And it refuses real model requests (providers/request_guard.py, pydantic-ai's
`ALLOW_MODEL_REQUESTS` idea): a model request to a host that is not loopback (a fake model
server on 127.0.0.1 is fine) raises ModelRequestRefused before anything is sent, and fails the
test even when the bot caught it. A test opts in with `@pytest.mark.allow_model_requests`, a
whole run with `chatfn_allow_model_requests = true` in the pytest ini options or
CHATFN_ALLOW_MODEL_REQUESTS=1 in the environment.

This module composes a whole bot, so it sits at the top layer with the `chatfn` command
(`function_calls.testing` forwards to it for tests written before it moved).
"""

from __future__ import annotations

import inspect
import itertools
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from chatfn.common.messages import IncomingMessage, OutgoingMessage, StreamObserver
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from chatfn.storage import schema_child
from chatfn.storage.loop_guard import LoopGuard
from function_calls.registry import Registry
from providers.base import ChatModel
from providers.request_guard import ModelRequestRefused, refusing_model_requests
from providers.scripted import ScriptedModel, call, say

__all__ = [
    "LoopGuard",
    "ModelRequestRefused",
    "ScriptedModel",
    "TestBot",
    "call",
    "say",
    "testbot",
]

_ids = itertools.count(1)


class TestBot:
    __test__ = False  # not a pytest test class

    def __init__(
        self,
        tmp_path: Path,
        *,
        model: ChatModel | None = None,
        config: dict[str, Any] | None = None,
        plugins: list[str] | None = None,
        registry: Registry | None = None,
        builtins: bool = True,
        clock: Callable[[], float] | None = None,
        models: dict[str, ChatModel] | None = None,
    ) -> None:
        """`model`: the default model; `models`: more models by name (a `chats:` rule's, a
        fallback or downgrade model), used instead of building the `models:` entry of that
        name (whose `price` and `fallback` still apply)."""
        data = dict(config or {})
        data.setdefault("storage", {"url": f"sqlite:///{tmp_path / 'test.db'}"})
        data.setdefault("plugins", {"paths": plugins or []})
        self.settings = parse_settings(data, base_dir=Path.cwd())
        extra: dict[str, Any] = {"clock": clock} if clock is not None else {}
        if models:
            extra["models"] = models
        self.bot = Bot(self.settings, registry=registry, model=model, builtins=builtins, **extra)

    async def send(
        self,
        text: str,
        *,
        sender: str = "alice",
        group: str | None = None,
        at_bot: bool = False,
        admin: bool | None = None,
        on_stream: StreamObserver | None = None,
        roles: list[str] | None = None,
    ) -> list[str]:
        """Send a message and return the texts the bot replied with. With `on_stream`, the bot
        streams as it does to the console or HTTP channel (when the model has `streaming`
        on), and the observer gets each event: text deltas, tool-call start/end. `roles`: the
        sender's platform roles in the group (`["admin"]`, `["owner"]`), as a channel reports
        them."""
        sent = await self.send_raw(
            text,
            sender=sender,
            group=group,
            at_bot=at_bot,
            admin=admin,
            on_stream=on_stream,
            roles=roles,
        )
        return [m.text for m in sent]

    async def send_raw(
        self,
        text: str,
        *,
        sender: str = "alice",
        group: str | None = None,
        at_bot: bool = False,
        admin: bool | None = None,
        on_stream: StreamObserver | None = None,
        roles: list[str] | None = None,
    ) -> list[OutgoingMessage]:
        msg = IncomingMessage(
            platform="test",
            chat_id=group or f"private:{sender}",
            sender_id=sender,
            sender_name=sender,
            text=text,
            is_group=group is not None,
            is_at_bot=at_bot,
            message_id=f"m{next(_ids)}",
            admin_override=admin,
            sender_roles=list(roles or []),
        )
        return await self.bot.handle(msg, self._collect, on_stream=on_stream)

    @staticmethod
    async def _collect(_out: OutgoingMessage) -> None:
        return None

    async def start(self) -> TestBot:
        """Start the bot's services (the reminder scheduler); `send` works without it."""
        await self.bot.start()
        return self

    async def aclose(self) -> None:
        await self.bot.aclose()


MakeTestBot = Callable[..., Awaitable[TestBot]]

try:
    import pytest
except ImportError:  # pragma: no cover - TestBot works without pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    def pytest_addoption(parser: Any) -> None:
        parser.addini(
            "chatfn_loop_guard",
            "fail a test in which a SQL statement runs on the event loop's thread",
            type="bool",
            default=True,
        )
        parser.addini(
            "chatfn_allow_model_requests",
            "let tests send model requests to hosts that are not loopback (real models); "
            "also CHATFN_ALLOW_MODEL_REQUESTS=1",
            type="bool",
            default=False,
        )

    def pytest_configure(config: Any) -> None:
        config.addinivalue_line(
            "markers",
            "allow_db_on_loop: this test may run SQL on the event loop's thread (chatfn's "
            "loop guard does not fail it)",
        )
        config.addinivalue_line(
            "markers",
            "allow_model_requests: this test may send real model requests (to a host that is "
            "not loopback); others have them refused",
        )
        # A bot built in a test migrates its fresh database in the test's process, not in a
        # child as a served bot does (chatfn/storage/schema_child.py): a child would cost each
        # test's bot ~1 s of CPU to spare memory a test process does not need spared.
        schema_child.in_process(True)

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makeitem(collector: Any, name: str, obj: Any) -> None:
        """An `async def` test asking for `testbot` runs on pytest-asyncio in any asyncio
        mode: in its default (strict) mode such a test would need `@pytest.mark.asyncio`,
        and a plugin author's first test would be skipped as "not natively supported". Only
        the mark is added here; collecting stays pytest's."""
        if not inspect.iscoroutinefunction(obj) or not collector.funcnamefilter(name):
            return
        try:
            wants = "testbot" in inspect.signature(obj).parameters
        except (TypeError, ValueError):
            return
        marks = getattr(obj, "pytestmark", [])
        if wants and not any(getattr(m, "name", "") == "asyncio" for m in marks):
            pytest.mark.asyncio(obj)

    #: Whether the test's own call failed: a refusal it raised is failure enough, no second
    #: one at teardown.
    _CALL_FAILED = pytest.StashKey[bool]()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(item: Any, call: Any) -> Any:
        report = yield
        if report.when == "call":
            item.stash[_CALL_FAILED] = report.failed
        return report

    def _model_requests_allowed(request: Any) -> bool:
        if request.node.get_closest_marker("allow_model_requests") is not None:
            return True
        if os.environ.get("CHATFN_ALLOW_MODEL_REQUESTS", "").lower() in ("1", "true", "yes"):
            return True
        return bool(request.config.getini("chatfn_allow_model_requests"))

    @pytest.fixture(autouse=True)
    def chatfn_model_request_guard(request: Any) -> Iterator[list[str]]:
        """Real model requests refused during the test unless it opts in; a refusal fails the
        test at teardown too, since the bot may have turned the exception into a reply. The
        value is the list of refusals so far (a test of the guard itself empties it)."""
        with refusing_model_requests(not _model_requests_allowed(request)) as refused:
            yield refused
        if refused and not request.node.stash.get(_CALL_FAILED, False):
            pytest.fail(
                f"{len(refused)} real model request(s) refused: {refused[0]}; a test that "
                "means to send them is marked @pytest.mark.allow_model_requests",
                pytrace=False,
            )

    @pytest.fixture(autouse=True)
    def chatfn_loop_guard(request: Any) -> Iterator[LoopGuard]:
        """Every test runs under a LoopGuard; a statement on a running loop's thread fails it
        at teardown, with the statement and its stack."""
        with LoopGuard() as guard:
            yield guard
        if not request.config.getini("chatfn_loop_guard"):
            return
        if request.node.get_closest_marker("allow_db_on_loop") is not None:
            return
        if guard.violations:
            shown = "\n\n".join(str(v) for v in guard.violations[:3])
            pytest.fail(
                f"{len(guard.violations)} SQL statement(s) ran on the event loop's thread "
                f"(run them through `await storage.run(...)`); the first:\n{shown}",
                pytrace=False,
            )


try:
    import pytest_asyncio

    _HAS_PYTEST_ASYNCIO = True
except ImportError:  # pragma: no cover - the fixture needs pytest-asyncio; TestBot does not
    _HAS_PYTEST_ASYNCIO = False

if _HAS_PYTEST_ASYNCIO:

    @pytest_asyncio.fixture
    async def testbot(tmp_path: Path) -> AsyncIterator[MakeTestBot]:
        """`await testbot(plugins=[...], model=..., config={...})`: a started TestBot, each on
        its own database under the test's tmp_path, closed when the test ends."""
        made: list[TestBot] = []

        async def make(**kwargs: Any) -> TestBot:
            folder = tmp_path / f"testbot{len(made)}"
            folder.mkdir()
            tb = TestBot(folder, **kwargs)
            made.append(tb)
            return await tb.start()

        yield make
        for tb in reversed(made):
            await tb.aclose()
