"""config.yaml: its schema, `${ENV_VAR}` substitution, environment fallbacks, and error messages
that name the key path and what was expected.

The schema is assembled here, in the composition root: the core's sections (`common.config`),
`models:` (`providers.config`), one section per loaded plugin that declares one (built-ins
included), and `channels:`, one key per channel found (chatfn/runtime/channel_registry.py), each
validated by that channel's own settings model. Every section has defaults, so no config file
at all is a valid configuration (console channel, SQLite file, no model). Unknown keys are
errors: a typo must not silently fall back to a default.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, get_args

import yaml
from loguru import logger
from pydantic import BaseModel, Field, PrivateAttr, ValidationError, create_model, field_validator
from pydantic_core import ErrorDetails

from chatfn.common.chat_keys import CORE_CHAT_KEYS, ChatKey
from chatfn.common.config import (
    DEFAULT_SYSTEM_PROMPT,
    RELATIVE_TO_CONFIG,
    ChatMatch,
    ChatRule,
    ConfigError,
    CoreSettings,
    Section,
)
from chatfn.runtime.channel_registry import Channels, installed_channels
from chatfn.runtime.plugin_registry import load_installed
from chatfn.runtime.plugins import (
    LoadedPlugin,
    PluginLoadError,
    check_disabled,
    check_function_names,
    check_sections,
    load_builtins,
    load_plugin_files,
)
from providers.config import ModelConfig

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "ConfigError",
    "Settings",
    "load_settings",
    "parse_settings",
    "resolve_storage_url",
]


class Settings(CoreSettings):
    """The whole configuration. `parse_settings` returns a subclass with one more field per
    plugin section; `plugins_loaded` are the plugin modules it was validated with."""

    models: dict[str, ModelConfig] = Field(default_factory=dict)
    # One field per channel found, each its channel's settings model (`channels_model`).
    channels: Section = Field(default_factory=Section)
    _plugins: list[LoadedPlugin] | None = PrivateAttr(default=None)
    _plugins_skipped: dict[str, str] = PrivateAttr(default_factory=dict)
    _config_file: Path | None = PrivateAttr(default=None)

    @property
    def plugins_loaded(self) -> list[LoadedPlugin] | None:
        return self._plugins

    @property
    def plugins_skipped(self) -> dict[str, str]:
        """Installed plugins not loaded (entry-point name -> why): switched off in config,
        another chatfn range, failed to import."""
        return self._plugins_skipped

    @property
    def config_file(self) -> Path | None:
        """The file these settings were read from (None: no config file, defaults)."""
        return self._config_file

    def chat_model_name(self) -> str | None:
        if self.bot.model:
            return self.bot.model
        return next(iter(self.models), None)


Fields = tuple[tuple[str, type[BaseModel]], ...]
Keys = tuple[tuple[str, Any, str], ...]  # name, type, description


class ChannelSections(Section):
    """`channels:`: one section per channel found (fields added by `settings_class`), and
    `run`, the channels `chatfn run` starts when no `--channel` is given (the flag overrides it;
    unset: the console)."""

    # The channels `chatfn run` starts without `--channel` (["onebot", "http"]); unset: the
    # console.
    run: list[str] | None = None

    @field_validator("run")
    @classmethod
    def _run_names_channels(cls, run: list[str] | None) -> list[str] | None:
        if run is None:
            return None
        known = sorted(n for n in cls.model_fields if n != "run")
        unknown = [n for n in run if n not in known]
        if unknown:
            raise ValueError(
                f"no installed channel named {', '.join(unknown)} (found: {', '.join(known)})"
            )
        return list(dict.fromkeys(run))


@lru_cache(maxsize=64)
def _settings_class(sections: Fields, channels: Fields, keys: Keys = ()) -> type[Settings]:
    fields: dict[str, Any] = {
        name: (model, Field(default_factory=model)) for name, model in sections
    }
    if keys:  # each plugin's per-chat keys: fields of a `chats:` rule, validated as declared
        # The key's description is the field's: the configuration reference shows it.
        optional: dict[str, Any] = {
            name: (Optional[kind], Field(None, description=text or None))  # noqa: UP045
            for name, kind, text in keys
        }
        rule = create_model("ChatRule", __base__=ChatRule, **optional)
        fields["chats"] = (list[rule], Field(default_factory=list))  # type: ignore[valid-type]
    if channels:
        model = create_model(
            "ChannelSettings",
            __base__=ChannelSections,
            **{name: (m, Field(default_factory=m)) for name, m in channels},  # type: ignore[call-overload]
        )
        fields["channels"] = (model, Field(default_factory=model))
    if not fields:
        return Settings
    return create_model("Settings", __base__=Settings, **fields)


def settings_class(plugins: list[LoadedPlugin], channels: Channels | None = None) -> type[Settings]:
    """Settings with a field for each plugin's section and, under `channels:`, one for each
    channel found (cached: the same plugins and channels give the same class, so building
    many bots in one process does not build many classes)."""
    sections = check_sections(plugins, reserved=set(Settings.model_fields))
    key = tuple(
        (name, loaded.plugin.settings)
        for name, loaded in sections.items()
        if loaded.plugin is not None and loaded.plugin.settings is not None
    )
    found = channels if channels is not None else installed_channels()
    keys = tuple((k.name, k.type, k.description) for k in plugin_chat_keys(plugins) if k.rule)
    channel_fields = tuple((n, s.settings) for n, s in sorted(found.specs.items()))
    return _settings_class(key, channel_fields, keys)


def plugin_chat_keys(plugins: list[LoadedPlugin]) -> tuple[ChatKey[Any], ...]:
    """Every loaded plugin's per-chat keys (`Plugin(chat_keys=...)`), in load order; a name
    the core or another plugin declares is a load error naming both."""
    owners = {k.name: "the core" for k in CORE_CHAT_KEYS}
    owners.update(dict.fromkeys(ChatRule.model_fields, "the core"))
    found: list[ChatKey[Any]] = []
    for loaded in plugins:
        for key in loaded.plugin.chat_keys if loaded.plugin is not None else ():
            if key.name in owners:
                raise PluginLoadError(
                    f"plugin {loaded.origin}: the per-chat key {key.name!r} is already "
                    f"{owners[key.name]}'s"
                )
            owners[key.name] = f"plugin {loaded.origin}"
            found.append(key)
    return tuple(found)


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _substitute(value: Any, missing: set[str]) -> Any:
    """Replace `${VAR}` / `${VAR:-default}` in every string; a string that was only an unset
    reference becomes None, so an unset secret reads as "not configured"."""
    if isinstance(value, dict):
        return {k: _substitute(v, missing) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, missing) for v in value]
    if not isinstance(value, str) or "${" not in value:
        return value

    def repl(m: re.Match[str]) -> str:
        env = os.environ.get(m.group(1))
        if env is None or env == "":
            if m.group(2) is not None:
                return m.group(2)
            missing.add(m.group(1))
            return ""
        return env

    out = _ENV_REF.sub(repl, value)
    return None if out == "" else out


def _env_model() -> dict[str, Any] | None:
    """A default model from OPENAI_API_KEY / OPENAI_BASE_URL / CHATFN_MODEL, when any is set."""
    key, url, model = (
        os.environ.get(n) or None for n in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CHATFN_MODEL")
    )
    if not (key or url or model):
        return None
    return {"provider": "openai", "api_key": key, "base_url": url, "model": model or "gpt-4o-mini"}


def _describe(error: ErrorDetails, channels: Channels) -> str:
    path = ".".join(str(p) for p in error["loc"]) or "(top level)"
    msg = error["msg"]
    loc = error["loc"]
    if error["type"] == "extra_forbidden" and len(loc) == 2 and loc[0] == "channels":
        name = str(loc[1])
        if name in channels.broken:
            return f"{path}: channel {name!r} failed to load: {channels.broken[name]}"
        found = ", ".join(channels.names())
        return f"{path}: no channel named {name!r} is installed (found: {found})"
    if error["type"] == "extra_forbidden":
        return (
            f"{path}: unknown key (check its spelling: `chatfn init DIR` writes a config.yaml "
            "listing every key, and docs/reference/config.md describes them)"
        )
    got = error.get("input")
    shown = "***" if any(s in path for s in ("api_key", "token")) else repr(got)[:60]
    return f"{path}: {msg} (got {shown})"


def _plugin_paths(data: dict[str, Any]) -> list[str]:
    """`plugins.paths` read before validation (the plugins decide which sections are valid);
    a malformed value falls back to the default and validation then names it."""
    section = data.get("plugins")
    paths = section.get("paths") if isinstance(section, dict) else None
    if isinstance(paths, list) and all(isinstance(p, str) for p in paths):
        return paths
    return ["plugins"]


def _plugin_choice(data: dict[str, Any]) -> tuple[list[str], list[str]]:
    """`plugins.enabled` and `plugins.disabled` read before validation, as `plugins.paths`."""
    section = data.get("plugins")
    found: list[list[str]] = []
    for key, default in (("enabled", ["*"]), ("disabled", [])):
        value = section.get(key) if isinstance(section, dict) else None
        ok = isinstance(value, list) and all(isinstance(p, str) for p in value)
        found.append(value if ok else default)  # type: ignore[arg-type]
    return found[0], found[1]


def parse_settings(
    data: dict[str, Any] | None,
    base_dir: Path | None = None,
    *,
    plugins: list[LoadedPlugin] | None = None,
) -> Settings:
    """Validate a config mapping. The built-ins and the plugin files of `plugins.paths` are
    imported first (unless `plugins` are given), because their sections are part of the schema.
    Raises ConfigError (naming each bad key) or PluginLoadError."""
    data = dict(data or {})
    _plain_passwords_from_env(data)
    missing: set[str] = set()
    data = _substitute(data, missing)
    if not data.get("models"):
        env_model = _env_model()
        if env_model:
            data["models"] = {"default": env_model}
    base = base_dir if base_dir is not None else Path.cwd()
    data["base_dir"] = base
    skipped: dict[str, str] = {}
    if plugins is None:
        plugins = load_builtins() + load_plugin_files(_plugin_paths(data), base)
        installed = load_installed(*_plugin_choice(data), taken={p.name for p in plugins})
        plugins += installed.loaded
        skipped = installed.skipped
    check_function_names(plugins)
    channels = installed_channels()
    try:
        settings = settings_class(plugins, channels).model_validate(data)
    except ValidationError as exc:
        lines = [_describe(e, channels) for e in exc.errors()]
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines)) from None
    refused = check_disabled(plugins, settings.plugins.disabled)
    if refused is not None:
        raise ConfigError(refused)
    settings._plugins = plugins
    settings._plugins_skipped = skipped
    settings._plugin_chat_keys = plugin_chat_keys(plugins)
    resolve_paths(settings, base)
    storage = settings.storage
    storage.__dict__["url"] = resolve_storage_url(storage.url, base)
    for name, spec in channels.specs.items():
        if spec.adopt is not None:
            spec.adopt(settings, getattr(settings.channels, name))
    for loaded in plugins:  # a plugin's old keys carried over (`@plugin.adopt`)
        if loaded.plugin is not None:
            loaded.plugin.adopt_into(settings)
    _fold_legacy_chat_keys(settings)
    return settings


def _plain_passwords_from_env(data: dict[str, Any]) -> None:
    """`admin.users.NAME.password` is allowed only as an environment reference
    (`${BOB_ADMIN_PASSWORD}`): a password written into the file would sit in every copy and
    backup of it. Read before substitution, when the reference is still visible."""
    admin = data.get("admin")
    users = admin.get("users") if isinstance(admin, dict) else None
    if not isinstance(users, dict):
        return
    for name, user in users.items():
        plain = user.get("password") if isinstance(user, dict) else None
        if isinstance(plain, str) and not _ENV_REF.fullmatch(plain.strip()):
            raise ConfigError(
                f"admin.users.{name}.password: only from the environment "
                f'("${{{str(name).upper()}_ADMIN_PASSWORD}}"); or write password_hash, '
                f"printed by `chatfn admin passwd {name}`"
            )


def resolve_storage_url(url: str, base_dir: Path) -> str:
    """Relative SQLite paths are relative to the config file's directory, not to wherever the
    bot happened to be started from."""
    prefix = "sqlite:///"
    if url.startswith(prefix):
        path = url[len(prefix) :]
        if path and path != ":memory:" and not path.startswith(("/", "file:")):
            return prefix + str((base_dir / path).resolve())
    return url


def _marks_path(annotation: Any) -> bool:
    """Whether a field's type holds `ConfigPath` (alone, optional, in a list or dict)."""
    return any(a is RELATIVE_TO_CONFIG or _marks_path(a) for a in get_args(annotation))


