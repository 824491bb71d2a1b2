"""`chatfn run` (the default command; `python bot.py`): run the bot on its channels, and
`chatfn migrate`: bring the database schema up to date.

With no config file it runs on embedded defaults: the console channel, a SQLite file under
data/, and no model (slash commands only) unless OPENAI_API_KEY / OPENAI_BASE_URL / CHATFN_MODEL
are set.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from typing import TYPE_CHECKING, Any

from loguru import logger

if TYPE_CHECKING:
    from chatfn.channels.base import Channel
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.broker import Broker
    from chatfn.runtime.channel_host import ChannelSpec
    from chatfn.runtime.cluster import Gateway, Worker
    from chatfn.runtime.settings import Settings

ROLES = ("gateway", "worker")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `chatfn run` (and of `python bot.py`)."""
    parser.add_argument("--config", help="config file (default: ./config.yaml if present)")
    parser.add_argument(
        "--channel",
        action="append",
        metavar="NAME",
        help="channel to run (console, http, onebot, mcp, or an installed one: any found "
        "through the chatfn.channels entry points); repeat to run several (default: "
        "channels.run in the config, else console)",
    )
    parser.add_argument("--host", help="HTTP channel host (overrides channels.http.host)")
    parser.add_argument("--port", type=int, help="HTTP channel port (overrides channels.http.port)")
    parser.add_argument(
        "--role",
        choices=ROLES,
        help="with broker.url: gateway (channels, publishes messages) or worker (runs turns); "
        "default: both in one process",
    )


def add_migrate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="config file (default: ./config.yaml if present)")


def migrate(args: argparse.Namespace) -> int:
    from chatfn.runtime.bot import resolve_storage_url
    from chatfn.runtime.settings import load_settings
    from chatfn.storage.db import Storage

    settings = load_settings(args.config)
    storage = Storage(resolve_storage_url(settings.storage.url, settings.base_dir))
    try:
        before = storage.migrate()
        if before.pending:
            how = " (made before migrations: stamped with the baseline)" if before.legacy else ""
            print(
                f"{storage.safe_url}: {before.current or 'empty'} -> {before.head}{how}; "
                f"ran {', '.join(before.pending)}"
            )
        else:
            print(f"{storage.safe_url}: at {before.head}, nothing to run")
        for loaded in settings.plugins_loaded or ():  # the plugins' own (`Plugin(tables=...)`)
            tables = loaded.plugin.tables_for(settings) if loaded.plugin is not None else None
            if tables is not None and loaded.runs(settings):
                tables.ensure(storage.engine, loaded.name)
                print(f"plugin {loaded.name}: tables at version {tables.version}")
    finally:
        storage.close()
    return 0


def command(args: argparse.Namespace) -> int:
    code = asyncio.run(run(args))
    if getattr(args, "restart", False):  # the console's Restart: stopped cleanly, run again
        from chatfn.runtime.restart import exec_again

        exec_again()
    return code


async def run(args: argparse.Namespace) -> int:
    from chatfn.common.extras import RABBITMQ, import_extra
    from chatfn.runtime import process_lock
    from chatfn.runtime.logging import setup_logging
    from chatfn.runtime.settings import ConfigError, load_settings, resolve_storage_url

    settings = load_settings(args.config)
    setup_logging(settings)
    if settings.broker.url:  # before anything starts: a missing extra is one line
        import_extra(RABBITMQ)
    role = args.role
    if role is not None and not settings.broker.url:
        raise ConfigError(f"--role {role} needs broker.url (amqp://...) in the config")
    lock: process_lock.ProcessLock | None = None
    if not settings.broker.url:
        # One bot process per database (a cluster's processes share theirs by design): taken
        # before anything touches it (migrations, resumed turns, the outbox drain).
        url = resolve_storage_url(settings.storage.url, settings.base_dir)
        lock = await asyncio.to_thread(process_lock.take, url)
    try:
        return await _run(args, settings)
    finally:
        if lock is not None:
            lock.release()


