"""`chatfn login NAME`: log a channel in whose credentials come from an interactive login
(its spec's `ChannelLogin`: WeChat's QR code, scanned with the phone) and keep what it gives
in the bot's database (chatfn/storage/channel_state.py), where the channel reads it when it
connects and `chatfn check` probes it. The QR code is printed as text (the `qrcode`
package, in the channel's extra) with the link it holds, for a terminal that cannot show it."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("channel", metavar="NAME", help="the channel to log in (weixin)")
    parser.add_argument("--config", help="config file (default: ./config.yaml if present)")


def show_qr(content: str) -> str:
    """`content` as a QR code of text characters, or "" without the `qrcode` package."""
    try:
        import io

        import qrcode  # type: ignore[import-untyped]
    except ImportError:
        return ""
    code = qrcode.QRCode(border=1)
    code.add_data(content)
    code.make(fit=True)
    out = io.StringIO()
    code.print_ascii(out=out, invert=True)
    return out.getvalue()


async def _awaited(job: Awaitable[str]) -> str:
    return await job


def _show(kind: str, text: str) -> None:
    if kind == "qr":
        print("Scan this QR code with WeChat on your phone:", flush=True)
        print(show_qr(text), flush=True)
        print(f"(or open {text} )", flush=True)
    else:
        print(text, flush=True)


def command(args: argparse.Namespace) -> int:
    from chatfn.runtime.bot import resolve_storage_url
    from chatfn.runtime.channel_host import section_of
    from chatfn.runtime.channel_registry import ChannelNotFound, installed_channels
    from chatfn.runtime.settings import load_settings
    from chatfn.storage import channel_state
    from chatfn.storage.db import Storage

    settings = load_settings(args.config)
    try:
        spec = installed_channels().get(args.channel)
    except ChannelNotFound as exc:
        print(f"chatfn: {exc}", file=sys.stderr)
        return 2
    if spec.login is None:
        print(f"chatfn: the {spec.name} channel has no login", file=sys.stderr)
        return 2
    section = section_of(settings, spec.name, spec.settings)
    try:
        kept: str = asyncio.run(_awaited(spec.login.flow(section, _show)))
    except Exception as exc:  # the flow's own reason (LoginFailed, a timeout): one line
        print(f"chatfn: {spec.name} login failed: {exc or type(exc).__name__}", file=sys.stderr)
        return 1
    storage = Storage(resolve_storage_url(settings.storage.url, settings.base_dir))
    try:
        storage.migrate()
        channel_state.save(storage.engine, spec.name, spec.login.key, kept)
        print(f"{spec.name}: logged in; the login is kept in {storage.safe_url}")
    finally:
        storage.close()
    return 0
