"""The loop guard (chatfn/storage/loop_guard.py) and the pytest plugin that runs it for every test:
a statement that the bot's or a plugin's code runs on the event loop's thread fails the test;
the same statement through `Storage.run` does not."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from chatfn.storage.db import Storage
from chatfn.storage.loop_guard import LoopGuard

pytest_plugins = ["pytester"]

# Plugin-like code (not a test module): what the guard is there to catch.
PLUGIN = """
def read_history(storage):
    return storage.recent_messages("test", "c1", 20)
"""


@pytest.fixture
def plugin_module(tmp_path: Path) -> object:
    folder = tmp_path / "plugin_pkg"
    folder.mkdir()
    (folder / "history_reader.py").write_text(PLUGIN, encoding="utf-8")
    sys.path.insert(0, str(folder))
    try:
        import history_reader

        yield history_reader
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("history_reader", None)


@pytest.mark.allow_db_on_loop  # it does on purpose what the guard is there to catch
async def test_a_statement_on_the_loop_is_recorded_with_where_it_ran(
    tmp_path: Path, plugin_module: object
) -> None:
    storage = Storage(f"sqlite:///{tmp_path / 'g.db'}")
    storage.blocking(storage.create_tables)
    try:
        with LoopGuard() as guard:
            assert plugin_module.read_history(storage) == []  # type: ignore[attr-defined]
            assert len(guard.violations) == 1
            assert "FROM messages" in guard.violations[0].statement
            assert "history_reader.py" in guard.violations[0].stack
            # The same call through the one asynchronous interface: not on the loop.
            await storage.run(plugin_module.read_history, storage)  # type: ignore[attr-defined]
            assert len(guard.violations) == 1
            with guard.allowed():
                plugin_module.read_history(storage)  # type: ignore[attr-defined]
            assert len(guard.violations) == 1
    finally:
        storage.close()


def test_without_a_running_loop_nothing_is_recorded(tmp_path: Path, plugin_module: object) -> None:
    storage = Storage(f"sqlite:///{tmp_path / 'g.db'}")
    storage.create_tables()
    try:
        with LoopGuard() as guard:
            plugin_module.read_history(storage)  # type: ignore[attr-defined]
        assert guard.violations == []
    finally:
        storage.close()


@pytest.mark.allow_db_on_loop  # the inner run's statements run in this process
def test_the_pytest_plugin_fails_a_test_that_runs_sql_on_the_loop(
    pytester: pytest.Pytester, plugin_module: object
) -> None:
    """Every test of a suite with chatfn installed runs under the guard (the `chatfn` pytest
    plugin): a plugin's synchronous read from an `async def` fails it, naming the statement;
    the marker lets a test opt out."""
    folder = Path(plugin_module.__file__).parent  # type: ignore[attr-defined]
    pytester.makeconftest(f"import sys\nsys.path.insert(0, {str(folder)!r})\n")
    pytester.makepyfile(
        test_plugin=textwrap.dedent(
            """
            import pytest
            from history_reader import read_history
            from chatfn.storage.db import Storage

            def _storage(tmp_path):
                storage = Storage(f"sqlite:///{tmp_path / 'p.db'}")
                storage.blocking(storage.create_tables)
                return storage

            async def test_on_the_loop(tmp_path):
                storage = _storage(tmp_path)
                read_history(storage)
                storage.close()

            async def test_through_run(tmp_path):
                storage = _storage(tmp_path)
                await storage.run(read_history, storage)
                storage.close()

            @pytest.mark.allow_db_on_loop
            async def test_allowed(tmp_path):
                storage = _storage(tmp_path)
                read_history(storage)
                storage.close()
            """
        )
    )
    result = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
    )
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*1 SQL statement(s) ran on the event loop's thread*"])
    result.stdout.fnmatch_lines(["*history_reader.py*"])