async def _run(args: argparse.Namespace, settings: Settings) -> int:
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.startup import startup_line

    role = args.role
    names = _channel_names(args, settings)
    specs = _specs(names)  # before the bot opens its database: a wrong name is one line
    bot = Bot(settings)
    channels = _build_channels(args, bot, specs)
    _check_web(bot, names, role)
    cluster = await _Cluster.connect(bot, role)
    # After the channels: reminders due while down are sent at once. A gateway runs no
    # plugin services; its workers do.
    # A single process resumes the turns a crash cut; with a broker, its redelivery does.
    await bot.start(services=role != "gateway", resume=cluster.broker is None)
    await cluster.start()
    role_name = role or ("gateway+worker" if cluster.broker else "single process")
    logger.info(startup_line(bot, role_name, names))
    from chatfn.common.audio import AMR_CHANNELS, voice_tools

    voice = settings.voice
    amr = bool(AMR_CHANNELS & set(names))
    for _status, line in voice_tools(
        voice.stt.enabled, voice.tts.provider, voice.tts.fallback, amr=amr
    ):
        logger.warning("voice: {}", line)  # one line per missing tool, naming what to install
    # Freed native memory goes back to the system every TRIM_EVERY s (chatfn/runtime/memory.py).
    from chatfn.runtime.memory import Trimmer

    trimmer = Trimmer()
    trimmer.start()
    bot.restart.armed = True
    stopper = asyncio.create_task(_signalled(bot.restart.requested), name="signals")
    tasks: list[asyncio.Task[None]] = []
    preparing: asyncio.Task[None] | None = None
    try:
        code = 1
        if await _listen(bot):  # once every channel mounted its routes
            tasks = [
                asyncio.create_task(c.run(), name=f"channel-{n}")
                for c, n in zip(channels, names, strict=True)
            ]
            # Once the channels are up: the model SDKs load in a thread (start-up does not
            # wait).
            preparing = asyncio.create_task(bot.prepare_models(), name="prepare-models")
            code = await _until_done(tasks, stopper)
        logger.info("chatfn stopping")
        # Turns in flight finish (or are abandoned) while the channels can still send.
        await bot.finish_turns()
        await _stop_channels(channels)
        await bot.web.stop()  # after the channels: in-flight requests within the grace
    finally:
        others = [*tasks, stopper, *([preparing] if preparing is not None else [])]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        await cluster.stop()
        await bot.aclose()
        trimmer.stop()
    logger.info("chatfn stopped")
    if bot.restart.pending:
        logger.info("restart asked for by {}", bot.restart.by)
        args.restart = True  # `command` runs the command line again, once everything is closed
        return 0
    return code


def _channel_names(args: argparse.Namespace, settings: Settings) -> list[str]:
    """The channels to run: `--channel`s in order, once each, else `channels.run`, else the
    console; none for a worker."""
    from chatfn.runtime.settings import ConfigError

    if args.role == "worker":
        if args.channel:
            raise ConfigError("--role worker holds no channels: give --channel to the gateway")
        return []
    run: list[str] | None = getattr(settings.channels, "run", None)
    return list(dict.fromkeys(args.channel or run or ["console"]))


def _specs(names: list[str]) -> list[ChannelSpec[Any]]:
    from chatfn.runtime.channel_registry import ChannelNotFound, installed_channels
    from chatfn.runtime.settings import ConfigError

    found = installed_channels()
    try:
        return [found.get(name) for name in names]
    except ChannelNotFound as exc:
        raise ConfigError(f"--channel: {exc}") from None


