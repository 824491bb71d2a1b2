"""Logging setup: one loguru sink for every log line of the process, with every configured
secret masked in every line.

The provider SDKs (openai, anthropic, google-genai), httpx, alembic, aio-pika, APScheduler,
uvicorn and asyncio log through the standard `logging` module; `LoguruHandler` on the root
logger hands their records to loguru (NoneBot2's `nonebot/log.py` pattern), so they get the
same mask, format (text or JSON), chat and message ids, level and log file as ours.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger
from pydantic import BaseModel, SecretStr

from chatfn.runtime.settings import Settings

if TYPE_CHECKING:
    from loguru import Record  # in loguru's stubs only

_secrets: set[str] = set()

# Libraries whose INFO (or DEBUG) lines come once per request, job run or frame: they are
# shown only when `logging.level` is DEBUG or TRACE. Their warnings and errors always pass.
CHATTY = (
    "httpx",
    "httpx2",
    "httpcore",
    "httpcore2",
    "apscheduler",
    "aio_pika",
    "aiormq",
    "alembic",
    "uvicorn.access",
    "mcp",
    "google_genai",
    "websockets",
)

# stdlib has no TRACE or SUCCESS: loguru's numbers (5, 25) work as stdlib levels too.
_STDLIB_LEVEL = {"TRACE": 5, "DEBUG": 10, "INFO": 20, "SUCCESS": 25, "WARNING": 30, "ERROR": 40}


class LoguruHandler(logging.Handler):
    """Hands a stdlib `logging` record to loguru: its level by name (else its number), the
    caller's frame as the record's origin (walking back past `logging`'s own frames), its
    exception info. The context (chat and message ids from `logger.contextualize`) is the
    caller's, as the handler runs in the caller's task."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        frame, depth = sys._getframe(0), 0
        while frame is not None and (depth == 0 or frame.f_code.co_filename == logging.__file__):
            frame = frame.f_back  # type: ignore[assignment]
            depth += 1
        logger.opt(depth=depth, exception=record.exc_info).bind(logger_name=record.name).log(
            level, record.getMessage()
        )


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


def mask_text(text: str) -> str:
    """`text` with every configured secret replaced by `***` (the admin console's log tail)."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, "***")
    return text


def _mask(record: Record) -> bool:
    if _secrets:
        msg = record["message"]
        for secret in _secrets:
            if secret in msg:
                msg = msg.replace(secret, "***")
        record["message"] = msg
        exc = record["exception"]
        if exc is not None and exc.value is not None:
            shown = str(exc.value)
            if any(s in shown for s in _secrets):
                # The traceback's last line prints the exception's text: mask it there too.
                for secret in _secrets:
                    shown = shown.replace(secret, "***")
                try:
                    masked = type(exc.value)(shown)
                except Exception:  # a constructor that wants more: say the type and the text
                    masked = RuntimeError(f"{type(exc.value).__name__}: {shown}")
                record["exception"] = exc._replace(value=masked)
    return True


def route_stdlib_logging(level: str) -> None:
    """Send every stdlib `logging` record to loguru (once per process, whatever the number of
    calls), with the root at `level` and the chatty libraries (`CHATTY`) quiet above DEBUG."""
    root = logging.getLogger()
    if not any(isinstance(h, LoguruHandler) for h in root.handlers):
        root.addHandler(LoguruHandler())
    number = _STDLIB_LEVEL[level]
    root.setLevel(number)
    for name in CHATTY:
        # NOTSET: inherit the root's level (DEBUG or TRACE); else only warnings and errors.
        logging.getLogger(name).setLevel(logging.NOTSET if number <= 10 else logging.WARNING)
    logging.captureWarnings(True)  # warnings.warn(...) too, through the "py.warnings" logger


def log_file_path(settings: Settings) -> Path | None:
    """`logging.file`, relative to the config file's folder (settings.base_dir)."""
    if not settings.logging.file:
        return None
    return settings.base_dir / Path(settings.logging.file).expanduser()


class _Stderr:
    """The sink for stderr: whatever `sys.stderr` is when a line is written, so a console
    prompt that patches it (prompt_toolkit's `patch_stdout`) gets log lines printed above the
    line being typed rather than through it."""

    def write(self, text: str) -> None:
        sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:  # loguru colours a terminal's lines
        return sys.__stderr__ is not None and sys.__stderr__.isatty()


def setup_logging(settings: Settings, *, stream: Any = None) -> None:
    """Route logs to stderr (so the console channel's stdout stays the conversation) and
    optionally to a file; route the standard library's `logging` into the same sinks."""
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
        stream or _Stderr(),
        level=settings.logging.level,
        format=fmt,
        filter=_mask,
        serialize=serialize,
        backtrace=False,
        diagnose=False,
    )
    file = log_file_path(settings)
    if file is not None:
        logger.add(
            file,
            level=settings.logging.level,
            format=fmt,
            filter=_mask,
            serialize=serialize,
            rotation="10 MB",
            retention=5,
            backtrace=False,
            diagnose=False,
        )
    route_stdlib_logging(settings.logging.level)
