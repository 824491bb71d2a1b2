"""Health check to run before going live: `chatfn check [--config FILE] [--json] [--online]`
(or `python check_system.py` with the same flags).

Prints a table of checks, each ✓ (ok), ! (warning) or ✗ (failure) with a reason, and exits 0
only when the bot can really run. A missing model is a warning (the bot runs on slash commands);
an invalid config, an unusable database, a plugin that fails to import or a schema a provider
would reject is a failure. `--online` also makes one real request per configured model,
including a tool-call round trip, calls `tools/list` on each MCP server, and runs each
channel's online probe (the platform's "who am I"). The channels checked are those named by
`--channel` (as for `chatfn run`), else those with a `channels.<name>:` section in the config.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import time
from collections.abc import Awaitable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:  # imported where used: the imports check runs first, and fast
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.settings import Settings
    from chatfn.storage.db import Storage
    from function_calls.registry import Registry

T = TypeVar("T")

DESCRIPTION = "Check the setup before going live: config, database, broker, plugins, models."
Status = Literal["ok", "warn", "fail"]
MARK = {"ok": "✓", "warn": "!", "fail": "✗"}
CORE_MODULES = (
    "pydantic",
    "openai",
    "sqlalchemy",
    "apscheduler",
    "aiohttp",
    "loguru",
    "yaml",
    "json_repair",
)
OPTIONAL_SDKS = {"anthropic": "anthropic", "gemini": "google.genai"}


@dataclass
class Check:
    name: str
    status: Status
    detail: str


class Report:
    def __init__(self) -> None:
        self.checks: list[Check] = []

    def add(self, name: str, status: Status, detail: str) -> Check:
        check = Check(name, status, detail)
        self.checks.append(check)
        return check

    @property
    def ok(self) -> bool:
        return all(c.status != "fail" for c in self.checks)

    def table(self) -> str:
        width = max((len(c.name) for c in self.checks), default=10)
        lines = [f"{MARK[c.status]} {c.name:<{width}}  {c.detail}" for c in self.checks]
        fails = sum(c.status == "fail" for c in self.checks)
        warns = sum(c.status == "warn" for c in self.checks)
        verdict = "ready to run" if self.ok else "NOT ready: fix the ✗ lines"
        lines.append(f"\n{len(self.checks)} checks, {fails} failed, {warns} warnings: {verdict}")
        return "\n".join(lines)


def check_imports(report: Report) -> bool:
    missing = []
    for name in CORE_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        report.add("imports", "fail", f"missing {', '.join(missing)}: run pip install -e .")
        return False
    try:
        for name in (
            "function_calls.router",
            "function_calls.llm",
            "providers.factory",
            "chatfn.storage.db",
            "chatfn.runtime.bot",
            "chatfn.channels.console.channel",
            "chatfn.channels.http.channel",
        ):
            importlib.import_module(name)
    except Exception as exc:
        report.add("imports", "fail", f"chatfn module failed to import: {exc}")
        return False
    sdks = []
    for provider, module in OPTIONAL_SDKS.items():
        # find_spec, not import: these SDKs take seconds to import and a configured provider's
        # SDK is imported for real when the model is built below.
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        sdks.append(f"{provider} ✓" if found else f"{provider} not installed")
    report.add("imports", "ok", f"core modules import; optional SDKs: {', '.join(sdks)}")
    return True


def load_config(report: Report, path: str | None) -> Settings | None:
    from chatfn.runtime.settings import ConfigError, load_settings
    from function_calls.registry import PluginLoadError

    try:
        settings = load_settings(path)
    except ConfigError as exc:
        report.add("config", "fail", str(exc).replace("\n", " "))
        return None
    except PluginLoadError as exc:  # plugins are loaded with the config: they add its sections
        report.add("plugins", "fail", str(exc))
        return None
    source = path or ("config.yaml" if Path("config.yaml").exists() else "built-in defaults")
    report.add("config", "ok", f"{source} is valid")
    return settings


def check_storage(report: Report, settings: Settings, migrate: bool = False) -> Storage | None:
    """Reachable, migrations (run only with --migrate; otherwise listed: the bot runs them at
    start), writable."""
    from chatfn.common.config import ConfigError
    from chatfn.runtime.bot import resolve_storage_url
    from chatfn.storage.db import Storage

    try:
        storage = Storage(resolve_storage_url(settings.storage.url, settings.base_dir))
        state = storage.schema_state()
        if state.pending and migrate:
            storage.migrate()
            report.add(
                "migrations",
                "ok",
                f"ran {', '.join(state.pending)}: {state.current or 'empty'} -> {state.head}",
            )
        elif state.pending:
            what = "made before migrations" if state.legacy else (state.current or "empty")
            report.add(
                "migrations",
                "warn",
                f"{len(state.pending)} pending ({what} -> {state.head}): run at the bot's "
                "start, by `chatfn migrate`, or by `chatfn check --online --migrate`",
            )
            report.add("database", "ok", f"{storage.safe_url} reachable")
            return storage
        else:
            report.add("migrations", "ok", f"schema at {state.head}, nothing pending")
        storage.check_writable()
    except ConfigError as exc:  # a missing extra or driver: the message says what to do
        report.add("database", "fail", str(exc))
        return None
    except Exception as exc:
        report.add("database", "fail", f"{settings.storage.url}: {exc}")
        return None
    report.add("database", "ok", f"{storage.safe_url} reachable and writable")
    return storage


def check_broker(report: Report, settings: Settings, role: str | None) -> None:
    """The role this process would have, and the broker it would use (connected to, once)."""
    cfg = settings.broker
    if not cfg.url:
        if role:
            report.add("role", "fail", f"--role {role} needs broker.url (amqp://...)")
        else:
            report.add("role", "ok", "single process (no broker.url): channels and turns here")
        return
    shown = role or "gateway+worker (one process; --role gateway|worker splits them)"
    report.add("role", "ok", f"{shown}; {cfg.partitions} partitions")
    from chatfn.common.extras import RABBITMQ, MissingExtra, import_extra
    from chatfn.runtime.broker import Broker

    try:
        broker = Broker(cfg)
    except MissingExtra as exc:
        report.add("broker", "fail", str(exc))
        return

    async def probe() -> None:
        conn = await import_extra(RABBITMQ).connect(cfg.url, timeout=5)
        await conn.close()

    try:
        asyncio.run(probe())
    except Exception as exc:
        report.add("broker", "fail", f"{broker.safe_url}: {type(exc).__name__}: {exc}")
        return
    report.add("broker", "ok", f"RabbitMQ at {broker.safe_url} reachable")


def check_plugins_and_schemas(report: Report, settings: Settings) -> Registry:
    from chatfn.runtime.plugins import plugin_folders
    from function_calls.registry import Registry
    from providers.schema import schema_issues

    registry = Registry()
    active = [p for p in settings.plugins_loaded or () if p.runs(settings)]
    for loaded in active:
        registry.include(loaded.module)
    builtin_count = sum(len(p.specs()) for p in active if p.builtin)
    folders = plugin_folders(settings.plugins.paths, settings.base_dir, settings.plugins_loaded)
    # A folder that gave nothing is almost always a path taken from the wrong place.
    empty = [f for f in folders if not f.exists or f.files == 0]
    report.add(
        "plugins",
        "warn" if empty else "ok",
        f"{'; '.join(f.describe() for f in folders) or 'no plugin path'}; "
        f"{builtin_count} built-in + {len(registry) - builtin_count} plugin function(s)"
        + (" (a plugin folder is missing or has no *.py files)" if empty else ""),
    )
    providers = sorted({"openai", *(m.provider for m in settings.models.values())})
    bad, lossy = [], []
    for spec in registry.all():
        for provider in providers:
            errors, warnings = schema_issues(provider, spec.parameters_schema)
            bad += [f"{spec.name} ({provider}): {p}" for p in errors]
            lossy += [f"{spec.name} ({provider}): {p}" for p in warnings]
    if bad:
        report.add("function schemas", "fail", "; ".join(bad))
    elif lossy:
        report.add("function schemas", "warn", "accepted, but: " + "; ".join(lossy))
    else:
        names = ", ".join(s.name for s in registry.all())
        report.add(
            "function schemas",
            "ok",
            f"{len(registry)} function(s) convert for {', '.join(providers)}: {names}",
        )
    return registry


def check_plugin_status(report: Report, settings: Settings) -> None:
    """Each plugin's status line (on, off, missing key), built-ins first; an installed
    package's metadata (version, chatfn range, permissions); those not loaded, and why."""
    from chatfn.runtime.plugins import PluginMeta

    for loaded in settings.plugins_loaded or ():
        state = loaded.state(settings)
        status: Status = "ok" if state.state == "on" else "warn"
        label = f"built-in {loaded.name}" if loaded.builtin else f"plugin {loaded.name}"
        line = f"{state.state}: {state.detail}" if state.detail else state.state
        if loaded.meta is not None and (loaded.installed or loaded.meta != PluginMeta(loaded.name)):
            line += f" ({loaded.meta.describe()})"
        report.add(label, status, line)
    for name, why in settings.plugins_skipped.items():
        report.add(f"plugin {name}", "warn", f"not loaded: {why}")


