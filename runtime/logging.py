"""Logging setup: loguru, with every configured secret masked in every line."""

from __future__ import annotations

import sys
from typing import Any

from loguru import logger

from runtime.settings import Settings

_secrets: set[str] = set()


def secret_values(settings: Settings) -> set[str]:
    values = {m.api_key.get_secret_value() for m in settings.models.values() if m.api_key}
    if settings.web_search.api_key:
        values.add(settings.web_search.api_key.get_secret_value())
    if settings.channels.http.token:
        values.add(settings.channels.http.token)
    if settings.channels.onebot.access_token:
        values.add(settings.channels.onebot.access_token)
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
    logger.add(
        stream or sys.stderr,
        level=settings.logging.level,
        format=fmt,
        filter=_mask,
        backtrace=False,
        diagnose=False,
    )
    if settings.logging.file:
        logger.add(
            settings.logging.file,
            level=settings.logging.level,
            format=fmt,
            filter=_mask,
            rotation="10 MB",
            retention=5,
            backtrace=False,
            diagnose=False,
        )
