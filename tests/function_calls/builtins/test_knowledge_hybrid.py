"""Hybrid search: BM25 and vectors from a local OpenAI-compatible `/v1/embeddings` server
(the real `openai` SDK talking to tests/fakes/embeddings.py), fused by reciprocal rank; the
vector backends (sqlite-vec, a plain table, PostgreSQL without pgvector) chosen by config and
database alone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chatfn.common.config import ConfigError
from chatfn.storage.db import Storage
from chatfn.testing import TestBot
from function_calls import PluginDatabase
from function_calls.builtins.knowledge import KnowledgeService
from function_calls.builtins.knowledge.service import rrf
from function_calls.builtins.knowledge.store import tables
from function_calls.builtins.knowledge.vectors import TableVectors, kb_vectors, pack, unpack
from tests.cluster.conftest import pg_url  # noqa: F401 (the fixture)
from tests.fakes.embeddings import EmbeddingServer
from tests.function_calls.builtins.conftest import MakeBot

DOCS = {
    "refunds.md": "# Returns\n\nYou get your money back within 30 days of purchase.\n",
    "shipping.md": "# Shipping\n\nParcels leave the warehouse on Tuesdays.\n",
    "holidays.md": "# Leave\n\nEvery employee has 25 vacation days a year.\n",
    "policy.md": "# Policy\n\nThe refund policy of the shop is on the last page of the manual.\n",
}


@pytest.fixture
async def embeddings() -> AsyncIterator[EmbeddingServer]:
    server = await EmbeddingServer().start()
    yield server
    await server.stop()


def hybrid_config(docs: Path, server: EmbeddingServer, **knowledge: Any) -> dict[str, Any]:
    for name, body in DOCS.items():
        (docs / name).write_text(body)
    return {
        "bot": {"model": "chat"},
        "models": {
            "chat": {"model": "c", "api_key": "k", "base_url": server.url},
            "embed": {
                "model": "tiny-embed",
                "api_key": "k",
                "base_url": server.url,
                "max_retries": 0,
            },
        },
        "knowledge": {
            "bases": {"faq": {"sources": [str(docs)], "embedding_model": "embed"}},
            "watch_interval": 0,
            **knowledge,
        },
        "chats": [{"match": {"chat_id": "group:kb"}, "knowledge": ["faq"]}],
    }


async def started(make_bot: MakeBot, config: dict[str, Any]) -> KnowledgeService:
    tb, _ = await make_bot(config=config)
    service = tb.bot.service(KnowledgeService)
    assert service is not None
    await service.synced()
    return service


def test_rrf_adds_reciprocal_ranks() -> None:
    fused = rrf([[1, 2, 3], [3, 1]], k=60)
    assert [i for i, _ in fused] == [1, 3, 2]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)


@pytest.mark.parametrize("backend", ["sqlite-vec", "table"])
async def test_hybrid_finds_what_keywords_miss_and_keeps_what_they_find(
    make_bot: MakeBot, tmp_path: Path, embeddings: EmbeddingServer, backend: str
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    service = await started(make_bot, hybrid_config(docs, embeddings, vector_backend=backend))
    assert service.vectors is not None and service.vectors.name == backend
    assert embeddings.texts_embedded == 4  # one passage per file, one request per file
    # "refund" is not a word of refunds.md: BM25 alone finds only policy.md
    keyword = [p.source for p in await service.search("refund", ["faq"])]
    found = [Path(p.source).name for p in await service.search("refund", ["faq"])]
    assert found[:2] == ["policy.md", "refunds.md"] or found[:2] == ["refunds.md", "policy.md"]
    assert "refunds.md" in found and len(keyword) >= 2
    hits = await service.search("holiday", ["faq"])
    assert Path(hits[0].source).name == "holidays.md"  # by meaning only
    assert hits[0].score == pytest.approx(1 / 61)  # its fused score: first of one list
    # a keyword match stays first when the vectors agree
    assert Path((await service.search("warehouse parcels", ["faq"]))[0].source).name == (
        "shipping.md"
    )


async def test_embeddings_down_falls_back_to_keywords_then_catches_up(
    make_bot: MakeBot, tmp_path: Path, embeddings: EmbeddingServer
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    embeddings.fail = True
    service = await started(make_bot, hybrid_config(docs, embeddings, vector_backend="table"))
    # indexed without vectors: keyword search has every passage at once
    assert [Path(p.source).name for p in await service.search("warehouse", ["faq"])] == [
        "shipping.md"
    ]
    assert [Path(p.source).name for p in await service.search("holiday", ["faq"])] == []
    embeddings.fail = False
    assert (await service.sync())["indexed"] == 4  # the next sync embeds them
    assert Path((await service.search("holiday", ["faq"]))[0].source).name == "holidays.md"
    embeddings.fail = True  # the query cannot be embedded: BM25 alone, no error
    assert [Path(p.source).name for p in await service.search("warehouse", ["faq"])] == [
        "shipping.md"
    ]


async def test_a_new_embedding_model_embeds_every_passage_again(
    make_bot: MakeBot, tmp_path: Path, embeddings: EmbeddingServer
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    config = hybrid_config(docs, embeddings, vector_backend="table")
    await started(make_bot, config)
    assert embeddings.texts_embedded == 4
    config["models"]["embed"]["model"] = "tiny-embed-v2"
    service = await started(make_bot, config)  # the same database file: a restart
    assert embeddings.texts_embedded == 8
    assert embeddings.requests[-1]["model"] == "tiny-embed-v2"
    assert Path((await service.search("holiday", ["faq"]))[0].source).name == "holidays.md"


def test_the_table_backend_round_trips_float32_vectors(tmp_path: Path) -> None:
    assert unpack(pack([0.5, -1.25, 3.0])) == [0.5, -1.25, 3.0]
    storage = Storage(f"sqlite:///{tmp_path / 'v.db'}")
    try:
        declared = tables([kb_vectors])
        declared.ensure(storage.engine, "knowledge")
        table = TableVectors(PluginDatabase(storage, "knowledge", declared))
        table.ensure("faq", 3)
        table.add("faq", [(1, [1.0, 0.0, 0.0]), (2, [0.0, 1.0, 0.0]), (3, [1.0, 1.0, 0.0])])
        hits = table.nearest("faq", [1.0, 0.1, 0.0], 2)
        assert [i for i, _ in hits] == [1, 3]
        table.remove("faq", [1])
        assert [i for i, _ in table.nearest("faq", [1.0, 0.1, 0.0], 2)] == [3, 2]  # cache renewed
    finally:
        storage.close()


def test_an_explicit_backend_that_cannot_work_names_the_key(
    tmp_path: Path, embeddings: EmbeddingServer
) -> None:
    from function_calls.builtins.knowledge.vectors import choose

    storage = Storage("sqlite://")
    try:
        db = PluginDatabase(storage, "knowledge", tables())
        with pytest.raises(
            ConfigError, match="knowledge.vector_backend: sqlite-vec cannot be loaded"
        ):
            choose(db, "sqlite-vec")
        with pytest.raises(
            ConfigError, match="knowledge.vector_backend: pgvector does not work on"
        ):
            choose(db, "pgvector")
        assert choose(db, "auto").name == "table"  # in memory: no second connection
    finally:
        storage.close()


@pytest.mark.services
async def test_postgresql_keyword_search_and_the_pgvector_fallback(
    tmp_path: Path,
    embeddings: EmbeddingServer,
    pg_url: str,  # noqa: F811
) -> None:
    """The same config on PostgreSQL: tsvector keyword search, and vectors in pgvector where
    `CREATE EXTENSION vector` works, else in the table (this machine's PostgreSQL 15 has no
    pgvector package: the fallback is what runs here)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    config = hybrid_config(docs, embeddings)
    config["storage"] = {"url": pg_url}
    (docs / "退款.md").write_text("# 售后\n\n研究生命起源的书籍不退款。\n")
    tb = TestBot(tmp_path, config=config)
    try:
        await tb.start()
        service = tb.bot.service(KnowledgeService)
        assert service is not None
        await service.synced()
        assert service.vectors is not None and service.vectors.name in ("pgvector", "table")
        hits = await service.search("parcels warehouse", ["faq"])
        assert Path(hits[0].source).name == "shipping.md"
        assert Path((await service.search("holiday", ["faq"]))[0].source).name == "holidays.md"
        assert Path((await service.search("生命", ["faq"]))[0].source).name == "退款.md"
        [reply] = await tb.send("/kb search returning parcels", group="group:kb")
        assert "shipping.md § Shipping" in reply
    finally:
        await tb.aclose()
