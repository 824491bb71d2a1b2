"""A conversation piped through `python bot.py` (the console channel)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from aiohttp import web

from tests.bot.conftest import PYTHON, ROOT, write_config
from tests.fakes.cassette import ReplayServer, openai_chat_response


async def run_console(
    cfg: Path | None,
    lines: list[str],
    cwd: Path,
    env: dict[str, str],
) -> subprocess.CompletedProcess[str]:
    import asyncio

    args = [PYTHON, str(ROOT / "bot.py")] + (["--config", str(cfg)] if cfg else [])

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args,
            input="\n".join(lines) + "\n",
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            timeout=60,
        )

    return await asyncio.to_thread(run)


async def test_piped_conversation_with_model(tmp_path: Path, bot_env: dict[str, str]) -> None:
    async with ReplayServer() as model:
        model.queue.extend(
            [
                lambda _r: web.json_response(openai_chat_response("Hello Alice!")),
                lambda _r: web.json_response(
                    openai_chat_response(
                        tool_calls=[{"name": "note_add", "arguments": {"text": "team lunch"}}]
                    )
                ),
            ]
        )
        cfg = write_config(tmp_path, f"{model.url}/v1", channels={"console": {"user": "alice"}})
        proc = await run_console(
            cfg,
            [
                "hello",
                ":group team1",
                "nobody mentioned the bot here",
                "@bot note team lunch",
                ":as bob",
                "/secret_reset",
                ":admin on",
                "/secret_reset",
            ],
            tmp_path,
            bot_env,
        )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out == [
        "chatfn> Hello Alice!",
        "-- you are alice (admin) in group team1",
        "chatfn> [group:team1] @alice Noted: team lunch",
        "-- you are bob in group team1",
        "chatfn> [group:team1] @bob secret_reset is for admins only.",
        "-- you are bob (admin) in group team1",
        "chatfn> [group:team1] @bob reset done",
    ]
    assert len(model.received) == 2
    # The unaddressed group line was stored and shown to the model as context: the newest
    # message's background block (ambient context), with its speaker, not a history turn.
    contents = [m["content"] for m in model.received[1].body["messages"]]
    newest = contents[-1]
    assert "<background>" in newest and "alice: nobody mentioned the bot here" in newest
    assert newest.endswith("alice: note team lunch")
    assert not any("nobody mentioned" in c for c in contents[:-1])


async def test_no_config_no_model_still_runs(tmp_path: Path, bot_env: dict[str, str]) -> None:
    cfg = write_config(tmp_path, None)
    proc = await run_console(cfg, ["/help", "what's up?"], tmp_path, bot_env)
    assert proc.returncode == 0, proc.stderr
    assert "/note_add" in proc.stdout and "No model is configured" in proc.stdout


async def test_bad_config_fails_at_start_naming_the_key(
    tmp_path: Path, bot_env: dict[str, str]
) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("models:\n  default:\n    model: x\n    timeout: soon\nbot:\n  admns: []\n")
    proc = await run_console(cfg, [], tmp_path, bot_env)
    assert proc.returncode == 2
    assert "models.default.timeout" in proc.stderr and "bot.admns: unknown key" in proc.stderr


async def test_paths_follow_the_working_directory_without_a_config(
    tmp_path: Path, bot_env: dict[str, str]
) -> None:
    """No config file: the database and plugins/ are the current directory's, wherever bot.py
    itself lives (an installed bot must never write beside its package)."""
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "hello.py").write_text(
        "from function_calls import FunctionResult, tool_function\n\n\n"
        "@tool_function(description='Say hello.')\n"
        "def hello(ctx) -> FunctionResult:\n"
        "    return FunctionResult(messages=['hello from the local plugin'])\n"
    )
    proc = await run_console(None, ["/hello"], tmp_path, bot_env)
    assert proc.returncode == 0, proc.stderr
    assert "hello from the local plugin" in proc.stdout
    assert (tmp_path / "data" / "chatfn.db").exists()


async def test_paths_follow_the_config_file(tmp_path: Path, bot_env: dict[str, str]) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "plugins").mkdir(parents=True)
    elsewhere.mkdir()
    (project / "plugins" / "hello.py").write_text(
        "from function_calls import FunctionResult, tool_function\n\n\n"
        "@tool_function(description='Say hello.')\n"
        "def hello(ctx) -> FunctionResult:\n"
        "    return FunctionResult(messages=['hello from the project plugin'])\n"
    )
    cfg = project / "config.yaml"
    cfg.write_text("storage: {url: 'sqlite:///state/bot.db'}\n")
    proc = await run_console(cfg, ["/hello"], elsewhere, bot_env)
    assert proc.returncode == 0, proc.stderr
    assert "hello from the project plugin" in proc.stdout
    assert (project / "state" / "bot.db").exists() and not (elsewhere / "state").exists()
