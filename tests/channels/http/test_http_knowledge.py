"""End to end through the HTTP channel: a question in a group with a knowledge base gets a
`knowledge_search` call and an answer citing the passage's source; a group without bases
never sees the function. The model is scripted, but what it cites is read from the real tool
result, so the citation is only right if the search found the right passage."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from aiohttp import ClientSession

from chatfn.channels.http.channel import HttpChannel
from chatfn.testing import TestBot
from function_calls.builtins.knowledge import KnowledgeService
from providers.scripted import ScriptedModel, call, say
from providers.types import LLMResponse, Message, ToolDefinition

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "knowledge"


def cite(messages: list[Message], tools: list[ToolDefinition]) -> LLMResponse:
    """A model that answers with the first passage's source, as the tool note asks."""
    result = messages[-1].content or ""
    first = re.search(r"^\[1\] source: (.+?) \(base ", result, re.M)
    return say(f"See [1] {first.group(1)}." if first else "Not found.")


async def ask(channel: HttpChannel, chat_id: str, text: str) -> dict[str, Any]:
    async with ClientSession() as http:
        resp = await http.post(
            f"http://127.0.0.1:{channel.bound_port}/v1/messages",
            json={
                "chat_id": chat_id,
                "sender_id": "alice",
                "text": text,
                "is_group": True,
                "at_bot": True,
            },
        )
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def test_a_question_gets_a_search_and_a_cited_answer_only_where_there_are_bases(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            call("knowledge_search", query="吾日三省吾身"),
            cite,
            call("knowledge_search", query="with statement __exit__ exception"),
            cite,
            say("I have no documents for that."),
        ]
    )
    config = {
        "knowledge": {
            "bases": {"classics": {"sources": [str(CORPUS)], "chunk_tokens": 300}},
            "watch_interval": 0,
        },
        "chats": [{"match": {"chat_id": "group:study"}, "knowledge": ["classics"]}],
    }
    tb = TestBot(tmp_path, model=model, config=config)
    await tb.start()
    channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
    await channel.start()
    try:
        service = tb.bot.service(KnowledgeService)
        assert service is not None
        await service.synced()
        zh = await ask(channel, "group:study", "曾子每天反省几次？")
        en = await ask(channel, "group:study", "When is __exit__ called?")
        other = await ask(channel, "group:elsewhere", "When is __exit__ called?")
    finally:
        await channel.stop()
        await tb.aclose()
    assert zh["replies"][0]["text"].endswith("lunyu.md § 论语 › 学而篇.")
    assert en["replies"][0]["text"].endswith('python_reference/with.md § The "with" statement.')
    assert other["replies"][0]["text"] == "I have no documents for that."
    offered = [[t.name for t in r.tools] for r in model.requests]
    assert all("knowledge_search" in o for o in offered[:4])
    assert "knowledge_search" not in offered[4]
    audit = [r.function for r in tb.bot.storage.tool_calls("group:study")]
    assert audit == ["knowledge_search", "knowledge_search"]
