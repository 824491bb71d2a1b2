"""One log stream: what the provider SDKs, httpx/httpcore and our adapters log through the
standard `logging` module reaches the same loguru sink as chatfn's own lines, with the secret
mask, the JSON format, the chat and message ids of the turn, and the configured level."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

from aiohttp import web
from loguru import logger

from chatfn.runtime.logging import setup_logging
from chatfn.testing import TestBot
from tests.fakes.protocols import Turn, replies
from tests.fakes.raw_replay import RawReplayServer

SECRET = "sk-planted-secret-4711"


def refuse_stream_options(_received: Any) -> web.Response:
    """What an older OpenAI-compatible server answers to `stream_options`."""
    error = {"message": "Unrecognized request argument supplied: stream_options", "type": "x"}
    return web.json_response({"error": error}, status=400)


async def run_turn(tmp_path: Path, level: str) -> list[dict[str, Any]]:
    """One streamed turn against a server that refuses stream_options; the JSON log records."""
    async with RawReplayServer() as server:
        server.queue = [refuse_stream_options, *replies("openai", [Turn(text="hi")], stream=True)]
        model = {
            "provider": "openai",
            "model": "gpt-4o",
            # A gateway that takes its key in the path: httpx's lines carry the URL.
            "base_url": f"{server.url}/{SECRET}/v1",
            "api_key": SECRET,
            "streaming": True,
            "max_retries": 0,
        }
        config = {"models": {"main": model}, "logging": {"level": level, "format": "json"}}
        tb = TestBot(tmp_path, config=config, builtins=False)
        stream = io.StringIO()
        setup_logging(tb.settings, stream=stream)

        async def observe(_event: Any) -> None:
            pass

        try:
            assert await tb.send(f"my key is {SECRET}", on_stream=observe) == ["hi"]
        finally:
            logger.remove()
            await tb.aclose()
    text = stream.getvalue()
    assert SECRET not in text
    return [json.loads(line)["record"] for line in text.splitlines()]


async def test_sdk_and_httpx_lines_reach_the_json_log_masked(tmp_path: Path) -> None:
    records = await run_turn(tmp_path / "debug", "DEBUG")
    warning = [r for r in records if "server refused stream_options" in r["message"]]
    assert len(warning) == 1, [r["message"] for r in records]
    assert warning[0]["level"]["name"] == "WARNING"
    assert warning[0]["name"] == "providers.openai_compat"  # the caller, not logging/__init__
    assert warning[0]["extra"]["chat_id"] == "private:alice"
    assert warning[0]["extra"]["message_id"].startswith("m")
    # httpx's own lines (its request line; httpcore's connection lines too where the model's
    # http_transport is httpx), with the turn's ids.
    by_library = [r for r in records if r["extra"].get("logger_name", "").startswith("http")]
    assert by_library, "no httpx line"
    assert all(r["extra"]["chat_id"] == "private:alice" for r in by_library)
    # httpx's request line names the URL, the planted secret masked.
    assert any("/***/v1/chat/completions" in r["message"] for r in by_library)
    sdk = [r for r in records if r["extra"].get("logger_name", "").startswith("openai")]
    assert sdk and all(r["name"].startswith("openai") for r in sdk)


async def test_library_chatter_only_at_debug(tmp_path: Path) -> None:
    records = await run_turn(tmp_path / "info", "INFO")
    assert any("server refused stream_options" in r["message"] for r in records)
    libraries = [r for r in records if r["extra"].get("logger_name", "").startswith("http")]
    assert libraries == []  # neither httpcore's DEBUG nor httpx's per-request INFO
    assert logging.getLogger("httpx2").getEffectiveLevel() == logging.WARNING
