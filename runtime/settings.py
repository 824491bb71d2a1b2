"""config.yaml: its schema, `${ENV_VAR}` substitution, environment fallbacks, and error messages
that name the key path and what was expected.

Every section has defaults, so no config file at all is a valid configuration (console channel,
SQLite file, no model). Unknown keys are errors: a typo must not silently fall back to a default.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from providers.config import ModelConfig

DEFAULT_SYSTEM_PROMPT = (
    "You are {bot_name}, a helpful assistant in a chat. Answer briefly and in the user's "
    "language. Use the available functions when they fit the request; never claim you did "
    "something a function would do without calling it."
)


class ConfigError(Exception):
    """An invalid configuration; the message lists each bad key path and what was expected."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BotSettings(_Section):
    name: str = "chatfn"
    admins: list[str] = Field(default_factory=list)
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    # How many earlier messages of the chat a model sees.
    history_size: int = Field(default=20, ge=0, le=500)
    # In groups: answer only when @-mentioned ("at"), every message ("always"), or never.
    respond_in_groups: Literal["at", "always", "never"] = "at"
    # Which `models:` entry answers chat and calls functions; default: the first one.
    model: str | None = None
    # Said once to a user when no model is configured.
    no_model_reply: str = (
        "No model is configured, so I can only run slash commands (try /help). Set "
        "OPENAI_API_KEY (and OPENAI_BASE_URL / CHATFN_MODEL) or add a `models:` entry "
        "to config.yaml."
    )


class ChatFunctionRules(_Section):
    """Per-chat override: which functions this chat may use."""

    enabled: list[str] | None = None
    disabled: list[str] = Field(default_factory=list)


class FunctionCallSettings(_Section):
    # None: every registered function; a list: only these.
    enabled: list[str] | None = None
    disabled: list[str] = Field(default_factory=list)
    # Keyed by chat id.
    chats: dict[str, ChatFunctionRules] = Field(default_factory=dict)
    max_rounds: int = Field(default=5, ge=1, le=50)
    max_calls_per_message: int = Field(default=10, ge=1, le=100)
    # Failed attempts (invalid arguments, errors) one function may have per message.
    retries_per_call: int = Field(default=2, ge=0, le=10)
    # Seconds for one handler when its own `timeout` is not set lower.
    call_timeout: float = Field(default=30.0, gt=0)
    # Seconds for the whole tool loop of one message, model calls included.
    total_timeout: float = Field(default=120.0, gt=0)
    # Characters of one tool result sent back to the model.
    max_result_chars: int = Field(default=4000, ge=100)


class StorageSettings(_Section):
    url: str = "sqlite:///data/chatfn.db"


class PluginSettings(_Section):
    paths: list[str] = Field(default_factory=lambda: ["plugins"])


class ConsoleSettings(_Section):
    user: str = "you"
    prompt: str = "> "


class HttpSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    token: str | None = None
    webhook_url: str | None = None

    @field_validator("token")
    @classmethod
    def _empty_token_is_none(cls, v: str | None) -> str | None:
        return v or None


class OneBotSettings(_Section):
    """OneBot v11 reverse WebSocket: the implementation (NapCat, LLOneBot, Lagrange) connects to
    ws://host:port/onebot/v11/ws."""

    host: str = "127.0.0.1"
    port: int = Field(default=8081, ge=0, le=65535)
    # When set, a connection must present it (Authorization: Bearer, or ?access_token=).
    access_token: str | None = None
    # Friend requests: accept them (set_friend_add_request) or leave them pending.
    friend_requests: Literal["approve", "ignore"] = "ignore"
    # Longer replies are split on line boundaries into parts of at most this many characters.
    max_message_length: int = Field(default=3000, ge=50)
    # Per chat: messages per second after a burst of `send_burst`; 0 disables the limit.
    send_rate: float = Field(default=1.0, ge=0)
    send_burst: int = Field(default=3, ge=1)
    # Seconds to wait for the answer to one action (send_group_msg, get_msg, ...).
    action_timeout: float = Field(default=10.0, gt=0)
    # Seconds a send waits for a bot account whose connection dropped to come back.
    reconnect_wait: float = Field(default=10.0, ge=0)
    # Messages kept for resending when a bot account reconnects, and for how many seconds.
    resend_queue: int = Field(default=100, ge=0)
    resend_max_age: float = Field(default=600.0, gt=0)
    # Quote the user's message (a reply segment) in the bot's answer.
    quote_replies: bool = False

    @field_validator("access_token")
    @classmethod
    def _empty_token_is_none(cls, v: str | None) -> str | None:
        return v or None


