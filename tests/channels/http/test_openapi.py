"""`GET /v1/openapi.json` (issue 39 §2): every /v1 route the HTTP channel mounts is in the
document, and a real request to each documented route (built from the document's own
examples) answers with a documented status and the documented top-level JSON keys; so do
the documented refusals (400, 401, 404)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import ClientSession

from chatfn.channels.http.channel import HttpChannel
from chatfn.channels.http.openapi import PATH
from chatfn.testing import TestBot
from providers.scripted import ScriptedModel, say

TOKEN = "openapi-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# A request each documented refusal answers: (method, path) -> status -> (url tail, body).
REFUSALS: dict[tuple[str, str], dict[str, tuple[str, Any]]] = {
    ("post", "/v1/messages"): {"400": ("/v1/messages", {"chat_id": "x"})},
    ("post", "/v1/messages/stream"): {"400": ("/v1/messages/stream", {"sender_id": "x"})},
    ("get", "/v1/events"): {"400": ("/v1/events?since=-1", None)},
    ("get", "/v1/history"): {"400": ("/v1/history?chat_id=x&limit=0", None)},
    ("get", "/v1/messages/{id}/fate"): {
        "400": ("/v1/messages/x/fate", None),
        "404": ("/v1/messages/999999/fate", None),
    },
}
NOT_MADE = {"503"}  # the bot shutting down: tests/channels/http/test_http.py covers it


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    found: Any = doc
    for part in ref.removeprefix("#/").split("/"):
        found = found[part]
    return _resolve(doc, found)


def _mounted(channel: HttpChannel) -> set[tuple[str, str]]:
    routes = set()
    for route in channel.app.router.routes():
        path = route.resource.canonical if route.resource is not None else ""
        if route.method != "HEAD" and (path.startswith("/v1/") or path in ("/healthz", "/metrics")):
            routes.add((route.method.lower(), path))
    return routes


def _url(op: dict[str, Any], path: str) -> str:
    query = []
    for param in op.get("parameters", []):
        if param["in"] == "path":
            path = path.replace(f"{{{param['name']}}}", str(param["example"]))
        elif param["in"] == "query" and param["required"]:
            query.append(f"{param['name']}={param['example']}")
    return path + ("?" + "&".join(query) if query else "")


async def _check(
    http: ClientSession,
    base: str,
    doc: dict[str, Any],
    method: str,
    tail: str,
    body: Any,
    op: dict[str, Any],
    status: str,
) -> None:
    resp = await http.request(method, base + tail, json=body)
    try:
        assert str(resp.status) == status, (method, tail, resp.status, await resp.text())
        content = op["responses"][status]["content"]
        kind = resp.content_type
        assert kind in content, (method, tail, kind)
        if kind == "application/json":
            schema = _resolve(doc, content[kind]["schema"])
            keys = set((await resp.json()).keys())
            assert set(schema["required"]) <= keys <= set(schema["properties"]), (tail, keys)
        elif kind == "text/event-stream":
            first = await asyncio.wait_for(resp.content.readline(), 10)
            assert first.startswith((b":", b"event:", b"id:")), first
    finally:
        resp.close()


async def test_every_route_is_documented_and_answers_as_documented(tmp_path: Path) -> None:
    config = {"channels": {"http": {"token": TOKEN}}}
    tb = TestBot(tmp_path, model=ScriptedModel([say("hi")], repeat_last=True), config=config)
    channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
    await channel.start()
    base = f"http://127.0.0.1:{channel.bound_port}"
    try:
        async with ClientSession() as anonymous:
            resp = await anonymous.get(base + PATH)  # no token needed
            assert resp.status == 200
            doc = await resp.json()
        assert doc["openapi"].startswith("3.1")
        documented = {(m, p) for p, ops in doc["paths"].items() for m in ops}
        mounted = _mounted(channel)
        assert mounted - documented == set(), "mounted but not in the OpenAPI document"
        assert documented - mounted == set(), "documented but not mounted"
        assert ("get", "/v1/messages/{id}/fate") in documented and len(documented) >= 8

        async with ClientSession(headers=AUTH) as http:
            message = doc["paths"]["/v1/messages"]["post"]
            example = message["requestBody"]["content"]["application/json"]["example"]
            await _check(http, base, doc, "post", "/v1/messages", example, message, "200")
            for path, ops in doc["paths"].items():
                for method, op in ops.items():
                    body = op.get("requestBody", {}).get("content", {})
                    sent = body.get("application/json", {}).get("example")
                    await _check(http, base, doc, method, _url(op, path), sent, op, "200")
                    statuses = set(op["responses"]) - {"200", "401"} - NOT_MADE
                    refusals = REFUSALS.get((method, path), {})
                    assert set(refusals) == statuses, (method, path)
                    for status, (tail, bad) in refusals.items():
                        await _check(http, base, doc, method, tail, bad, op, status)
        async with ClientSession() as anonymous:
            for path, ops in doc["paths"].items():
                for method, op in ops.items():
                    if op["security"]:  # behind the token: refused without it
                        assert "401" in op["responses"], (method, path)
                        await _check(anonymous, base, doc, method, _url(op, path), None, op, "401")
                    else:
                        assert "401" not in op["responses"]
    finally:
        await channel.stop()
        await tb.aclose()


def test_the_message_schema_is_the_channels_model() -> None:
    from chatfn.channels.http.channel import MessageIn
    from chatfn.channels.http.openapi import document

    schema = document(MessageIn.model_json_schema())["components"]["schemas"]["MessageIn"]
    assert set(schema["properties"]) == set(MessageIn.model_fields)
    assert schema["required"] == ["chat_id", "sender_id"]
