"""A request's body as aiohttp sends it, from what an SDK's request model holds: its fields
as JSON, or a multipart form when it carries files (each field as text, unset ones left
out; each file under its field's name)."""

from __future__ import annotations

from typing import IO, Any

import aiohttp

__all__ = ["request_body"]


def request_body(
    fields: dict[str, Any] | None, files: dict[str, IO[bytes]] | None = None
) -> aiohttp.FormData | aiohttp.JsonPayload | None:
    """`fields` as JSON, or with `files` a multipart form; None without either."""
    if files:
        form = aiohttp.FormData()
        for name, value in (fields or {}).items():
            if value is not None:
                form.add_field(name, str(value))
        for name, file in files.items():
            form.add_field(name, file.read(), filename=name)
        return form
    return None if fields is None else aiohttp.JsonPayload(fields)
