"""Optional dependencies (the extras of pyproject.toml): imported only when a config needs one,
and when it is missing the bot stops with one line naming what needs it and what to install.

Base dependencies are what one process on SQLite needs, so a PostgreSQL driver or a RabbitMQ
client is never imported unless `storage.url` or `broker.url` asks for it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import NamedTuple

from chatfn.common.config import ConfigError


class MissingExtra(ConfigError):
    """A config needs an optional dependency that is not installed. The message is the whole
    story in one line, e.g. `storage.url is PostgreSQL: pip install "chatfn[postgres]"`."""


class Extra(NamedTuple):
    module: str  # what to import
    extra: str  # the pyproject extra that installs it
    needed_by: str  # what in the config needs it, as the user wrote it


POSTGRES = Extra("psycopg", "postgres", "storage.url is PostgreSQL")
RABBITMQ = Extra("aio_pika", "rabbitmq", "broker.url is RabbitMQ")


def import_extra(extra: Extra) -> ModuleType:
    """The extra's module, or MissingExtra. Any ImportError counts: a psycopg without its
    binary part fails with ImportError too, and the same pip command fixes it."""
    try:
        return importlib.import_module(extra.module)
    except ImportError as exc:
        raise MissingExtra(f'{extra.needed_by}: pip install "chatfn[{extra.extra}]"') from exc
