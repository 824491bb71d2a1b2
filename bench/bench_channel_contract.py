"""A channel under the HTTP channel's load, through its contract driver (issue 36): LINE,
WhatsApp, Mattermost, Satori and Teams against their local platform servers
(tests/channels/<name>/<name>_fake.py, speaking the documented protocol), IRC, XMPP and e-mail
against the real servers the tests start (ngircd, Prosody, Dovecot + an SMTP server: their
figures are the real servers' round trips, named as such).

Each message is a user's private message answered by a scripted echo model (no model
latency), timed from the driver's `say` until the platform received the reply (`sent`); a
chat's messages go one after another, `--concurrency` chats at a time. The HTTP channel runs
first under the same load (its own chats, POST /v1/messages) as the baseline; "added" is the
channel's p50/p95 minus HTTP's.

Run: `python bench/bench_channel_contract.py NAME` (NAME: line, whatsapp, mattermost, satori,
teams, irc, xmpp, email); `--messages`, `--chats` (default: one message per chat on the local
servers, 20 chats on the real ones: every IRC or XMPP chat is a client connection of its own),
`--concurrency`, `--json`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loguru import logger  # noqa: E402

from bench.channel_load import bench_http, make_bot, summary  # noqa: E402
from tests.channels.contract import Chat  # noqa: E402

REAL_SERVERS = ("irc", "xmpp", "email")
NAMES = ("line", "whatsapp", "mattermost", "satori", "teams", *REAL_SERVERS)


@contextlib.asynccontextmanager
async def driver_for(name: str) -> AsyncIterator[Any]:
    """The contract's driver of `name`, its platform (fake or real server) running."""
    if name in ("line", "whatsapp", "mattermost", "satori", "teams"):
        fakes = {
            "line": ("tests.channels.line.line_fake", "FakeLine", "LineDriver"),
            "whatsapp": ("tests.channels.whatsapp.whatsapp_fake", "FakeWhatsApp", "WhatsAppDriver"),
            "mattermost": (
                "tests.channels.mattermost.mattermost_fake",
                "FakeMattermost",
                "MattermostDriver",
            ),
            "satori": ("tests.channels.satori.satori_fake", "FakeSatori", "SatoriDriver"),
            "teams": ("tests.channels.teams.teams_fake", "FakeTeams", "TeamsDriver"),
        }
        module, fake_name, driver_name = fakes[name]
        import importlib

        fake_cls = getattr(importlib.import_module(module), fake_name)
        driver_cls = getattr(
            importlib.import_module(module.replace("_fake", "_driver")), driver_name
        )
        async with fake_cls() as fake:
            yield driver_cls(fake)
        return
    if name == "irc":
        from tests.channels.irc.irc_driver import IrcDriver
        from tests.channels.irc.ngircd_server import NgIrcd

        server = NgIrcd()
        server.start()
        try:
            driver = await IrcDriver(server).open()
            try:
                yield driver
            finally:
                await driver.close()
        finally:
            server.stop()
        return
    if name == "xmpp":
        from tests.channels.xmpp.prosody_server import Prosody
        from tests.channels.xmpp.xmpp_driver import XmppDriver

        prosody = Prosody()
        try:
            prosody.start()
            prosody.account("bot")
            prosody.account("watcher")
            driver = await XmppDriver(prosody).open()
            try:
                yield driver
            finally:
                await driver.close()
        finally:
            prosody.stop()
        return
    from tests.channels.email.conftest import accounts
    from tests.channels.email.email_driver import EmailDriver
    from tests.channels.email.mail_servers import MailServers

    servers = MailServers()
    try:
        servers.start(users=accounts())
        driver = EmailDriver(servers)
        try:
            yield driver
        finally:
            await driver.close()
    finally:
        servers.stop()


async def bench_channel(
    name: str, n: int, chats: int, concurrency: int, folder: Path
) -> dict[str, float]:
    async with driver_for(name) as driver:
        bot = make_bot(folder, {driver.platform: driver.channel_settings()})
        await driver.attach(bot.channel_host, getattr(bot.settings.channels, driver.platform))
        await bot.start()
        gate = asyncio.Semaphore(concurrency)
        latencies: list[float] = []
        per_chat = [n // chats + (1 if c < n % chats else 0) for c in range(chats)]

        async def one_chat(c: int) -> None:
            chat = Chat("private", str(1001 + c))  # e-mail: accounts u1001.. exist
            async with gate:
                for k in range(per_chat[c]):
                    began = time.perf_counter()
                    await driver.say(chat, f"ping {c}-{k}", sender=chat.native)
                    await driver.sent(chat, k + 1, timeout=60)
                    latencies.append(time.perf_counter() - began)

        began = time.perf_counter()
        await asyncio.gather(*(one_chat(c) for c in range(chats)))
        wall = time.perf_counter() - began
        await driver.detach()
        await bot.aclose()
    return summary(latencies, wall)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("name", choices=NAMES)
    parser.add_argument("--messages", type=int, default=None)
    parser.add_argument("--chats", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    real = args.name in REAL_SERVERS
    n = args.messages or (200 if real else 1000)
    chats = args.chats or (20 if real else n)
    concurrency = min(args.concurrency, chats)
    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        results["http"] = await bench_http(n, concurrency, Path(folder))
    with tempfile.TemporaryDirectory() as folder:
        results[args.name] = await bench_channel(args.name, n, chats, concurrency, Path(folder))
    results["added_p50_ms"] = results[args.name]["p50_ms"] - results["http"]["p50_ms"]
    results["added_p95_ms"] = results[args.name]["p95_ms"] - results["http"]["p95_ms"]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    kind = "the real server" if real else "its local platform server"
    print(f"{n} messages over {chats} chats, {concurrency} in flight, echo model, {kind}")
    for contender in ("http", args.name):
        r = results[contender]
        print(
            f"{contender:10} {r['messages_per_s']:7.1f} msg/s   p50 {r['p50_ms']:7.1f} ms   "
            f"p95 {r['p95_ms']:7.1f} ms"
        )
    print(
        f"{args.name} adds p50 {results['added_p50_ms']:+.1f} ms, "
        f"p95 {results['added_p95_ms']:+.1f} ms"
    )


if __name__ == "__main__":
    asyncio.run(main())
