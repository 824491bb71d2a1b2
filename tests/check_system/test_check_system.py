"""check_system.py: exit codes and what each failure says."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web

import check_system
from tests.fakes.cassette import ReplayServer, openai_chat_response

ROOT = Path(__file__).resolve().parents[2]


def _argv(tmp_path: Path, config: str | None, args: tuple[str, ...]) -> list[str]:
    argv = ["--json", *args]
    if config is not None:
        path = tmp_path / "config.yaml"
        path.write_text(config)
        argv += ["--config", str(path)]
    return argv


def _env(tmp_path: Path) -> dict[str, str]:
    """A user's bare shell: PATH, HOME (the test's folder) and the interpreter's own variables,
    so no API key or setting of the machine running the tests reaches the check."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    env.update({k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "VIRTUAL"))})
    return env


def cli(tmp_path: Path, config: str | None, *args: str) -> tuple[int, dict]:
    """`python check_system.py --json ...` in a process of its own, as users run it: its exit
    code and its stdout. Its ~4 s of interpreter start and imports are paid only where the
    process is what is tested; `run` is the same check in this process."""
    cmd = [sys.executable, str(ROOT / "check_system.py"), *_argv(tmp_path, config, args)]
    env = _env(tmp_path)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    return proc.returncode, json.loads(proc.stdout)


def run(tmp_path: Path, config: str | None, *args: str) -> tuple[int, dict]:
    """check_system.py's `main` in this process, with the cwd, HOME and environment `cli`'s
    process has, and its stdout read: the same report without a new interpreter."""
    argv = _argv(tmp_path, config, args)
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        env = _env(tmp_path)
        for key in [k for k in os.environ if k not in env]:
            mp.delenv(key)
        for key, value in env.items():
            mp.setenv(key, value)
        with contextlib.redirect_stdout(out):
            code = check_system.main(argv)
    return code, json.loads(out.getvalue())


def by_name(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


BASE = "storage: {url: 'sqlite:///db/x.db'}\nplugins: {paths: [plugins]}\n"


def test_no_model_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    (tmp_path / "plugins").mkdir()
    code, report = cli(tmp_path, BASE)  # exit 0 and the JSON, from the script users run
    checks = by_name(report)
    assert code == 0 and report["ok"]
    assert checks["model"]["status"] == "warn"
    assert checks["database"]["status"] == "ok" and (tmp_path / "db" / "x.db").exists()
    assert "help" in checks["function schemas"]["detail"]


def test_invalid_config_fails(tmp_path: Path) -> None:
    code, report = cli(tmp_path, "bot: {history_size: -1}\n")  # exit 1, from the script
    assert code == 1 and by_name(report)["config"]["status"] == "fail"
    assert "bot.history_size" in by_name(report)["config"]["detail"]


def test_broken_plugin_fails_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "oops.py").write_text("1/0\n")
    code, report = run(tmp_path, BASE)
    assert code == 1
    assert "oops.py" in by_name(report)["plugins"]["detail"]
    assert "ZeroDivisionError" in by_name(report)["plugins"]["detail"]


def test_unusable_database_fails(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where a directory should be")
    (tmp_path / "plugins").mkdir()
    code, report = run(tmp_path, "storage: {url: 'sqlite:///blocker/x.db'}\n")
    assert code == 1 and by_name(report)["database"]["status"] == "fail"


def test_missing_provider_extra_fails_with_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "plugins").mkdir()
    monkeypatch.setitem(sys.modules, "anthropic", None)  # its import fails, as if not installed
    cfg = BASE + "models:\n  claude: {provider: anthropic, model: c, api_key: k}\n"
    code, report = run(tmp_path, cfg)
    assert code == 1
    assert 'pip install ".[anthropic]"' in by_name(report)["router"]["detail"]