def _build_channels(
    args: argparse.Namespace, bot: Bot, specs: list[ChannelSpec[Any]]
) -> list[Channel]:
    """Each channel from its spec, with `--host`/`--port` over `channels.http`'s; a missing
    extra is one line naming what to install."""
    from chatfn.runtime.settings import ConfigError

    channels: list[Channel] = []
    if any(s.name == "http" for s in specs):  # the admin console: its Channels page
        _mark_command_line(args, bot.api_host.console.command_line)
    for spec in specs:
        own = getattr(bot.settings.channels, spec.name)
        if spec.name == "http" and (args.host or args.port is not None):
            update = {"host": args.host or own.host}
            if args.port is not None:
                update["port"] = args.port
            own = own.model_copy(update=update)
        try:
            channels.append(spec.build(bot.channel_host, own, bot.api_host))
        except ImportError as exc:  # the platform SDK of an extra that is not installed
            extra = f': pip install "chatfn[{spec.extra}]"' if spec.extra else ""
            raise ConfigError(f"channel {spec.name} cannot start ({exc}){extra}") from None
    return channels


def _mark_command_line(args: argparse.Namespace, given: dict[tuple[str, ...], str]) -> None:
    """The config keys these flags give, so the console shows them as such, not editable."""
    if args.channel:
        given[("channels", "run")] = " ".join(f"--channel {n}" for n in args.channel)
    if args.host:
        given[("channels", "http", "host")] = f"--host {args.host}"
    if args.port is not None:
        given[("channels", "http", "port")] = f"--port {args.port}"


def _check_web(bot: Bot, names: list[str], role: str | None) -> None:
    """Refuse webhooks no listener would serve: they are on the HTTP channel's address."""
    from chatfn.runtime.settings import ConfigError

    wanting = bot.web.unbound()
    if wanting:
        raise ConfigError(
            f"channels serving {', '.join(wanting)} need the HTTP channel's port: add "
            "--channel http"
        )
    if bot.settings.admin.users and "http" not in names and role != "worker":
        logger.warning(
            "admin.users is set but the HTTP channel is not running: the admin console is "
            "served on its port (add --channel http)"
        )


class _Cluster:
    """With `broker.url`: the broker and this process's gateway and/or worker."""

    def __init__(
        self, broker: Broker | None, gateway: Gateway | None, worker: Worker | None
    ) -> None:
        self.broker, self.gateway, self.worker = broker, gateway, worker

    @classmethod
    async def connect(cls, bot: Bot, role: str | None) -> _Cluster:
        if not bot.settings.broker.url:
            return cls(None, None, None)
        from chatfn.runtime.broker import Broker
        from chatfn.runtime.cluster import Gateway, Worker
        from chatfn.runtime.settings import ConfigError

        broker = Broker(bot.settings.broker)
        try:
            await broker.connect()
        except Exception as exc:
            raise ConfigError(f"broker.url {broker.safe_url}: cannot connect: {exc}") from None
        gateway = Gateway(bot, broker) if role != "worker" else None
        worker = Worker(bot, broker) if role != "gateway" else None
        return cls(broker, gateway, worker)

    async def start(self) -> None:
        if self.gateway is not None:
            await self.gateway.start()
        if self.worker is not None:
            await self.worker.start()

    async def stop(self) -> None:
        if self.worker is not None:
            await self.worker.stop()
        if self.broker is not None:
            await self.broker.close()


async def _signalled(restart: asyncio.Event) -> None:
    """Until SIGINT or SIGTERM, or a restart asked for (the console's)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(restart.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


async def _listen(bot: Bot) -> bool:
    """Start the web server (every listener and what is mounted on it); False, with one line,
    when an address cannot be taken (a port in use)."""
    try:
        await bot.web.start()
    except OSError as exc:
        logger.error("the web server cannot listen: {}", exc)
        return False
    return True


async def _until_done(tasks: list[asyncio.Task[None]], stopper: asyncio.Task[None]) -> int:
    """Wait for a signal or a channel's end (the console ends the bot when its input ends;
    network channels and workers run until a signal); 1 when a channel failed."""
    done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
    code = 0
    for task in done:
        if task is not stopper and not task.cancelled() and task.exception() is not None:
            logger.opt(exception=task.exception()).error("channel {} failed", task.get_name())
            code = 1
    return code


async def _stop_channels(channels: list[Channel]) -> None:
    for c in channels:
        try:
            await c.stop()
        except Exception as exc:  # one channel failing to close must not keep the rest
            logger.opt(exception=exc).error("channel {} did not stop cleanly", c.platform)
