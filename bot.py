"""Start the bot: `python bot.py [--config FILE] [--channel console|http|onebot|mcp]...`.

With no config file it runs on embedded defaults: the console channel, a SQLite file under
data/, and no model (slash commands only) unless OPENAI_API_KEY / OPENAI_BASE_URL / CHATFN_MODEL
are set.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path

from loguru import logger

CHANNELS = ("console", "http", "onebot", "mcp")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bot.py", description="Run the chatfn bot.")
    parser.add_argument("--config", help="config file (default: ./config.yaml if present)")
    parser.add_argument(
        "--channel",
        action="append",
        choices=CHANNELS,
        help="channel to run; repeat to run several (default: console)",
    )
    parser.add_argument("--host", help="HTTP channel host (overrides channels.http.host)")
    parser.add_argument("--port", type=int, help="HTTP channel port (overrides channels.http.port)")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> int:
    from channels.base import Channel
    from runtime.bot import Bot
    from runtime.logging import setup_logging
    from runtime.settings import load_settings

    settings = load_settings(args.config)
    setup_logging(settings)
    bot = Bot(settings)
    names = list(dict.fromkeys(args.channel or ["console"]))
    channels: list[Channel] = []
    for name in names:
        if name == "console":
            from channels.console import ConsoleChannel

            channels.append(ConsoleChannel(bot))
        elif name == "http":
            from channels.http import HttpChannel

            channels.append(HttpChannel(bot, host=args.host, port=args.port))
        elif name == "onebot":
            from channels.onebot import OneBotChannel

            channels.append(OneBotChannel(bot))
        elif name == "mcp":  # MCP over stdio: stdout is the protocol, logs go to stderr
            from channels.mcp import McpStdioChannel

            channels.append(McpStdioChannel(bot))
    await bot.start()  # after the channels: reminders due while down are sent at once
    logger.info(
        "chatfn started: model={}, functions={}, channels={}",
        bot.model.name if bot.model else "none",
        len(bot.registry),
        ",".join(names),
    )
    loop = asyncio.get_running_loop()
    tasks = [
        asyncio.create_task(c.run(), name=f"channel-{n}")
        for c, n in zip(channels, names, strict=True)
    ]
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    stopper = asyncio.create_task(stop.wait())
    # The console ends the bot when its input ends; network channels run until a signal.
    done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        if task is not stopper and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    for c in channels:
        await c.stop()
    for task in [*tasks, stopper]:
        task.cancel()
    await asyncio.gather(*tasks, stopper, return_exceptions=True)
    await bot.aclose()
    logger.info("chatfn stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from function_calls.registry import PluginLoadError
    from providers.errors import ProviderNotInstalled
    from runtime.settings import ConfigError
    from storage.db import StorageError

    args = parse_args(argv)
    try:
        return asyncio.run(run(args))
    except (ConfigError, StorageError, PluginLoadError, ProviderNotInstalled) as exc:
        print(f"chatfn: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
