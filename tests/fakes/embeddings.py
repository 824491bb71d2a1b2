"""A local server speaking OpenAI's `POST /v1/embeddings`, with a tiny deterministic embedding:
each word (CJK: each character pair) is hashed into one of `DIM` dimensions, and words of one
`CONCEPTS` group share a dimension, so "refund" and "money back" are near each other while
sharing no word: what a real embedding model adds to BM25, small enough to reason about in a
test. The real SDK (`openai`) talks to it; it records every request.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from aiohttp import web

from tests.kit import bound_port

DIM = 64
CONCEPTS = (
    ("refund", "refunds", "money", "back", "reimburse", "repay"),
    ("holiday", "holidays", "vacation", "leave", "days", "off"),
)
_WORDS = re.compile(r"[a-z]+|[\u4e00-\u9fff]")


def _bucket(word: str) -> int:
    for i, group in enumerate(CONCEPTS):
        if word in group:
            return i
    return len(CONCEPTS) + int(hashlib.sha1(word.encode()).hexdigest(), 16) % (DIM - len(CONCEPTS))


def embed(text: str) -> list[float]:
    vector = [0.0] * DIM
    tokens = _WORDS.findall(text.lower())
    for token in tokens:
        vector[_bucket(token)] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class EmbeddingServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail = False
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        if self.fail:
            return web.json_response({"error": {"message": "down for the test"}}, status=503)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {"object": "embedding", "index": i, "embedding": embed(t)} for i, t in enumerate(texts)
        ]
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
            }
        )

    async def start(self) -> EmbeddingServer:
        app = web.Application()
        app.router.add_post("/v1/embeddings", self._embeddings)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = bound_port(site)
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def texts_embedded(self) -> int:
        return sum(len(r["input"]) if isinstance(r["input"], list) else 1 for r in self.requests)