def check_plugin_probes(report: Report, settings: Settings, online: bool) -> None:
    """Each running plugin's own lines (`@plugin.check`: the MCP servers' commands, and with
    --online whether each answers)."""
    for loaded in settings.plugins_loaded or ():
        if loaded.plugin is not None and not loaded.switched_off(settings):
            for line in loaded.plugin.checks(settings, online):
                report.add(line.name, line.status, line.detail)


def check_bot(
    report: Report, settings: Settings, registry: Registry, storage: Storage
) -> Bot | None:
    from chatfn.runtime.bot import Bot
    from chatfn.runtime.settings import ConfigError
    from providers.errors import ProviderNotInstalled

    try:
        bot = Bot(
            settings,
            registry=registry,
            storage=storage,
            builtins=False,
            load_plugins=False,
            migrate=False,
        )
    except (ConfigError, ProviderNotInstalled) as exc:
        report.add("router", "fail", str(exc))
        return None
    except Exception as exc:
        report.add("router", "fail", f"{type(exc).__name__}: {exc}")
        return None
    if bot.model is None:
        report.add(
            "model",
            "warn",
            "no model configured: only slash commands work (set "
            "OPENAI_API_KEY or add models: to config.yaml)",
        )
    else:
        cfg = settings.models[bot.model.name]
        where = cfg.base_url or "the provider's endpoint"
        tools = bot.model.capabilities.native_tools
        mode = {
            True: "native tools",
            False: f"prompt tools ({cfg.prompt_format})",
            "auto": "native tools, prompt fallback",
        }[tools]
        report.add(
            "model", "ok", f"{bot.model.name}: {cfg.provider} {cfg.model} at {where}, {mode}"
        )
    check_rule_models(report, settings, bot)
    report.add("router", "ok", f"FunctionCallRouter ready with {len(registry)} function(s)")
    return bot