def _absolute(value: Any, base: Path) -> Any:
    if isinstance(value, str) and value:
        path = Path(value).expanduser()
        return value if path.is_absolute() else os.path.normpath(base / path)
    if isinstance(value, list):
        return [_absolute(v, base) for v in value]
    if isinstance(value, dict):
        return {k: _absolute(v, base) for k, v in value.items()}
    return value


def resolve_paths(model: BaseModel, base: Path) -> None:
    """Make every `ConfigPath` setting (core, built-in or plugin section) absolute, relative
    ones taken from `base` (the config file's folder), so what the bot uses, logs and
    check_system prints is the real path, wherever the bot was started from."""
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if RELATIVE_TO_CONFIG in field.metadata or _marks_path(field.annotation):
            # Straight into the instance: the value is the same setting, not one the user set.
            model.__dict__[name] = _absolute(value, base)
            continue
        items = value.values() if isinstance(value, dict) else value
        for item in items if isinstance(value, list | dict) else [value]:
            if isinstance(item, BaseModel):
                resolve_paths(item, base)


def _fold_legacy_chat_keys(settings: Settings) -> None:
    """`function_calls.chats` came before `chats:` rules; it still works, as rules placed
    first (exact chat ids are the most specific match), with a warning naming the new key.
    (A channel's deprecated keys are its spec's `adopt`.)"""
    legacy = settings.function_calls.chats
    if legacy:
        logger.warning(
            "function_calls.chats is deprecated: use chats: [{{match: {{chat_id: ...}}, "
            "functions: {{enabled: [...], disabled: [...]}}}}]"
        )
        rules = [
            ChatRule(match=ChatMatch(chat_id=chat_id), functions=functions)
            for chat_id, functions in legacy.items()
        ]
        settings.chats = rules + settings.chats


def load_settings(path: str | Path | None = None) -> Settings:
    """Read `path` (or ./config.yaml when it exists). Relative paths in it (plugins/, the
    SQLite file) are taken from the config file's directory; with no file at all, from the
    current directory, never from where the package is installed."""
    if path is None:
        candidate = Path("config.yaml")
        if not candidate.exists():
            return parse_settings({}, base_dir=Path.cwd())
        path = candidate
    file = Path(path)
    if not file.exists():
        raise ConfigError(
            f"config file {file} does not exist (`chatfn init` writes one in the current folder)"
        )
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: the top level must be a mapping of sections")
    settings = parse_settings(data, base_dir=file.resolve().parent)
    settings._config_file = file.resolve()
    return settings
