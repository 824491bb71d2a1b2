"""`logging.format: json`: one JSON object per line with the chat and message ids as fields;
at DEBUG one line per model request and answer; at TRACE their bodies, secrets masked."""

from __future__ import annotations

import io
import json
from pathlib import Path

from loguru import logger

from chatfn.runtime.logging import setup_logging
from chatfn.testing import TestBot
from providers.scripted import ScriptedModel, say

SECRET = "sk-secret-value-123"


async def test_json_lines_with_ids_request_answer_and_masked_bodies(tmp_path: Path) -> None:
    config = {
        "logging": {"level": "TRACE", "format": "json"},
        "channels": {"http": {"token": SECRET}},
    }
    tb = TestBot(tmp_path, model=ScriptedModel([say("hello")]), config=config, builtins=False)
    stream = io.StringIO()
    setup_logging(tb.settings, stream=stream)
    try:
        await tb.send(f"my key is {SECRET}")
    finally:
        logger.remove()
        await tb.aclose()
    records = [json.loads(line)["record"] for line in stream.getvalue().splitlines()]
    requests = [r for r in records if r["message"].startswith("model request scripted")]
    answers = [r for r in records if r["message"].startswith("model answer scripted")]
    assert len(requests) == 1 and len(answers) == 1
    assert requests[0]["level"]["name"] == "DEBUG"
    assert "round 1: 2 messages, 0 tools" in requests[0]["message"]
    assert (
        "10 in / 5 out tokens" in answers[0]["message"] and "finish stop" in answers[0]["message"]
    )
    assert requests[0]["extra"]["chat_id"] == "private:alice"
    assert requests[0]["extra"]["message_id"].startswith("m")
    bodies = [r for r in records if r["level"]["name"] == "TRACE"]
    assert any("my key is ***" in r["message"] for r in bodies)
    assert SECRET not in stream.getvalue()


async def test_request_body_serialised_only_when_logged(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """At INFO the request body (every message through dataclasses.asdict and JSON) is not
    built at all: it only fed the DEBUG byte count and the TRACE body."""
    from function_calls import model_calls

    built: list[int] = []
    real = model_calls._body_text

    def counting(messages, tools):  # type: ignore[no-untyped-def]
        built.append(1)
        return real(messages, tools)

    monkeypatch.setattr(model_calls, "_body_text", counting)
    for level, expected in (("INFO", 0), ("DEBUG", 1)):
        built.clear()
        config = {"logging": {"level": level, "format": "json"}}
        tb = TestBot(
            tmp_path / level, model=ScriptedModel([say("hi")]), config=config, builtins=False
        )
        stream = io.StringIO()
        setup_logging(tb.settings, stream=stream)
        try:
            await tb.send("hello")
        finally:
            logger.remove()
            await tb.aclose()
        assert len(built) == expected, level
        if expected:
            assert " bytes" in stream.getvalue()