def check_rule_models(report: Report, settings: Settings, bot: Bot) -> None:
    """Every model a chat may be answered by, beyond the default: those `chats:` rules name,
    `on_exceed` downgrades to, `bot.summary_model`, and every model of each one's fallback
    chain (the default's too). Each must build, or the chats using it would fail on their
    first message, or at the outage it is there for."""
    from chatfn.runtime.settings import ConfigError
    from function_calls.chat_settings import downgrade_models, rule_models
    from providers.errors import ProviderError, ProviderNotInstalled
    from providers.fallback import chain_names

    def fallbacks(name: str) -> list[str]:
        entry = settings.models.get(name)
        return list(entry.fallback) if entry is not None else []

    default = bot.model.name if bot.model is not None else None
    roles: dict[str, str] = {}
    for name in rule_models(settings):
        roles.setdefault(name, "used by chats: rules")
    for name in downgrade_models(settings):
        role = "bot.summary_model" if name == settings.bot.summary_model else "on_exceed"
        roles.setdefault(name, role)
    for start in [default, *list(roles)]:
        if start is not None:
            for name in chain_names(start, fallbacks):
                roles.setdefault(name, f"in the fallback chain of {start}")
    for name, role in roles.items():
        if name == default:
            continue
        try:
            model = bot.model_named(name)
        except (ConfigError, ProviderError, ProviderNotInstalled) as exc:
            report.add(f"model {name}", "fail", f"{role}: {exc}")
            continue
        if model is None:  # not under models:, and no default model stands in
            report.add(f"model {name}", "fail", f"{role}: no such model under models:")
            continue
        cfg = settings.models.get(name)
        where = (cfg.base_url if cfg else None) or "the provider's endpoint"
        report.add(f"model {name}", "ok", f"{role}; {model.model} at {where}")


