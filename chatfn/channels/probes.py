"""Pieces of `check_system.py` probes that several channels use."""

from __future__ import annotations

import asyncio
import socket

from chatfn.runtime.channel_host import Probe

LOCAL = ("127.0.0.1", "localhost", "::1")


def open_without_token(name: str, key: str, host: str, token: str | None) -> Probe | None:
    """A warning when a channel listens beyond this machine with no token."""
    if token or host in LOCAL:
        return None
    return Probe(
        "warn", f"channels.{name}.{key} is not set but it listens on {host}: anyone can connect"
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
