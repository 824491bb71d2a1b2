"""knowledge: what a source may bring in is bounded. A URL is read to its end (a page sent in
two writes is not cut at the first), a link in a source folder is not followed out of it, and
a small PDF that draws megabytes of text is read up to `max_source_bytes`, in bounded time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from loguru import logger

from function_calls.builtins.knowledge import readers, store
from function_calls.builtins.knowledge.readers import read
from tests.channels.conftest import serve
from tests.fakes.pdf import pdf, shared_stream_pdf
from tests.function_calls.builtins.conftest import MakeBot
from tests.function_calls.builtins.test_knowledge import (
    ADMIN,
    GROUP,
    kb_config,
    search,
    service_of,
    started,
)


@pytest.fixture
def warnings() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lines.append, level="WARNING", format="{message}")
    yield lines
    logger.remove(sink)


async def test_a_url_sent_in_two_writes_is_read_to_its_end(
    make_bot: MakeBot, tmp_path: Path
) -> None:
    """57 KB in two writes with a pause between: `resp.content.read(n)` returned what had
    arrived, and the page was indexed as its first part."""
    first = "<h1>Rules</h1>" + "<p>Be kind to each other in this group.</p>" * 700
    second = "<p>Filler text here.</p>" * 1130 + "<h2>Closing</h2><p>The quokka is our mascot.</p>"

    async def page(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        await resp.prepare(request)
        await resp.write(first.encode())
        await asyncio.sleep(0.15)
        await resp.write(second.encode())
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/rules.html", page)
    runner, port = await serve(app)
    try:
        url = f"http://127.0.0.1:{port}/rules.html"
        assert 57_000 < len(first) + len(second) < 58_000
        tb = await started(make_bot, kb_config([url]))
        assert await search(tb, "quokka mascot") == [f"{url} § Rules › Closing"]
        [doc] = await service_of(tb).documents(["faq"])
        assert doc.size == len(first) + len(second)
    finally:
        await runner.cleanup()


async def test_a_url_added_from_a_chat_may_not_reach_an_internal_address(
    make_bot: MakeBot, tmp_path: Path
) -> None:
    """`/kb add <url>` is a fetch on a user's behalf (function_calls.fetch): the bot's own
    network is refused unless `bot.fetch` lets it through; a URL in the config is the
    operator's and is fetched from its own host (the test above)."""

    async def page(_r: web.Request) -> web.Response:
        return web.Response(
            text="<p>The admin password is swordfish.</p>", content_type="text/html"
        )

    app = web.Application()
    app.router.add_get("/secret.html", page)
    runner, port = await serve(app)
    try:
        url = f"http://127.0.0.1:{port}/secret.html"
        tb = await started(make_bot, kb_config([]))
        [reply] = await tb.send(f"/kb add {url}", sender=ADMIN, group=GROUP)
        assert reply.startswith(f"Could not add {url}: 127.0.0.1 is internal")
        assert await search(tb, "swordfish") == []
        allowed = kb_config([])
        allowed["bot"]["fetch"] = {"allow_networks": ["127.0.0.0/8"]}
        await tb.aclose()
        tb = await started(make_bot, allowed)
        [reply] = await tb.send(f"/kb add {url}", sender=ADMIN, group=GROUP)
        assert reply.startswith("Added #")
        assert len(await search(tb, "swordfish")) == 1
    finally:
        await runner.cleanup()


async def test_a_file_link_out_of_its_source_folder_is_skipped(
    make_bot: MakeBot, tmp_path: Path, warnings: list[str]
) -> None:
    """A link in a source folder to the bot's own config put its API key one `/kb search`
    away from every chat member. A link that stays inside the folder is read."""
    config = tmp_path / "config.yaml"
    config.write_text("models:\n  main:\n    api_key: sk-live-0123456789\n")
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "faq.md").write_text("# FAQ\n\nThe office opens at nine.\n")
    (docs / "sub" / "keys.md").symlink_to(config)
    (docs / "sub" / "again.md").symlink_to(docs / "faq.md")
    tb = await started(make_bot, kb_config([str(docs)]))
    rows = await tb.bot.storage.run(store.documents, service_of(tb).db)
    assert sorted(Path(d.source).name for d in rows) == ["again.md", "faq.md"]
    assert await search(tb, "api_key sk") == []
    [reply] = await tb.send("/kb search api_key", sender="alice", group=GROUP)
    assert "sk-live" not in reply
    [line] = [w for w in warnings if "keys.md" in w]
    assert f"outside the source folder {docs}" in line and str(config) in line