async def check_online(report: Report, settings: Settings) -> None:
    """One real request per configured model, including one tool-call round trip."""
    from providers.errors import ProviderError
    from providers.factory import build_model
    from providers.types import Message, ToolDefinition

    tool = ToolDefinition(
        "get_magic_number",
        "Returns the magic number. Always call it when asked for the magic number.",
        {"type": "object", "properties": {}},
    )
    for name, cfg in settings.models.items():
        label = f"online {name}"
        try:
            model = build_model(name, cfg)
        except Exception as exc:
            report.add(label, "fail", str(exc))
            continue
        started = time.perf_counter()
        try:
            messages = [Message(role="user", content="What is the magic number? Use the tool.")]
            first = await model.complete(messages, [tool])
            if not first.tool_calls:
                fix = ""
                if model.capabilities.native_tools is not False:
                    # llama-cpp-python's server accepts `tools` and ignores them unless
                    # `tool_choice` is sent, so `native_tools: auto` never downgrades.
                    fix = f"; if its server ignores tools, set `native_tools: false` for {name}"
                report.add(
                    label,
                    "warn",
                    f"answered but did not call the tool ({(first.content or '')[:60]!r}){fix}",
                )
                continue
            messages.append(first.as_message())
            call = first.tool_calls[0]
            messages.append(
                Message(role="tool", tool_call_id=call.id, name=call.name, content="42")
            )
            second = await model.complete(messages, [tool])
            elapsed = (time.perf_counter() - started) * 1000
            mode = (
                "prompt mode (downgraded)"
                if getattr(model, "downgraded", False)
                else ("prompt mode" if model.capabilities.native_tools is False else "native")
            )
            ok = "42" in (second.content or "")
            report.add(
                label,
                "ok" if ok else "warn",
                f"tool round trip in {elapsed:.0f} ms, {mode}; answer "
                f"{(second.content or '')[:60]!r}",
            )
        except ProviderError as exc:
            report.add(label, "fail", f"{type(exc).__name__}: {exc}")
        finally:
            await model.aclose()


async def _awaited(awaitable: Awaitable[T]) -> T:
    """`awaitable` as the coroutine `asyncio.run` takes (a channel's probe is typed Awaitable)."""
    return await awaitable


def check_channels(
    report: Report, settings: Settings, names: list[str] | None, online: bool
) -> None:
    """Each channel's own probe (its spec's `check`): offline its settings, online the
    platform's "who am I". The channels that will run must pass (a ✗ fails the check): those
    named by `--channel`, else those of `channels.run`; and so must every channel whose section
    holds credentials (an operator who wrote a token means to use it). Every other channel with
    a `channels:` section is probed too, and what would stop it is a warning naming the
    `--channel` it concerns (a config may describe channels this process does not run)."""
    from chatfn.runtime.channel_registry import ChannelNotFound, installed_channels

    found = installed_channels()
    run: list[str] | None = getattr(settings.channels, "run", None)
    running = list(names or run or [])
    configured = sorted(n for n in settings.channels.model_fields_set if n != "run")
    wanted = list(dict.fromkeys(running + ([] if names else configured)))
    strict = set(running) | {n for n in wanted if _holds_credentials(settings, n)}

    def add(label: str, status: Status, detail: str, channel: str) -> None:
        if status == "fail" and channel not in strict:
            status, detail = "warn", f"{detail} (needed with --channel {channel})"
        report.add(label, status, detail)

    for name, why in sorted(found.broken.items()):
        if name not in wanted:
            report.add(f"channel {name}", "warn", f"installed but failed to load: {why}")
    for name in wanted:
        try:
            spec = found.get(name)
        except ChannelNotFound as exc:
            report.add(f"channel {name}", "fail", str(exc))
            continue
        missing = [m for m in spec.modules if not _importable(m)]
        if missing:
            how = f'pip install "chatfn[{spec.extra}]"' if spec.extra else "pip install it"
            add(f"channel {name}", "fail", f"{', '.join(missing)} not installed: {how}", name)
            continue
        if spec.check is None:
            report.add(f"channel {name}", "ok", spec.summary or "found")
            continue
        section = _logged_in(settings, name, spec)
        try:
            probes = asyncio.run(_awaited(spec.check(section, online)))
        except Exception as exc:  # a probe that crashes is the channel's bug: shown, not fatal
            add(f"channel {name}", "fail", f"probe failed: {type(exc).__name__}: {exc}", name)
            continue
        for probe in probes:
            add(probe.name or f"channel {name}", probe.status, probe.detail, name)


def _holds_credentials(settings: Settings, name: str) -> bool:
    """Whether the config sets a secret (a SecretStr key) in `channels.<name>`."""
    from pydantic import BaseModel, SecretStr

    section = getattr(settings.channels, name, None)
    if not isinstance(section, BaseModel):
        return False
    return any(
        isinstance(getattr(section, key, None), SecretStr) for key in section.model_fields_set
    )


