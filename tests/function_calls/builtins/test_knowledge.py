"""knowledge: bases indexed from files, folders and URLs into the bot's SQLite file (FTS5,
BM25), re-indexed by content hash, searched by the model only in chats whose rule names a
base, and managed with /kb; every format (text, Markdown, HTML, PDF) and Chinese."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web
from sqlalchemy.engine import Engine

from chatfn.common.config import ConfigError
from chatfn.testing import TestBot
from function_calls import create_missing
from function_calls.builtins.knowledge import KnowledgeService, KnowledgeSettings, store
from function_calls.builtins.knowledge.store import documents
from providers.config import ModelConfig
from providers.scripted import ScriptedModel, call, say
from tests.channels.conftest import serve
from tests.fakes.pdf import pdf
from tests.function_calls.builtins.conftest import MakeBot
from tests.storage.create_at_once import create_at_once

GROUP = "group:kb"
OTHER = "group:other"
ADMIN = "root"


def kb_config(sources: list[str], **base: Any) -> dict[str, Any]:
    return {
        "bot": {"admins": [ADMIN]},
        "knowledge": {"bases": {"faq": {"sources": sources, **base}}, "watch_interval": 0},
        "chats": [{"match": {"chat_id": GROUP}, "knowledge": ["faq"]}],
    }


def write_docs(folder: Path) -> None:
    folder.mkdir(exist_ok=True)
    (folder / "faq.md").write_text(
        "# FAQ\n\n## Refunds\n\nA purchase can be returned within 30 days for a full refund.\n\n"
        "## Shipping\n\nParcels leave the warehouse every Tuesday and Friday.\n",
        encoding="utf-8",
    )
    (folder / "rules.html").write_text(
        "<html><head><title>Group rules</title><script>var spam = 1;</script></head><body>"
        "<nav>Home | About</nav><h1>Group rules</h1><h2>Spam</h2><p>Posting advertisements "
        "gets a warning, the second time a ban.</p></body></html>",
        encoding="utf-8",
    )
    (folder / "notes.txt").write_text("The office wifi password changes every month.\n")
    (folder / "manual.pdf").write_bytes(
        pdf([["Chapter 1 Setup", "Plug the kettle in first."], ["The warranty lasts two years."]])
    )
    (folder / "退款.md").write_text(
        "# 售后\n\n## 退款规则\n\n研究生命起源的书籍不退款。商品签收七天内可以申请退货。\n\n"
        "## 配送\n\n每周二和周五从仓库发货。\n",
        encoding="utf-8",
    )
    (folder / "image.png").write_bytes(b"\x89PNG not a document")


async def started(make_bot: MakeBot, config: dict[str, Any], model: Any = None) -> TestBot:
    tb, _ = await make_bot(config=config, model=model)
    service = tb.bot.service(KnowledgeService)
    assert service is not None
    await service.synced()
    return tb


def service_of(tb: TestBot) -> KnowledgeService:
    service = tb.bot.service(KnowledgeService)
    assert service is not None
    return service


async def search(tb: TestBot, query: str) -> list[str]:
    return [p.citation for p in await service_of(tb).search(query, ["faq"])]


async def test_every_format_is_indexed_with_headings_and_found(
    make_bot: MakeBot, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    write_docs(docs)
    tb = await started(make_bot, kb_config([str(docs)]))
    rows = await tb.bot.storage.run(documents, service_of(tb).db)
    names = sorted(Path(d.source).name for d in rows)
    assert names == ["faq.md", "manual.pdf", "notes.txt", "rules.html", "退款.md"]  # no .png
    faq = str(docs / "faq.md")
    assert (await search(tb, "how many days to return a purchase"))[0] == f"{faq} § FAQ › Refunds"
    assert (await search(tb, "when do parcels leave"))[0] == f"{faq} § FAQ › Shipping"
    # HTML: heading path, no script or navigation text in the passages
    assert (await search(tb, "advertisements"))[0] == f"{docs / 'rules.html'} § Group rules › Spam"
    assert await search(tb, "spam var") == [f"{docs / 'rules.html'} § Group rules › Spam"]
    assert await search(tb, "About Home") == []
    assert (await search(tb, "warranty"))[0] == f"{docs / 'manual.pdf'} § page 2"
    assert (await search(tb, "wifi password"))[0] == str(docs / "notes.txt")
    # porter stemming: "returned" is found by "returning"
    assert (await search(tb, "returning"))[0] == f"{faq} § FAQ › Refunds"


async def test_a_search_does_not_wait_behind_the_turns_storage_thread(
    make_bot: MakeBot, tmp_path: Path
) -> None:
    """Searches read beside the turns (`Storage.run_aside`): one chat's search neither waits
    behind the others' writes nor holds them up (4-6 ms of SQLite a search)."""

    docs = tmp_path / "docs"
    write_docs(docs)
    tb = await started(make_bot, kb_config([str(docs)]))
    storage, gate = tb.bot.storage, threading.Event()
    busy = asyncio.create_task(storage.run(gate.wait, 10))  # a long write on the turns' thread
    try:
        await asyncio.sleep(0.05)
        async with asyncio.timeout(5):
            found = await search(tb, "how many days to return a purchase")
        assert found[0] == f"{docs / 'faq.md'} § FAQ › Refunds" and not busy.done()
    finally:
        gate.set()
        await busy