class ChannelSettings(_Section):
    console: ConsoleSettings = Field(default_factory=ConsoleSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    onebot: OneBotSettings = Field(default_factory=OneBotSettings)


class LoggingSettings(_Section):
    level: Literal["TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR"] = "INFO"
    file: str | None = None


class ReminderSettings(_Section):
    enabled: bool = True
    # IANA zone for times users and the model write ("Europe/Berlin"); None: the machine's.
    timezone: str | None = None
    # Seconds after its due time that a reminder missed while the bot was down is still
    # delivered (late, with a note); older ones are reported as missed instead.
    grace_period: float = Field(default=3600.0, ge=0)
    # Active reminders one user may have at a time.
    max_per_user: int = Field(default=20, ge=1, le=10000)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str | None) -> str | None:
        if v:
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                ZoneInfo(v)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    f"unknown time zone {v!r} (use an IANA name such as 'Europe/Berlin')"
                ) from None
        return v or None


class WebSearchSettings(_Section):
    enabled: bool = True
    # Without a key the web_search function is not offered to the model.
    api_key: SecretStr | None = None
    base_url: str = "https://api.perplexity.ai"
    model: str = "sonar"
    # Who may search: empty lists mean everyone; admins always may.
    allowed_groups: list[str] = Field(default_factory=list)
    allowed_users: list[str] = Field(default_factory=list)
    timeout: float = Field(default=60.0, gt=0)


class SummarySettings(_Section):
    enabled: bool = True
    # Messages summarised when the user names no count or window, and the most ever read.
    default_messages: int = Field(default=50, ge=1)
    max_messages: int = Field(default=300, ge=1)
    # Upper bound on the transcript sent to the model (characters); long messages are cut.
    max_prompt_chars: int = Field(default=12000, ge=500)
    max_message_chars: int = Field(default=400, ge=20)


class WelcomeSettings(_Section):
    enabled: bool = True
    # Per group chat id; `{name}` is replaced by the new member's name.
    messages: dict[str, str] = Field(default_factory=dict)
    # For groups without their own message; null: say nothing there.
    default: str | None = "Welcome! Send /help to see what I can do."


class Settings(_Section):
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    bot: BotSettings = Field(default_factory=BotSettings)
    function_calls: FunctionCallSettings = Field(default_factory=FunctionCallSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    plugins: PluginSettings = Field(default_factory=PluginSettings)
    channels: ChannelSettings = Field(default_factory=ChannelSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    reminders: ReminderSettings = Field(default_factory=ReminderSettings)
    web_search: WebSearchSettings = Field(default_factory=WebSearchSettings)
    summary: SummarySettings = Field(default_factory=SummarySettings)
    welcome: WelcomeSettings = Field(default_factory=WelcomeSettings)
    # Directory relative paths (plugins, SQLite files) are resolved against.
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)

    def chat_model_name(self) -> str | None:
        if self.bot.model:
            return self.bot.model
        return next(iter(self.models), None)


PROJECT_ROOT = Path(__file__).resolve().parent.parent

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


def _describe(error: dict[str, Any]) -> str:
    path = ".".join(str(p) for p in error["loc"]) or "(top level)"
    msg = error["msg"]
    if error["type"] == "extra_forbidden":
        return f"{path}: unknown key (check the spelling against config.yaml.template)"
    got = error.get("input")
    shown = "***" if any(s in path for s in ("api_key", "token")) else repr(got)[:60]
    return f"{path}: {msg} (got {shown})"


def parse_settings(data: dict[str, Any] | None, base_dir: Path | None = None) -> Settings:
    data = dict(data or {})
    missing: set[str] = set()
    data = _substitute(data, missing)
    if not data.get("models"):
        env_model = _env_model()
        if env_model:
            data["models"] = {"default": env_model}
    if base_dir is not None:
        data["base_dir"] = base_dir
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        lines = [_describe(e) for e in exc.errors()]
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines)) from None


def load_settings(path: str | Path | None = None) -> Settings:
    """Read `path` (or ./config.yaml when it exists); no file means all defaults, with relative
    paths (plugins/, data/) taken from the project directory."""
    if path is None:
        candidate = Path("config.yaml")
        if not candidate.exists():
            return parse_settings({}, base_dir=PROJECT_ROOT)
        path = candidate
    file = Path(path)
    if not file.exists():
        raise ConfigError(f"config file {file} does not exist (copy config.yaml.template)")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: the top level must be a mapping of sections")
    return parse_settings(data, base_dir=file.resolve().parent)