def _logged_in(settings: Settings, name: str, spec: Any) -> Any:
    """The channel's section, with the login `chatfn login NAME` kept in the database when
    the channel has one (`ChannelSpec.login`): what the channel will connect with."""
    section = getattr(settings.channels, name)
    if spec.login is None:
        return section
    from chatfn.runtime.bot import resolve_storage_url
    from chatfn.storage import channel_state
    from chatfn.storage.db import Storage

    try:
        storage = Storage(resolve_storage_url(settings.storage.url, settings.base_dir))
    except Exception:  # the database's own line says why
        return section
    try:
        kept = channel_state.load(storage.engine, name, spec.login.key)
    except Exception:  # no table yet (migrations pending): no login kept
        kept = None
    finally:
        storage.close()
    return spec.login.apply(section, kept) if kept else section


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def check_console(report: Report, settings: Settings) -> None:
    """With a config file but no console user yet: the first run's one-time link (the running
    bot prints the same one; chatfn/runtime/console/setup.py)."""
    from chatfn.runtime.console import setup

    if settings.config_file is not None and setup.needed(settings):
        url = setup.link(settings, setup.base_url(settings))
        report.add("console", "warn", f"no console user yet: open {url} to create the owner")


def check_voice(report: Report, settings: Settings) -> None:
    """The audio tools `voice:` needs (ffmpeg, the SILK codec, espeak-ng, the AMR encoder for
    WeCom's and DingTalk's spoken replies), each missing one named with what to install
    (chatfn/common/audio.py)."""
    from chatfn.common.audio import AMR_CHANNELS, voice_tools

    stt, tts = settings.voice.stt, settings.voice.tts
    amr = bool(AMR_CHANNELS & settings.channels.model_fields_set)
    lines = voice_tools(stt.enabled, tts.provider, tts.fallback, amr=amr)
    for status, line in lines:
        report.add("voice", "fail" if status == "fail" else "warn", line)
    if not lines and (stt.enabled or tts.provider):
        parts = [f"speech to text by {stt.model}"] if stt.enabled else []
        parts += [f"spoken replies by {tts.provider}"] if tts.provider else []
        report.add("voice", "ok", ", ".join(parts) + "; ffmpeg found")


def run_checks(
    config: str | None,
    online: bool,
    migrate: bool = False,
    role: str | None = None,
    channels: list[str] | None = None,
) -> Report:
    report = Report()
    if not check_imports(report):
        return report
    settings = load_config(report, config)
    if settings is None:
        return report
    storage = check_storage(report, settings, migrate=online and migrate)
    check_broker(report, settings, role)
    registry = check_plugins_and_schemas(report, settings)
    check_plugin_status(report, settings)
    check_plugin_probes(report, settings, online)
    check_console(report, settings)
    check_voice(report, settings)
    if role != "worker":  # a worker holds no channels
        check_channels(report, settings, channels, online)
    if storage is not None and registry is not None:
        bot = check_bot(report, settings, registry, storage)
        if bot is not None:
            asyncio.run(bot.aclose())
    if online:
        if settings.models:
            asyncio.run(check_online(report, settings))
        else:
            report.add("online", "warn", "no model configured: nothing to try online")
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `chatfn check` (and of `python check_system.py`)."""
    parser.add_argument("--config", help="config file (default: ./config.yaml if present)")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument(
        "--online",
        action="store_true",
        help="also make one real request per configured model and list each MCP server's tools",
    )
    parser.add_argument(
        "--migrate",
        action="store_true",
        help="with --online: run pending database migrations (otherwise they are only listed)",
    )
    parser.add_argument(
        "--role", choices=("gateway", "worker"), help="check for this role (chatfn run --role)"
    )
    parser.add_argument(
        "--channel",
        action="append",
        metavar="NAME",
        help="check this channel (repeat for several; default: those configured)",
    )


def command(args: argparse.Namespace) -> int:
    """Print the report; exit 0 only when the bot can really run."""
    from loguru import logger

    logger.remove()  # the table is the output; library warnings would only interleave with it
    report = run_checks(args.config, args.online, args.migrate, args.role, args.channel)
    if args.json:
        print(
            json.dumps(
                {"ok": report.ok, "checks": [asdict(c) for c in report.checks]},
                ensure_ascii=False,
                indent=2,
            )
        )
    else:
        print(report.table())
    return 0 if report.ok else 1
