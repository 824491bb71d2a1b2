"""`GET /v1/openapi.json`: the HTTP API as an OpenAPI 3.1 document (issue 39 §2).

Written here by hand, beside the routes it describes, except the request body of the two
message routes, which is the channel's own `MessageIn` model's JSON schema (so a field added
there is documented at once). tests/channels/http/test_openapi.py fails when the channel mounts
a /v1 route this document lacks, and sends each documented example request to a real bot,
checking the documented status and top-level JSON keys. The document itself is served without
the token (it holds no data); every other /v1 route and /metrics need it when
`channels.http.token` is set.
"""

from __future__ import annotations

import copy
from typing import Any

from aiohttp import web

from chatfn.common.version import __version__

PATH = "/v1/openapi.json"

_BEARER: list[dict[str, list[str]]] = [{"bearer": []}]


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """A JSON object schema; every property is required unless `required` says otherwise."""
    return {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
    }


_STR = {"type": "string"}
_ERROR = _obj(
    {"error": {**_STR, "description": "what is wrong, naming the field"}, "field": _STR},
    required=["error"],
)
_REPLY = _obj(
    {
        "text": _STR,
        "at": {"type": ["string", "null"], "description": "the sender @-mentioned"},
        "images": {"type": "array", "items": _STR},
        "audio": {"type": "array", "items": _STR},
    },
    required=["text", "at"],
)
_REPLIES = _obj({"replies": {"type": "array", "items": {"$ref": "#/components/schemas/Reply"}}})
_HISTORY_ENTRY = _obj(
    {
        "id": {"type": "integer"},
        "role": {"type": "string", "enum": ["user", "assistant"]},
        "text": _STR,
        "sender_id": _STR,
        "sender_name": _STR,
        "time": {"type": "string", "format": "date-time"},
        "message_id": {"type": ["string", "null"]},
    }
)
_FATE = _obj(
    {
        "id": {"type": "integer"},
        "platform": _STR,
        "chat_id": _STR,
        "sender_id": _STR,
        "fate": {**_STR, "description": "answered, ignored, held, ... (as /why tells)"},
        "detail": _STR,
        "told": {"type": "boolean"},
        "sent_at": _STR,
        "since": _STR,
    },
    required=["id", "platform", "chat_id", "sender_id", "fate"],
)
_HEALTH = _obj(
    {
        "status": {"type": "string", "enum": ["ok"]},
        "model": {"type": ["string", "null"]},
        "outbox": {"type": "object"},
        "channels": {"type": "array", "items": {"type": "object"}},
    }
)


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


_BAD = _json(_ref("Error"), "a bad request, naming the field")
_UNAUTHORISED = _json(_ref("Error"), "missing or wrong token")
_MESSAGE_EXAMPLE = {"chat_id": "private:ann", "sender_id": "ann", "text": "/help"}
_SSE = {"text/event-stream": {"schema": {"type": "string"}}}


def _paths() -> dict[str, Any]:
    message_body = {
        "required": True,
        "content": {"application/json": {"schema": _ref("MessageIn"), "example": _MESSAGE_EXAMPLE}},
    }
    return {
        "/v1/messages": {
            "post": {
                "summary": "Send a message; the bot's replies come back when the turn ends",
                "security": _BEARER,
                "requestBody": message_body,
                "responses": {
                    "200": _json(_REPLIES, "the turn's replies"),
                    "400": _BAD,
                    "401": _UNAUTHORISED,
                    "503": _json(_ref("Error"), "the bot is shutting down"),
                },
            }
        },
        "/v1/messages/stream": {
            "post": {
                "summary": "Send a message; the answer streams as Server-Sent Events",
                "description": "Events: `text` and `thinking` ({text}), `tool_call_start` "
                "({id, name}), `tool_call_end` ({id, name, arguments}), `reply` (a Reply), "
                "then `done` ({replies}).",
                "security": _BEARER,
                "requestBody": message_body,
                "responses": {
                    "200": {"description": "the event stream", "content": _SSE},
                    "400": _BAD,
                    "401": _UNAUTHORISED,
                },
            }
        },
        "/v1/events": {
            "get": {
                "summary": "Every message the bot sends, as Server-Sent Events",
                "description": "Each event's `id:` is its event id and its data "
                "{chat_id, text, at, images?, audio?}. With `Last-Event-ID` (or `?since=`) "
                "the events after that id come first, then the live stream.",
                "security": _BEARER,
                "parameters": [
                    {
                        "name": "since",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "integer", "minimum": 0},
                    },
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "required": False,
                        "schema": {"type": "integer", "minimum": 0},
                    },
                ],
                "responses": {
                    "200": {"description": "the event stream", "content": _SSE},
                    "400": _BAD,
                    "401": _UNAUTHORISED,
                },
            }
        },
        "/v1/history": {
            "get": {
                "summary": "A chat's stored messages, oldest first (a page of `limit`)",
                "security": _BEARER,
                "parameters": [
                    {
                        "name": "chat_id",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string", "maxLength": 128},
                        "example": "private:ann",
                    },
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
                    },
                    {
                        "name": "before",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "integer", "minimum": 1},
                        "description": "the page before this message id",
                    },
                ],
                "responses": {
                    "200": _json(
                        _obj(
                            {
                                "chat_id": _STR,
                                "messages": {"type": "array", "items": _ref("HistoryEntry")},
                            }
                        ),
                        "the page",
                    ),
                    "400": _BAD,
                    "401": _UNAUTHORISED,
                },
            }
        },
        "/v1/messages/{id}/fate": {
            "get": {
                "summary": "What became of a stored user message (as /why tells in chat)",
                "security": _BEARER,
                "parameters": [
                    {
                        "name": "id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "integer", "minimum": 1},
                        "description": "the message's `id` in GET /v1/history",
                        "example": 1,
                    }
                ],
                "responses": {
                    "200": _json(_ref("Fate"), "the message's fate"),
                    "400": _BAD,
                    "401": _UNAUTHORISED,
                    "404": _json(_ref("Error"), "no such user message"),
                },
            }
        },
        PATH: {
            "get": {
                "summary": "This document",
                "security": [],
                "responses": {
                    "200": _json(
                        _obj(
                            {
                                "openapi": _STR,
                                "info": {"type": "object"},
                                "paths": {},
                                "components": {},
                            },
                        ),
                        "the OpenAPI document",
                    )
                },
            }
        },
        "/healthz": {
            "get": {
                "summary": "Liveness, the model, the outbox and each channel up or down",
                "security": [],
                "responses": {"200": _json(_HEALTH, "the bot is running")},
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics (text exposition format)",
                "security": _BEARER,
                "responses": {
                    "200": {
                        "description": "the metrics",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    "401": _UNAUTHORISED,
                },
            }
        },
    }


def document(message_schema: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI 3.1 document; `message_schema`: MessageIn's JSON schema."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "chatfn HTTP API",
            "version": __version__,
            "description": "The HTTP channel's API (`channels.http`): send messages, stream "
            "answers, read events, history and fates. With `channels.http.token` set, send "
            "`Authorization: Bearer <token>` (or `?token=`).",
        },
        "paths": _paths(),
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "MessageIn": copy.deepcopy(message_schema),
                "Reply": _REPLY,
                "Error": _ERROR,
                "HistoryEntry": _HISTORY_ENTRY,
                "Fate": _FATE,
            },
        },
    }


def handler(message_schema: dict[str, Any]) -> Any:
    """The aiohttp handler serving the document (built once)."""
    doc = document(message_schema)

    async def openapi(_request: web.Request) -> web.Response:
        return web.json_response(doc)

    return openapi
