"""Pieces of `check_system.py` probes that several channels use, and the matching warning of
a listener started open."""

from __future__ import annotations

import asyncio
import socket

from loguru import logger

from chatfn.runtime.channel_host import Probe

LOCAL = ("127.0.0.1", "localhost", "::1")


def open_without_token(name: str, key: str, host: str, token: str | None) -> Probe | None:
    """A warning when a channel listens beyond this machine with no token."""
    if token or host in LOCAL:
        return None
    return Probe(
        "warn", f"channels.{name}.{key} is not set but it listens on {host}: anyone can connect"
    )


def warn_open(name: str, key: str, host: str, token: str | None, who: str) -> None:
    """The start-up warning of `open_without_token`: a listener beyond this machine with no
    token lets anyone speak as `who`."""
    if not token and host not in LOCAL:
        logger.warning(
            "channels.{}.{} is not set but the channel listens on {}: "
            "anyone who can reach it can speak as {}",
            name,
            key,
            host,
            who,
        )


async def port_probe(name: str, host: str, port: int) -> Probe:
    """Whether `host:port` can be listened on now (a running bot holds it: a warning)."""

    def try_bind() -> str | None:
        try:
            with socket.create_server((host, port)):
                return None
        except OSError as exc:
            return exc.strerror or str(exc)

    why = await asyncio.to_thread(try_bind)
    if why is None:
        return Probe("ok", f"{host}:{port} is free to listen on", name=f"channel {name} port")
    return Probe(
        "warn",
        f"cannot listen on {host}:{port} now ({why}): another process (a running bot?) holds it",
        name=f"channel {name} port",
    )
