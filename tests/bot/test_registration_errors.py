"""Declaration mistakes stop `python bot.py` at start with one line naming the place, never a
traceback; a slash command with a mistyped key names the key and the one it resembles."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from chatfn.testing import TestBot
from tests.bot.conftest import PYTHON, ROOT

ARGS_ONLY = """
from pydantic import BaseModel
from function_calls import FunctionResult, tool_function


class Args(BaseModel):
    city: str


@tool_function(description="Weather for a city.")
def weather(args: Args) -> FunctionResult:
    return FunctionResult(messages=[args.city])
"""

DUPLICATE = """
from function_calls import FunctionResult, MessageContext, tool_function


@tool_function(name="roll_dice", description="Another dice roller.")
def my_dice(ctx: MessageContext) -> FunctionResult:
    return FunctionResult(messages=["4"])
"""


def start(tmp_path: Path, plugin: str) -> subprocess.CompletedProcess[str]:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "mine.py").write_text(plugin)
    (folder / "dice.py").write_text((ROOT / "plugins" / "example.py").read_text())
    config = {"plugins": {"paths": ["plugins"]}, "storage": {"url": "sqlite:///bot.db"}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CHATFN_"))}
    return subprocess.run(
        [PYTHON, str(ROOT / "bot.py"), "--config", str(tmp_path / "config.yaml")],
        input="/help\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )


def test_a_handler_without_ctx_fails_at_start_in_one_line(tmp_path: Path) -> None:
    proc = start(tmp_path, ARGS_ONLY)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert f"function 'weather' ({tmp_path / 'plugins' / 'mine.py'}:10)" in line
    assert "only parameter is the args model `args: Args`" in line
    assert "(ctx: MessageContext, args: Args)" in line


def test_a_duplicate_name_names_both_places_in_one_line(tmp_path: Path) -> None:
    proc = start(tmp_path, DUPLICATE)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "duplicate function name 'roll_dice'" in line
    assert f"{tmp_path / 'plugins' / 'dice.py'}:19" in line
    assert f"{tmp_path / 'plugins' / 'mine.py'}:5" in line


async def test_an_unknown_command_key_is_named_with_the_close_one(tmp_path: Path) -> None:
    tb = TestBot(tmp_path, plugins=[str(ROOT / "plugins" / "example.py")])
    try:
        (reply,) = await tb.send("/roll_dice cont=3")
        assert reply.startswith("/roll_dice has no argument cont (did you mean count?).")
        assert "Usage: /roll_dice [count=…] [sides=…]" in reply
        (reply,) = await tb.send("/roll_dice colour=red")
        assert reply.startswith("/roll_dice has no argument colour.")
    finally:
        await tb.aclose()
