"""End-to-end fixtures: the real `python bot.py` as a subprocess, configured by a temporary
config.yaml that points its model at a local fake OpenAI-compatible server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from tests.kit import free_port  # noqa: F401 - the bot tests' ports for `python bot.py`

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable

NOTE_PLUGIN = """
from pydantic import BaseModel, Field
from function_calls.registry import tool_function
from function_calls.spec import FunctionResult


class NoteArgs(BaseModel):
    text: str = Field(min_length=1)


@tool_function(name="note_add", description="Save a note.")
def note_add(ctx, args: NoteArgs) -> FunctionResult:
    return FunctionResult(messages=[f"Noted: {args.text}"],
                          at=ctx.message.sender_id if ctx.is_group else None)


@tool_function(name="secret_reset", description="Reset everything.", admin_only=True)
def secret_reset(ctx) -> FunctionResult:
    return FunctionResult(messages=["reset done"])
"""


def write_config(tmp_path: Path, model_url: str | None, **sections: object) -> Path:
    plugins = tmp_path / "plugins"
    plugins.mkdir(exist_ok=True)
    (plugins / "notes.py").write_text(NOTE_PLUGIN)
    data: dict[str, object] = {
        "bot": {"admins": ["alice"]},
        "plugins": {"paths": ["plugins"]},
        "storage": {"url": "sqlite:///data/chatfn.db"},
        "logging": {"level": "DEBUG"},
    }
    if model_url:
        data["models"] = {
            "default": {
                "provider": "openai",
                "base_url": model_url,
                "api_key": "${TEST_SECRET_KEY}",
                "model": "gpt-4o-mini",
                "native_tools": True,
                "max_retries": 0,
            }
        }
    data.update(sections)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def bot_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    import os

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CHATFN_MODEL")
    }
    env["TEST_SECRET_KEY"] = "sk-e2e-very-secret-value"
    env["PYTHONUNBUFFERED"] = "1"
    return env