async def indexed_pdf(
    make_bot: MakeBot, tmp_path: Path, data: bytes, max_bytes: int
) -> tuple[list[tuple[str, str]], float]:
    """(heading, text) of the passages `data` is indexed into as a file source of a base
    with `max_source_bytes: max_bytes`, and the CPU seconds its indexing took."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "manual.pdf").write_bytes(data)
    config = kb_config([str(docs)])
    config["knowledge"]["max_source_bytes"] = max_bytes
    tb, _ = await make_bot(config=config)
    service = service_of(tb)
    await service.synced()
    began = time.process_time()
    assert (await service.sync(force=True))["indexed"] == 1
    took = time.process_time() - began
    [doc] = await service.documents(["faq"])
    rows = await tb.bot.storage.run(store.chunk_texts, service.db, doc.id)
    return [(h, t) for _, h, t in rows], took


async def test_a_pdf_drawing_megabytes_from_one_shared_stream_stops_at_the_limit(
    make_bot: MakeBot, tmp_path: Path
) -> None:
    """Both pages of a 20 KB PDF draw the same 5 MB content stream: it was indexed as 9.9 MB
    of text with `max_source_bytes: 1000000`, in over a minute of CPU. A page that would be
    interpreted past the limit is left out, quickly; so are a thousand of them."""
    bomb = shared_stream_pdf(pages=2, text_bytes=5_000_000, tail=[["The warranty is two years."]])
    assert len(bomb) < 20_000
    passages, took = await indexed_pdf(make_bot, tmp_path, bomb, 1_000_000)
    assert passages == [("page 3", "The warranty is two years.")]
    assert took < 3.0
    many = shared_stream_pdf(pages=1000, text_bytes=5_000_000)
    # This thread's CPU only: `read` runs here, while the bot made above may still be busy in
    # threads of its own (process_time counted those too: 4.5 s once in a loaded full run).
    began = time.thread_time()
    assert read(many, "pdf", 1_000_000) == []
    assert time.thread_time() - began < 2.0


async def test_a_pdf_is_read_up_to_max_source_bytes_and_no_further(
    make_bot: MakeBot, tmp_path: Path
) -> None:
    """Pages of 8 KB of text each, compressed into a file well under the limit: read in
    order until the text reaches the limit (the last page cut there), and no further."""
    data = shared_stream_pdf(pages=10, text_bytes=8_000)
    assert len(data) < 5_000
    passages, _ = await indexed_pdf(make_bot, tmp_path, data, 20_000)
    assert 19_000 < sum(len(t.encode()) for _, t in passages) <= 20_000
    assert sorted({h for h, _ in passages}) == ["page 1", "page 2", "page 3"]


async def test_the_pages_of_a_pdf_read_are_bounded(
    make_bot: MakeBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warnings: list[str]
) -> None:
    """At most `PDF_MAX_PAGES` (5000) pages; 3 here, so the test stays small."""
    monkeypatch.setattr(readers, "PDF_MAX_PAGES", 3, raising=False)
    data = pdf([[f"Page {n} of the manual."] for n in range(1, 11)])
    passages, _ = await indexed_pdf(make_bot, tmp_path, data, 100_000)
    assert [t for _, t in passages] == [f"Page {n} of the manual." for n in (1, 2, 3)]
    line = f"knowledge: {tmp_path}/docs/manual.pdf: pages from 4 on left out: more than 3 pages\n"
    assert line in warnings


async def test_pages_over_the_content_left_are_left_out_and_the_rest_read(
    make_bot: MakeBot, tmp_path: Path, warnings: list[str]
) -> None:
    """Three pages drawing one 200 KB stream ahead of an ordinary one, 20 KB allowed: the
    three are left out (a log line says so), the page after them is still read."""
    bomb = shared_stream_pdf(pages=3, text_bytes=200_000, tail=[["The warranty lasts two years."]])
    passages, _ = await indexed_pdf(make_bot, tmp_path, bomb, 20_000)
    assert passages == [("page 4", "The warranty lasts two years.")]
    start = f"knowledge: {tmp_path}/docs/manual.pdf: 3 pages left out: each draws more content"
    assert any(w.startswith(start) for w in warnings)
