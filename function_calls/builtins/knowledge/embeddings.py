"""Embeddings from any server that speaks OpenAI's `/v1/embeddings` (OpenAI, vLLM, Ollama,
LM Studio, llama.cpp, text-embeddings-inference...), through the `openai` SDK, configured as a
`models:` entry (its `model`, `base_url`, `api_key`, `timeout`, `max_retries`).

Embedding requests are not chat turns: they carry no conversation and are not counted in the
chat's limits; a failure during a search leaves the search to BM25 alone (logged), never an
error for the user.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Inputs per request: well under every server's batch limit, and few round trips for a file.
BATCH = 64


class EmbeddingError(Exception):
    """The embeddings server failed or answered something unusable."""


class Embedder:
    """One `models:` entry used for embeddings."""

    def __init__(self, name: str, entry: Any) -> None:
        from openai import AsyncOpenAI

        self.name = name
        self.model = entry.model
        key = entry.api_key.get_secret_value() if entry.api_key is not None else "unused"
        self._client = AsyncOpenAI(
            api_key=key,
            base_url=entry.base_url,
            timeout=entry.timeout,
            max_retries=entry.max_retries,
        )

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        import openai

        out: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            batch = [t or " " for t in texts[start : start + BATCH]]
            try:
                resp = await self._client.embeddings.create(
                    model=self.model, input=batch, encoding_format="float"
                )
            except openai.OpenAIError as exc:
                raise EmbeddingError(f"embeddings from {self.name!r} failed: {exc}") from exc
            data = sorted(resp.data, key=lambda d: d.index)
            if len(data) != len(batch) or any(not d.embedding for d in data):
                raise EmbeddingError(
                    f"embeddings from {self.name!r}: {len(data)} vectors for {len(batch)} texts"
                )
            out.extend([list(d.embedding) for d in data])
        dims = {len(v) for v in out}
        if len(dims) > 1:
            raise EmbeddingError(f"embeddings from {self.name!r}: mixed dimensions {sorted(dims)}")
        return out

    async def aclose(self) -> None:
        await self._client.close()