async def test_online_round_trip(tmp_path: Path) -> None:
    import asyncio

    (tmp_path / "plugins").mkdir()
    async with ReplayServer() as server:
        server.queue.extend(
            [
                lambda _r: web.json_response(
                    openai_chat_response(tool_calls=[{"name": "get_magic_number", "arguments": {}}])
                ),
                lambda _r: web.json_response(openai_chat_response("The magic number is 42.")),
            ]
        )
        cfg = BASE + (
            f"models:\n  local: {{provider: openai, model: m, api_key: k, "
            f"base_url: '{server.url}/v1'}}\n"
        )
        code, report = await asyncio.to_thread(run, tmp_path, cfg, "--online")
    assert code == 0, report
    online = by_name(report)["online local"]
    assert online["status"] == "ok" and "tool round trip" in online["detail"]
    tool_msg = server.received[1].body["messages"][-1]
    assert tool_msg["role"] == "tool" and tool_msg["content"] == "42"


async def test_online_server_that_ignores_tools_names_the_fix(tmp_path: Path) -> None:
    """llama-cpp-python's server accepts `tools` and answers in prose (no `tool_choice`): the
    warning says which setting makes the model's functions reach it."""
    import asyncio

    (tmp_path / "plugins").mkdir()
    async with ReplayServer() as server:
        server.queue.append(lambda _r: web.json_response(openai_chat_response("I think it is 7.")))
        cfg = BASE + (
            f"models:\n  local: {{provider: openai, model: m, api_key: k, "
            f"base_url: '{server.url}/v1'}}\n"
        )
        code, report = await asyncio.to_thread(run, tmp_path, cfg, "--online")
    online = by_name(report)["online local"]
    assert code == 0 and online["status"] == "warn"
    assert "set `native_tools: false` for local" in online["detail"]
    assert "tools" in server.received[0].body


def test_every_model_of_every_fallback_chain_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default's chain (and a chain's own chains), a chats: rule's model's chain: a
    fallback that cannot be built fails the check, naming the chain and the install command."""
    (tmp_path / "plugins").mkdir()
    monkeypatch.setitem(sys.modules, "anthropic", None)  # its import fails, as if not installed
    cfg = BASE + (
        "models:\n"
        "  main: {provider: openai, model: m, api_key: k, fallback: [backup]}\n"
        "  backup: {provider: openai, model: b, api_key: k, fallback: [claude]}\n"
        "  claude: {provider: anthropic, model: c, api_key: k}\n"
        "  cheap: {provider: openai, model: x, api_key: k, fallback: [spare]}\n"
        "  spare: {provider: openai, model: s, api_key: k}\n"
        "bot: {model: main}\n"
        "chats: [{match: {is_group: true}, model: cheap}]\n"
    )
    code, report = run(tmp_path, cfg)
    checks = by_name(report)
    assert code == 1
    assert checks["model backup"]["status"] == "ok"
    assert "fallback chain of main" in checks["model backup"]["detail"]
    claude = checks["model claude"]
    assert claude["status"] == "fail" and 'pip install ".[anthropic]"' in claude["detail"]
    assert "fallback chain of main" in claude["detail"]
    assert checks["model cheap"]["status"] == "ok"
    assert "fallback chain of cheap" in checks["model spare"]["detail"]


def test_a_fallback_naming_no_model_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "plugins").mkdir()
    cfg = BASE + "models:\n  main: {provider: openai, model: m, api_key: k, fallback: [gone]}\n"
    code, report = run(tmp_path, cfg)
    assert code == 1
    detail = by_name(report)["router"]["detail"]
    assert "models.main.fallback[0]: no model named 'gone'" in detail


def test_an_empty_or_missing_plugin_folder_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "plugins").mkdir()
    code, report = run(tmp_path, BASE)
    plugins = by_name(report)["plugins"]
    assert code == 0 and plugins["status"] == "warn"
    assert f"{tmp_path / 'plugins'} (0 plugin(s), 0 function(s))" in plugins["detail"]
    (tmp_path / "plugins").rmdir()  # the default folder may be missing; it is said so
    code, report = run(tmp_path, "storage: {url: 'sqlite:///db/x.db'}\n")
    plugins = by_name(report)["plugins"]
    assert code == 0 and plugins["status"] == "warn"
    assert f"{tmp_path / 'plugins'} (missing)" in plugins["detail"]
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "dice.py").write_text((ROOT / "plugins" / "example.py").read_text())
    code, report = run(tmp_path, BASE)
    assert by_name(report)["plugins"]["status"] == "ok"
    assert "(1 plugin(s), 1 function(s))" in by_name(report)["plugins"]["detail"]
