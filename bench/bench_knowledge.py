"""The knowledge built-in's figures (bench/README.md, "Knowledge bases"):

    python bench/bench_knowledge.py recall [--alone] [--embeddings-url http://127.0.0.1:8089/v1]
        [--storage-url postgresql+psycopg://postgres@127.0.0.1:5432/kb_bench]
    python bench/bench_knowledge.py index [--mb 10]      # index time, database size, latency

`recall`: recall@5 over bench/knowledge_questions.json (a hit: a passage of the right file
holding the answer's phrase among the first 5), BM25 alone and, with an embeddings server
(bench/embeddings_server.py serves all-MiniLM-L6-v2), hybrid; per language: en (the Python
reference), zh (modern Chinese questions over a modern Chinese handbook), lzh (modern
paraphrases of the classical Analects). On SQLite (FTS5) by default; `--storage-url` a new
PostgreSQL database for its full-text path (its tables are made, not dropped). `--alone`:
also each question asked of a bot whose only base is its own file (zh: its own section of
wusong.md), a new SQLite database each: what a bot with one small FAQ sees.

`index`: `--mb` megabytes of text (the test corpus, copied as often as it takes, each copy its
own files) indexed into a new SQLite database by a started bot (the embedded default: FTS5,
no model); the time to the end of the first sync, the database's size; then search latency
(`KnowledgeService.search` through the storage thread, the 50 questions x 10) and what
searching adds to a turn: a scripted turn that calls `knowledge_search` against the same turn
calling a function that does nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chatfn.testing import TestBot  # noqa: E402
from function_calls.builtins.knowledge import KnowledgeService  # noqa: E402
from function_calls.builtins.knowledge.store import keyword_search  # noqa: E402
from providers.scripted import ScriptedModel, call, say  # noqa: E402

CORPUS = ROOT / "tests" / "fixtures" / "knowledge"
QUESTIONS = json.loads((ROOT / "bench" / "knowledge_questions.json").read_text())["questions"]
NOOP_PLUGIN = """
from function_calls import FunctionResult, MessageContext, tool_function

@tool_function(name="noop", description="Does nothing.")
async def noop(ctx: MessageContext) -> FunctionResult:
    return FunctionResult(llm_content="nothing")
"""


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def started(folder: Path, config: dict[str, Any], **kwargs: Any) -> TestBot:
    tb = TestBot(folder, config=config, **kwargs)
    await tb.start()
    service = tb.bot.service(KnowledgeService)
    assert service is not None
    await service.synced()
    return tb


def is_hit(passage: Any, question: dict[str, str]) -> bool:
    return passage.source.endswith(question["file"]) and question["phrase"] in passage.text


async def recall(embeddings_url: str | None, storage_url: str | None = None) -> None:
    bases: dict[str, Any] = {"bm25": {"sources": [str(CORPUS)]}}
    config: dict[str, Any] = {"knowledge": {"bases": bases, "watch_interval": 0}}
    if storage_url:  # PostgreSQL's full-text path (tsvector, ts_rank_cd) instead of FTS5
        config["storage"] = {"url": storage_url}
    if embeddings_url:
        bases["hybrid"] = {"sources": [str(CORPUS)], "embedding_model": "embed"}
        config["models"] = {
            "embed": {"model": "all-MiniLM-L6-v2", "base_url": embeddings_url, "api_key": "x"}
        }
        config["bot"] = {"model": "none"}
        config["models"]["none"] = {"model": "none", "api_key": "x"}
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        tb = await started(Path(tmp), config)
        print(f"indexed in {time.perf_counter() - began:.1f} s")
        service = tb.bot.service(KnowledgeService)
        assert service is not None
        print(f"vectors: {service.vectors.name if service.vectors else '-'}")
        for base in bases:
            for lang in ("en", "zh", "lzh", "all"):
                qs = [q for q in QUESTIONS if lang in ("all", q["lang"])]
                hits = first = 0
                for q in qs:
                    found = await service.search(q["q"], [base], 5)
                    hit = any(is_hit(p, q) for p in found)
                    hits += hit
                    first += bool(found) and is_hit(found[0], q)
                    if not hit and lang != "all":
                        print(f"  miss [{base}] {q['q']}")
                print(
                    f"{base} {lang}: recall@5 {hits}/{len(qs)} = {hits / len(qs):.2f} "
                    f"(first: {first}/{len(qs)})"
                )
        await tb.aclose()


async def recall_alone() -> None:
    """Each question asked of a bot whose only base is the question's own file, as a bot
    with one small FAQ is (zh: only the section of wusong.md that answers it, 1-2 passages);
    on SQLite, a new database each."""
    sections = re.split(r"\n(?=## )", (CORPUS / "wusong.md").read_text(encoding="utf-8"))
    results: dict[str, list[int]] = {}
    for q in QUESTIONS:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            source = CORPUS / q["file"]
            if q["file"] == "wusong.md":
                source = folder / "section.md"
                source.write_text(next(s for s in sections if q["phrase"] in s), encoding="utf-8")
                q = {**q, "file": source.name}
            config = {"knowledge": {"bases": {"faq": {"sources": [str(source)]}}}}
            config["knowledge"]["watch_interval"] = 0
            tb = await started(folder, config)
            service = tb.bot.service(KnowledgeService)
            assert service is not None
            found = await service.search(q["q"], ["faq"], 5)
            hit = any(is_hit(p, q) for p in found)
            counts = results.setdefault(q["lang"], [0, 0])
            counts[0] += hit
            counts[1] += 1
            if not hit:
                print(f"  miss [alone] {q['q']} ({len(found)} found)")
            await tb.aclose()
    for lang, (hits, n) in results.items():
        print(f"alone {lang}: recall@5 {hits}/{n} = {hits / n:.2f}")


def make_corpus(folder: Path, megabytes: float) -> int:
    files = sorted(p for p in CORPUS.rglob("*.md") if p.name != "LICENSE.md")
    size = sum(p.stat().st_size for p in files)
    copies = max(1, round(megabytes * 1_000_000 / size))
    for i in range(copies):
        for p in files:
            dest = folder / f"copy{i:03d}" / p.relative_to(CORPUS)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dest)
    return copies * size


def cpu_ms(db: Any, query: str) -> float:
    """The CPU time of one keyword search on this thread: what the search costs, whatever
    else the machine is running (the wall-clock figures include waiting for a core). `db`:
    the plugin's database view, as the service searches through it."""
    began = time.thread_time()
    keyword_search(db, query, ["big"], 20)
    return (time.thread_time() - began) * 1000


