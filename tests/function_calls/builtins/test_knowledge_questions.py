"""knowledge: people ask questions, not keywords. A Chinese question (`青岚茶会在哪里举行`)
and an English one full of question words find the passage that answers it, in a small base
as in a large one, on SQLite (FTS5) and on PostgreSQL (tsvector)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from function_calls.builtins.knowledge import text
from providers.scripted import ScriptedModel, call, say
from tests.cluster.conftest import pg_url  # noqa: F401 (a fixture)
from tests.function_calls.builtins.conftest import MakeBot
from tests.function_calls.builtins.test_knowledge import GROUP, kb_config, search, started

TEA = "青岚茶会每年秋天在雾松镇举行，地点是镇东的松风广场，游客可以免费品尝本地的新茶。"
# Question words everywhere, the answer nowhere: what a query made of a question's every
# bigram (`在哪 哪里 里举 举行`) ranked first.
ASKING = (
    "常见问题：图书馆在哪里？活动在哪里举行？会在哪里集合？什么时候举行？怎么报名？在哪里可以问到？"
)
KETTLE = "The kettle in the staff kitchen is descaled every Monday by the cleaning team."
WHAT = "What is this page? Where is what, who is who, and how does it work? This is the FAQ."


@pytest.fixture(params=["sqlite", "postgresql"])
def storage(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "sqlite":
        return {}
    return {"storage": {"url": request.getfixturevalue("pg_url")}}


def write(folder: Path) -> None:
    folder.mkdir()
    (folder / "tea.md").write_text(f"# 茶会\n\n{TEA}\n", encoding="utf-8")
    (folder / "faq.md").write_text(f"# 问答\n\n{ASKING}\n", encoding="utf-8")
    (folder / "kitchen.md").write_text(f"# Kitchen\n\n{KETTLE}\n\n## About\n\n{WHAT}\n")


async def test_a_question_finds_the_passage_that_answers_it(
    make_bot: MakeBot, tmp_path: Path, storage: dict[str, Any]
) -> None:
    """Three files, four passages. On SQLite every word was "common" (held by a quarter of
    the passages): the common-word cut kept only the question's bigrams that occur nowhere
    (`会在 在哪`), or the question-word bigrams outranked the answer; on both databases the
    question words matched the FAQ of questions."""
    docs = tmp_path / "docs"
    write(docs)
    tb = await started(make_bot, {**kb_config([str(docs)]), **storage})
    tea = f"{docs / 'tea.md'} § 茶会"
    assert (await search(tb, "青岚茶会"))[0] == tea
    assert (await search(tb, "雾松镇"))[0] == tea
    assert (await search(tb, "青岚茶会在哪里举行"))[0] == tea
    assert (await search(tb, "请问青岚茶会是在什么地方举行的？"))[0] == tea
    assert (await search(tb, "茶会什么时候举行？"))[0] == tea
    # a question of nothing but question words still searches for them
    assert (await search(tb, "在哪里"))[0] == f"{docs / 'faq.md'} § 问答"
    kettle = f"{docs / 'kitchen.md'} § Kitchen"
    assert (await search(tb, "When is the kettle descaled, and who does it?"))[0] == kettle
    assert (await search(tb, "what is the day when they clean the kettle?"))[0] == kettle


async def test_a_base_of_one_passage_answers_the_question_in_the_chat_and_to_the_model(
    make_bot: MakeBot, tmp_path: Path
) -> None:
    """The issue's case: `/kb search 青岚茶会` found the passage, `/kb search
    青岚茶会在哪里举行` answered "Nothing in the knowledge base matches", and so did the
    model's `knowledge_search` with the user's question."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tea.md").write_text(f"# 茶会\n\n{TEA}\n", encoding="utf-8")
    model = ScriptedModel([call("knowledge_search", query="青岚茶会在哪里举行？"), say("松风广场")])
    tb = await started(make_bot, kb_config([str(docs)]), model)
    for query in ("青岚茶会", "青岚茶会在哪里举行"):
        [reply] = await tb.send(f"/kb search {query}", sender="alice", group=GROUP)
        assert reply.startswith(f'1 passages for "{query}"') and TEA in reply, reply
    await tb.send("青岚茶会在哪里举行？", group=GROUP, at_bot=True)
    result = [m for m in model.requests[-1].messages if m.role == "tool"][-1].content
    assert "松风广场" in result and "tea.md § 茶会" in result


def test_question_words_are_left_out_of_a_chinese_query() -> None:
    """What the query searches for (text.query_terms), with rjieba installed."""
    assert [t for t, _ in text.query_terms("青岚茶会在哪里举行？")] == [
        "青岚", "岚茶", "茶会", "举行"
    ]  # fmt: skip
    assert text.query_terms("借的书") == [("借", True), ("书", True)]
    assert text.query_terms("什么") == [("什么", False)]  # nothing else: kept
    assert [t for t, _ in text.query_terms("what is a lambda?")] == ["lambda"]