async def test_chinese_two_character_words_are_found_wherever_they_stand(
    make_bot: MakeBot, tmp_path: Path
) -> None:
    """`生命` inside `研究生命起源` (a segmenter cuts it 研究生/命/起源) and `退货`, `发货`:
    two-character words, found by their bigram; one character by prefix."""
    docs = tmp_path / "docs"
    write_docs(docs)
    tb = await started(make_bot, kb_config([str(docs)]))
    refunds = f"{docs / '退款.md'} § 售后 › 退款规则"
    shipping = f"{docs / '退款.md'} § 售后 › 配送"
    assert await search(tb, "生命") == [refunds]
    assert await search(tb, "退货") == [refunds]
    assert (await search(tb, "什么时候发货？"))[0] == shipping
    assert (await search(tb, "发货"))[0] == shipping
    assert await search(tb, "仓") == [shipping]  # one character: a prefix of its bigrams
    assert await search(tb, "命起源") == [refunds]
    assert await search(tb, "火星") == []


async def test_changed_files_are_indexed_again_by_content_hash_and_removed_ones_leave(
    make_bot: MakeBot, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    write_docs(docs)
    tb = await started(make_bot, kb_config([str(docs)]))
    service = service_of(tb)
    assert await service.sync() == {"indexed": 0, "unchanged": 5, "removed": 0, "failed": 0}
    # a new mtime with the same bytes: hashed, not indexed again
    notes = docs / "notes.txt"
    os.utime(notes, (1_000_000, 1_000_000))
    assert (await service.sync())["indexed"] == 0
    notes.write_text("The office wifi password is printed on the fridge.\n")
    (docs / "rules.html").unlink()
    (docs / "new.md").write_text("# Parking\n\nVisitors park behind the bakery.\n")
    assert await service.sync() == {"indexed": 2, "unchanged": 3, "removed": 1, "failed": 0}
    assert await search(tb, "fridge") == [str(notes)]
    assert await search(tb, "month") == []  # the old text is gone from the index
    assert await search(tb, "advertisements") == []
    assert (await search(tb, "bakery"))[0] == f"{docs / 'new.md'} § Parking"
    # the base taken out of the config (a restart on the same database): its documents go
    await tb.aclose()
    config = kb_config([str(docs)])
    config["knowledge"]["bases"] = {"other": {"sources": []}}
    config["chats"] = []
    tb = await started(make_bot, config)
    assert await tb.bot.storage.run(documents, service_of(tb).db) == []


async def test_the_watcher_reindexes_a_changed_file_by_itself(
    make_bot: MakeBot, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("alpha beta\n")
    config = kb_config([str(docs)])
    config["knowledge"]["watch_interval"] = 0.05
    tb = await started(make_bot, config)
    (docs / "a.md").write_text("gamma delta\n")
    for _ in range(200):  # bounded: the watcher looks every 50 ms
        if await search(tb, "gamma"):
            break
        await asyncio.sleep(0.02)
    assert await search(tb, "gamma") == [str(docs / "a.md")]
    assert await search(tb, "alpha") == []


async def test_url_sources_are_fetched_at_start_and_on_reindex(
    make_bot: MakeBot, tmp_path: Path
) -> None:
    pages = {"/rules.html": "<h1>Rules</h1><p>No posting after midnight.</p>"}

    async def page(request: web.Request) -> web.Response:
        if request.path not in pages:
            return web.Response(status=404)
        return web.Response(text=pages[request.path], content_type="text/html")

    app = web.Application()
    app.router.add_get("/{name}", page)
    runner, port = await serve(app)
    try:
        url = f"http://127.0.0.1:{port}/rules.html"
        missing = f"http://127.0.0.1:{port}/gone.html"
        tb = await started(make_bot, kb_config([url, missing]))
        assert await search(tb, "midnight") == [f"{url} § Rules"]
        pages["/rules.html"] = "<h1>Rules</h1><p>No posting before noon.</p>"
        [reply] = await tb.send("/kb reindex", sender=ADMIN, group=GROUP)
        assert reply == "Re-indexed faq: 1 indexed, 0 unchanged, 0 removed, 1 failed."
        assert await search(tb, "noon") == [f"{url} § Rules"]
        assert await search(tb, "midnight") == []
    finally:
        await runner.cleanup()


async def test_kb_commands_for_people_and_admins(make_bot: MakeBot, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    write_docs(docs)
    tb = await started(make_bot, kb_config([str(docs / "faq.md")]))
    [found] = await tb.send("/kb search refund", sender="alice", group=GROUP)
    assert found.startswith('1 passages for "refund":\n\n[1] ')
    assert f"{docs / 'faq.md'} § FAQ › Refunds" in found and "30 days" in found
    for verb in ("list", "add some text", "remove 1", "reindex"):
        [no] = await tb.send(f"/kb {verb}", sender="alice", group=GROUP)
        assert no == f"Only the bot's admins may use /kb {verb.split()[0]}."
    [added] = await tb.send(
        "/kb add The coffee machine is cleaned on Mondays.", sender=ADMIN, group=GROUP
    )
    assert added.startswith('Added #2 "The coffee machine is cleaned on Mondays." to faq')
    [settings] = await tb.send("/settings", sender=ADMIN, group=GROUP)
    assert "• knowledge: faq (chats[0])" in settings
    [listed] = await tb.send("/kb list", sender=ADMIN, group=GROUP)
    assert listed.splitlines()[0] == "faq: 2 documents, 3 passages, keyword search (BM25)"
    assert f"#1 {docs / 'faq.md'} — FAQ (2)" in listed
    assert "— The coffee machine is cleaned on Mondays. (1), added by root" in listed
    assert (await search(tb, "coffee"))[0].startswith("added:")
    [refused] = await tb.send("/kb remove 1", sender=ADMIN, group=GROUP)
    assert refused == f"#1 ({docs / 'faq.md'}) comes from the config's sources; remove it there."
    [removed] = await tb.send("/kb remove #2", sender=ADMIN, group=GROUP)
    assert removed.startswith("Removed #2 (added:")
    assert await search(tb, "coffee") == []
    # an added text survives a sync (it is not a configured source)
    await tb.send("/kb add Tea is free on Fridays.", sender=ADMIN, group=GROUP)
    await service_of(tb).sync()
    assert (await search(tb, "tea"))[0].startswith("added:")
    # a chat without bases: no /kb for people
    [nope] = await tb.send("/kb search refund", sender="alice", group=OTHER)
    assert "no knowledge base" in nope.lower()


async def test_knowledge_search_is_offered_only_in_chats_with_bases(
    make_bot: MakeBot, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    write_docs(docs)
    model = ScriptedModel([say("hello"), say("hello")])
    tb = await started(make_bot, kb_config([str(docs)]), model)
    await tb.send("hi", group=GROUP, at_bot=True)
    await tb.send("hi", group=OTHER, at_bot=True)
    with_base, without = ([t.name for t in r.tools] for r in model.requests)
    assert "knowledge_search" in with_base and "kb" not in with_base
    assert "knowledge_search" not in without
    # and a model naming it where it was not offered is refused at execution
    model.steps = [call("knowledge_search", query="refund"), say("ok")]
    await tb.send("refund?", group=OTHER, at_bot=True)
    result = [m for m in model.requests[-1].messages if m.role == "tool"][-1].content
    assert "no knowledge base is set for this chat" in result


@pytest.mark.parametrize(
    ("config", "error"),
    [
        (
            {"knowledge": {"bases": {"faq": {}}}, "chats": [{"knowledge": ["fqa"]}]},
            "chats[0].knowledge: no base named 'fqa' under knowledge.bases (have: faq)",
        ),
        (
            {"knowledge": {"bases": {"faq": {"embedding_model": "embed"}}}},
            "knowledge.bases.faq.embedding_model: no model named 'embed' under models",
        ),
    ],
)
def test_bad_config_names_its_key(tmp_path: Path, config: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError) as info:
        TestBot(tmp_path, config=config)
    assert error in str(info.value)


def test_an_embedding_model_must_speak_openai(tmp_path: Path) -> None:
    """Checked on the `models:` entry itself (building a Bot with an Anthropic entry would
    import its SDK, seconds of a test for nothing the check reads)."""
    cfg = KnowledgeSettings(bases={"faq": {"embedding_model": "embed"}})
    entry = ModelConfig(provider="anthropic", model="x", api_key="k")
    host = SimpleNamespace(
        storage=None, settings=SimpleNamespace(models={"embed": entry}, base_dir=tmp_path)
    )
    with pytest.raises(ConfigError) as info:
        KnowledgeService(host, cfg, None)  # type: ignore[arg-type]
    assert str(info.value).startswith(
        "knowledge.bases.faq.embedding_model: the model 'embed' has provider anthropic; "
        "embeddings need an OpenAI-compatible server"
    )


def test_a_bad_base_name_names_its_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        TestBot(tmp_path, config={"knowledge": {"bases": {"My FAQ": {}}}})
    assert "knowledge.bases" in str(info.value) and "'My FAQ'" in str(info.value)


async def test_a_query_cannot_use_fts5_syntax(make_bot: MakeBot, tmp_path: Path) -> None:
    """What the user or the model writes is words: quotes, operators, column filters and
    prefixes of theirs are not FTS5 syntax (an unbalanced one would be an error)."""
    docs = tmp_path / "docs"
    write_docs(docs)
    tb = await started(make_bot, kb_config([str(docs)]))
    faq = str(docs / "faq.md")
    for hostile in ('refund" OR "', "refund NEAR(", "base:faq refund", "refund*", "^refund -x"):
        assert (await search(tb, hostile))[0] == f"{faq} § FAQ › Refunds", hostile
    assert await search(tb, '"" () * : ^') == []


def test_processes_creating_the_tables_at_once_never_trip_over_each_other(tmp_path: Path) -> None:
    """Four engines (four starting workers) create the knowledge schema on one new SQLite file
    at the same moment, without the retry of `Tables.ensure`: none sees "already exists". With
    create_all's look-then-create every round failed (each CREATE commits on its own)."""

    after = store.TABLES.after
    assert after is not None

    def create(engine: Engine) -> None:  # the schema step without `Tables.ensure`'s retry
        with engine.begin() as conn:
            create_missing(conn, store.metadata)
            after(conn)

    for round_ in range(5):
        assert create_at_once(f"sqlite:///{tmp_path / f'race{round_}.db'}", create) == []


async def test_two_processes_indexing_one_database_at_once(tmp_path: Path) -> None:
    """A cluster's workers all start their sync: each document ends up indexed once."""
    docs = tmp_path / "docs"
    write_docs(docs)
    config = kb_config([str(docs)])
    config["storage"] = {"url": f"sqlite:///{tmp_path / 'shared.db'}"}
    bots = [TestBot(tmp_path, config=config) for _ in range(2)]
    try:
        await asyncio.gather(*(tb.start() for tb in bots))
        await asyncio.gather(*(service_of(tb).synced() for tb in bots))
        await service_of(bots[0]).sync()  # whatever one of them lost, the next sync settles
        rows = await bots[0].bot.storage.run(documents, service_of(bots[0]).db)
        assert sorted(Path(d.source).name for d in rows) == [
            "faq.md", "manual.pdf", "notes.txt", "rules.html", "退款.md"
        ]  # fmt: skip
        for tb in bots:
            assert (await search(tb, "warranty"))[0] == f"{docs / 'manual.pdf'} § page 2"
            assert len(await search(tb, "warranty")) == 1
    finally:
        for tb in bots:
            await tb.aclose()
