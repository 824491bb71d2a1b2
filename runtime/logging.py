"""Logging setup: loguru, with every configured secret masked in every line."""

from __future__ import annotations

import sys
from typing import Any

from loguru import logger
from pydantic import BaseModel, SecretStr

from runtime.settings import Settings

_secrets: set[str] = set()


def secret_values(settings: Settings) -> set[str]:
    """Every secret in the configuration, whichever section (a plugin's too) holds it: each
    `SecretStr` value and each `*token` field."""
    values: set[str] = set()

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, SecretStr):
            values.add(value.get_secret_value())
        elif isinstance(value, BaseModel):
            for name in type(value).model_fields:
                walk(getattr(value, name), name)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, str) and key.endswith("token"):
            values.add(value)

    walk(settings)
    return {v for v in values if v and len(v) >= 4}


def _mask(record: dict[str, Any]) -> bool:
    if _secrets:
        msg = record["message"]
        for secret in _secrets:
            if secret in msg:
                msg = msg.replace(secret, "***")
        record["message"] = msg
    return True


def setup_logging(settings: Settings, *, stream: Any = None) -> None:
    """Route logs to stderr (so the console channel's stdout stays the conversation) and
    optionally to a file."""
    _secrets.clear()
    _secrets.update(secret_values(settings))
    logger.remove()
    fmt = (
        "<green>{time:HH:mm:ss.SSS}</green> <level>{level: <7}</level> "
        "{extra[chat_id]}/{extra[message_id]} <level>{message}</level>"
    )
    logger.configure(extra={"chat_id": "-", "message_id": "-", "sender_id": "-"})
    # json: loguru's serializer writes one JSON object per line, the bound chat_id,
    # message_id and sender_id under record.extra; the mask runs first, so secrets stay out.
    serialize = settings.logging.format == "json"
    logger.add(
        stream or sys.stderr,
        level=settings.logging.level,
        format=fmt,
        filter=_mask,
        serialize=serialize,
        backtrace=False,
        diagnose=False,
    )
    if settings.logging.file:
        logger.add(
            settings.logging.file,
            level=settings.logging.level,
            format=fmt,
            filter=_mask,
            serialize=serialize,
            rotation="10 MB",
            retention=5,
            backtrace=False,
            diagnose=False,
        )