async def index(megabytes: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        docs = root / "docs"
        total = make_corpus(docs, megabytes)
        plugin = root / "noop.py"
        plugin.write_text(NOOP_PLUGIN)
        config = {
            "knowledge": {"bases": {"big": {"sources": [str(docs)]}}, "watch_interval": 0},
            "chats": [{"match": {"chat_id": "group:b"}, "knowledge": ["big"]}],
        }
        model = ScriptedModel([], repeat_last=False)
        began = time.perf_counter()
        tb = await started(root, config, model=model, plugins=[str(plugin)])
        took = time.perf_counter() - began
        service = tb.bot.service(KnowledgeService)
        assert service is not None
        docs_count, passages = (await service.counts())["big"]
        db = root / "test.db"
        size = sum(p.stat().st_size for p in root.glob("test.db*"))
        print(
            f"indexed {total / 1e6:.1f} MB ({docs_count} files, {passages} passages) in "
            f"{took:.1f} s ({total / 1e6 / took:.2f} MB/s); database {size / 1e6:.1f} MB "
            f"({db.name} and its WAL)"
        )
        again = time.perf_counter()
        done = await service.sync()
        print(f"a sync with nothing changed: {time.perf_counter() - again:.2f} s {done}")
        times = []
        for _ in range(10):
            for q in QUESTIONS:
                t = time.perf_counter()
                await service.search(q["q"], ["big"])
                times.append((time.perf_counter() - t) * 1000)
        print(
            "search (wall clock, through the storage thread): "
            f"p50 {pct(times, 50):.1f} ms, p95 {pct(times, 95):.1f} ms, "
            f"max {max(times):.1f} ms ({len(times)} searches)"
        )
        cpu: list[float] = []
        for _ in range(10):
            for q in QUESTIONS:
                cpu.append(await service.db.run(cpu_ms, service.db, q["q"]))
        print(
            f"search CPU time (the storage thread's): p50 {pct(cpu, 50):.1f} ms, "
            f"p95 {pct(cpu, 95):.1f} ms, max {max(cpu):.1f} ms"
        )
        turns: dict[str, list[float]] = {"knowledge_search": [], "noop": []}
        for rep in range(6):
            for q in QUESTIONS:
                for name in ("knowledge_search", "noop"):
                    model.steps = [
                        call(name, query=q["q"]) if name != "noop" else call("noop"),
                        say("answer"),
                    ]
                    t = time.perf_counter()
                    await tb.send(q["q"], group="group:b", at_bot=True)
                    if rep:  # the first round warms caches
                        turns[name].append((time.perf_counter() - t) * 1000)
        ks, noop = turns["knowledge_search"], turns["noop"]
        print(
            f"turn with knowledge_search: p50 {pct(ks, 50):.1f} ms, p95 {pct(ks, 95):.1f} ms; "
            f"with a no-op function: p50 {pct(noop, 50):.1f} ms, p95 {pct(noop, 95):.1f} ms; "
            f"added: p50 {pct(ks, 50) - pct(noop, 50):.1f} ms, "
            f"p95 {pct(ks, 95) - pct(noop, 95):.1f} ms ({len(ks)} turns each)"
        )
        await tb.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("recall")
    r.add_argument("--embeddings-url", default=None)
    r.add_argument("--storage-url", default=None, help="e.g. a PostgreSQL URL (a new database)")
    r.add_argument("--alone", action="store_true", help="also each question in a bot of its own")
    i = sub.add_parser("index")
    i.add_argument("--mb", type=float, default=10.0)
    args = parser.parse_args()
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    if args.what == "recall":
        asyncio.run(recall(args.embeddings_url, args.storage_url))
        if args.alone:
            asyncio.run(recall_alone())
    else:
        asyncio.run(index(args.mb))


if __name__ == "__main__":
    main()
