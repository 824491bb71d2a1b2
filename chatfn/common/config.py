"""Core configuration: the sections of config.yaml the framework itself reads.

Features own their settings (a built-in's or plugin's section is a model declared beside its
functions; a channel's `channels.<name>:` section is declared by its package, channels/<name>/);
this module holds only what the core and runtime need, and imports nothing of the project, so
every layer can depend on it.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    IPvAnyNetwork,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)

from chatfn.common.chat_keys import CORE_CHAT_KEYS, AmbientChat, ChatKey, VoiceChat

DEFAULT_SYSTEM_PROMPT = (
    "You are {bot_name}, a helpful assistant in a chat. Answer briefly and in the user's "
    "language. Use the available functions when they fit the request; never claim you did "
    "something a function would do without calling it."
)


class ConfigError(Exception):
    """An invalid configuration; the message lists each bad key path and what was expected."""


#: `json_schema_extra` of a key still accepted (an old config keeps starting) that no longer
#: means anything or was superseded: `chatfn init` and config.yaml.template leave it out, the
#: JSON schema marks it `deprecated`, and a config that sets it still loads.
DEPRECATED: dict[str, Any] = {"deprecated": True}


def is_deprecated(field: Any) -> bool:
    """Whether a pydantic `FieldInfo` is marked with DEPRECATED."""
    extra = getattr(field, "json_schema_extra", None)
    return isinstance(extra, dict) and extra.get("deprecated") is True


class Section(BaseModel):
    """A config section: unknown keys are errors, because a typo must not silently fall back
    to a default. Plugins' settings models may subclass it."""

    model_config = ConfigDict(extra="forbid")


class _RelativeToConfig:
    """Marks a `str` setting as a filesystem path: a relative one is taken from the config
    file's folder (the current folder without a config file), never from where the bot was
    started. `runtime.settings` resolves every marked field after validation."""

    def __repr__(self) -> str:
        return "ConfigPath"


RELATIVE_TO_CONFIG = _RelativeToConfig()
#: A path setting (a folder, a file): relative to the config file's folder. Plugins' sections
#: use it too (`data_dir: ConfigPath = "data/weather"`).
ConfigPath = Annotated[str, RELATIVE_TO_CONFIG]


class FetchSettings(Section):
    """`bot.fetch`: what the bot may fetch for users although it is internal. Every URL a user
    gives (an image, a URL added with `/kb add`) goes through one helper
    (chatfn/common/fetch.py), which refuses loopback, private, link-local, shared, multicast,
    unspecified and reserved addresses after DNS and at every redirect; a deployment whose
    media is internal names it here. Default: nothing internal."""

    # Host names fetched whatever they resolve to: "media.internal", "*.corp.example" (every
    # name under corp.example), or an address as written in URLs ("10.0.0.5").
    allow_hosts: list[str] = Field(default_factory=list)
    # Networks whose addresses are fetched, whatever the name: "10.20.0.0/16", "fd00:1::/64".
    allow_networks: list[IPvAnyNetwork] = Field(default_factory=list)

    @field_validator("allow_hosts")
    @classmethod
    def _host_names(cls, v: list[str]) -> list[str]:
        hosts = [h.strip().lower() for h in v]
        for host in hosts:
            if not host or "/" in host or " " in host:
                raise ValueError(
                    f"{host!r} is not a host name (a network goes under allow_networks)"
                )
        return hosts


class LoopGuardSettings(Section):
    """`bot.loop_guard`: per pair in a chat (this bot and one other account), more than
    `messages` rounds of an exchange (a message that came in after the bot answered its
    sender) within `window` seconds stop it: one notice, then that sender is not answered
    there for `cooldown` seconds. A burst of messages is not an exchange (function_calls/
    loop_guard.py). `messages: 0` turns it off."""

    # Rounds of an exchange with one sender, within `window`, that stop it (0: off).
    messages: int = Field(default=20, ge=0)
    # Seconds over which the rounds are counted.
    window: float = Field(default=60.0, gt=0)
    # Seconds that sender is not answered in that chat once the guard stopped the exchange.
    cooldown: float = Field(default=300.0, ge=0)


class BotSettings(Section):
    """`bot:`: who the bot is and how it answers, in every chat a `chats:` rule does not
    change."""

    # The bot's name: `{bot_name}` in the system prompt, and how members mention it where the
    # platform has no mention of its own.
    name: str = "chatfn"
    # Sender ids (as the platform gives them: QQ numbers, Telegram user ids, ...) that may use
    # admin commands and admin_only functions in every chat.
    admins: list[str] = Field(default_factory=list)
    # The instructions every model request starts with (`{bot_name}` is replaced); a chat's
    # `persona` or `system_prompt` replaces it.
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    # A name under `personas:`; when set it replaces `system_prompt`.
    persona: str | None = None
    # How many earlier messages of the chat a model sees.
    history_size: int = Field(default=20, ge=0, le=500)
    # In groups: answer only when @-mentioned ("at"), every message ("always"), or never.
    respond_in_groups: Literal["at", "always", "never"] = "at"
    # In groups: @-mention the sender in the bot's answers.
    reply_with_mention: bool = True
    # Quote the message being answered (a OneBot reply segment; other channels ignore it).
    reply_with_quote: bool = False
    # A group's owner and admins, as the platform reports them, may use the per-chat admin
    # commands (/model, /persona, /reset, /settings, /stats) in that group only; never
    # admin_only functions, never other chats. Off: only `admins` may.
    trust_group_admins: bool = False
    # Which `models:` entry answers chat and calls functions; default: the first one.
    model: str | None = None
    # IANA zone the bot thinks in ("Europe/Berlin"): the time in the system prompt, and the
    # default for reminders and summaries. None: `reminders.timezone` when set, else the
    # machine's zone.
    timezone: str | None = None
    # Seconds a stopping bot (SIGTERM, SIGINT) gives turns in flight before abandoning them.
    shutdown_grace: float = Field(default=5.0, ge=0)
    # Seconds back a single process looks at start for user messages whose turn a crash cut
    # (stored, addressed to the bot, never finished): each is handled once, in chat order.
    # 0 turns it off.
    resume_window: float = Field(default=600.0, ge=0)
    # Said to a user when no model is configured; None: the catalogue's text in `language`.
    no_model_reply: str | None = None
    # The language of every built-in string (replies, notices, /help, reminders, the web page).
    # A `chats:` rule's `language` overrides it for the chats it matches.
    language: Literal["en", "zh"] = "en"
    # A `models:` entry with `vision: true` that describes images for a chat model without
    # vision; None: such a model gets a short "[image]" note instead.
    vision_model: str | None = None
    # A `models:` entry that writes the summary of a chat's oldest turns when its history no
    # longer fits the chat model's `context_tokens` (README, "Compaction"); None: the chat's
    # own model.
    summary_model: str | None = None
    # Summarise the oldest turns instead of leaving them out when the history no longer fits.
    # Off: the oldest turns are simply not sent (the behaviour before compaction).
    compaction: bool = True
    # Internal hosts and networks the bot may fetch for users (images, knowledge URLs).
    fetch: FetchSettings = Field(default_factory=FetchSettings)
    # Seconds a message may wait for its turn (a model or a channel busy) before its sender
    # gets one short notice that it is waiting (README, "Every message's fate"). 0: never.
    held_notice_after: float = Field(default=60.0, ge=0)
    # Stops two senders (two bots) answering each other forever (README, "Loop guard").
    loop_guard: LoopGuardSettings = Field(default_factory=LoopGuardSettings)
    # Seconds a call of an `approval` function waits for an approver's answer before it
    # expires and the model is told it was refused (a function's `approval_timeout` wins).
    approval_timeout: float = Field(default=600.0, gt=0)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str | None) -> str | None:
        return check_zone(v)


class ChatFunctionRules(Section):
    """Per-chat override: which functions this chat may use."""

    # Names or fnmatch patterns allowed here (None or empty: every function the top-level
    # lists allow).
    enabled: list[str] | None = None
    # Names or fnmatch patterns not allowed here; wins over `enabled`.
    disabled: list[str] = Field(default_factory=list)


class ChatMatch(Section):
    """Which chats a `chats:` rule applies to; every key given must fit (none given: all)."""

    # The channel's platform name ("onebot", "telegram", "qq", ...).
    platform: str | None = None
    # Exact ("group:123456") or with * wildcards ("group:*").
    chat_id: str | None = None
    # true: group chats only; false: private chats only.
    is_group: bool | None = None

    def fits(self, platform: str, chat_id: str, is_group: bool) -> bool:
        """Whether a chat is one this rule is for (every key given must fit)."""
        if self.platform is not None and self.platform != platform:
            return False
        if self.is_group is not None and self.is_group != is_group:
            return False
        if self.chat_id is not None:
            if "*" in self.chat_id:
                return fnmatchcase(chat_id, self.chat_id)
            return self.chat_id == chat_id
        return True


class DowngradeTo(Section):
    """`on_exceed: {downgrade_to: MODEL}`: over a cost or token budget, the chat goes on with
    the cheaper MODEL instead of being refused."""

    # The `models:` entry that answers while the chat is over its budget.
    downgrade_to: str


# What happens over a cost or token budget: "refuse" (the message gets the limit notice) or a
# downgrade to a cheaper model. Other limits (messages per minute, model calls) always refuse.
OnExceed = Literal["refuse"] | DowngradeTo


class ChatRule(Section):
    """One entry of `chats:`: the settings it names apply to the chats it matches. A setting it
    leaves out falls through to the next matching rule, then to `bot:`."""

    match: ChatMatch = Field(default_factory=ChatMatch)
    # A `models:` entry answering in these chats (else `bot.model`).
    model: str | None = None
    # A name under `personas:` used as the system prompt here (not with `system_prompt`).
    persona: str | None = None
    # The system prompt in these chats, as free text (not with `persona`).
    system_prompt: str | None = None
    # Earlier messages a model sees in these chats (else `bot.history_size`).
    history_size: int | None = Field(default=None, ge=0, le=500)
    # In these groups: answer when mentioned ("at"), every message, or never.
    respond_in_groups: Literal["at", "always", "never"] | None = None
    # In these groups: @-mention the sender in the bot's answers.
    reply_with_mention: bool | None = None
    # Quote the message being answered (where the platform can).
    reply_with_quote: bool | None = None
    # Which functions these chats may use (narrows `function_calls.enabled` / `disabled`).
    functions: ChatFunctionRules | None = None
    # The language of built-in strings in these chats (else `bot.language`).
    language: Literal["en", "zh"] | None = None
    # Over a cost or token budget in these chats (else `limits.on_exceed`).
    on_exceed: OnExceed | None = None
    # Voice in these chats: `{stt: false}` leaves voice messages untranscribed, `tts`.
    voice: VoiceChat | None = None
    # Answer messages from accounts the platform marks as bots (off: they are not answered).
    answer_bots: bool | None = None
    # In groups: what members said without addressing the bot, shown to the model as
    # background chatter when it is addressed (`{enabled: false}` hides it).
    ambient: AmbientChat | None = None
    # A plugin's per-chat keys (`Plugin(chat_keys=...)`) are fields of the runtime's subclass
    # of this model (chatfn/runtime/settings.py), so a bad value names `chats[i].<key>`.

    @model_validator(mode="after")
    def _one_prompt(self) -> ChatRule:
        if self.persona is not None and self.system_prompt is not None:
            raise ValueError("set persona or system_prompt, not both")
        return self

    def get(self, name: str) -> Any:
        """The value this rule names for a per-chat key (None: it does not name it)."""
        return getattr(self, name, None)


class SttSettings(Section):
    """`voice.stt`: speech to text through an OpenAI-compatible `/audio/transcriptions` API
    (OpenAI, Groq, SiliconFlow, a local faster-whisper or whisper.cpp server). No `model`:
    voice messages are not transcribed (the history notes that one came)."""

    # The API's base URL ("https://api.openai.com/v1", "http://127.0.0.1:8000/v1").
    base_url: str | None = None
    # The API's key (`${VAR}` keeps it out of the file); None for a local server.
    api_key: SecretStr | None = None
    # The transcription model ("whisper-1", "whisper-large-v3"); None: no STT.
    model: str | None = None
    # The language spoken, as a hint (ISO 639-1: "en", "zh"); None: the model detects it.
    language: str | None = None
    # Longer voice messages are not transcribed: the user gets one short sentence instead.
    max_seconds: float = Field(default=120.0, gt=0, le=3600)
    # Seconds for one transcription request (the download has its own bound).
    timeout: float = Field(default=60.0, gt=0)
    # The largest audio file downloaded, in bytes.
    max_bytes: int = Field(default=20 * 1024 * 1024, ge=1024)
    # Currency units per minute of audio (as `models.<name>.price`): the cost of its usage
    # rows (model_name "voice.stt"), counted against `limits` cost_per_day. None: no cost.
    price_per_minute: float | None = Field(default=None, ge=0)

    @property
    def enabled(self) -> bool:
        return self.model is not None


class TtsSettings(Section):
    """`voice.tts`: speaking replies. `openai`: an OpenAI-compatible `/audio/speech` API
    (`base_url`, `api_key`, `model`, `voice`); `local`: espeak-ng from the system, no key.
    No `provider`: no spoken replies."""

    # `openai` (an OpenAI-compatible speech API) or `local` (espeak-ng); None: no spoken replies.
    provider: Literal["openai", "local"] | None = None
    # The speech API's base URL (`openai`); None: OpenAI's.
    base_url: str | None = None
    # The speech API's key (`openai`).
    api_key: SecretStr | None = None
    # The speech model ("tts-1", "gpt-4o-mini-tts") and its voice ("alloy"); for `local`,
    # `voice` is an espeak-ng voice ("en", "zh", "en-us+f3").
    model: str | None = None
    # The voice: the API's ("alloy") or an espeak-ng voice for `local`.
    voice: str | None = None
    # Another provider tried when this one fails ("local").
    fallback: Literal["openai", "local"] | None = None
    # A longer reply is sent as text only, or (`over_max_chars: summarise`) the chat's model
    # shortens it to `max_chars` for speaking and the text says so.
    max_chars: int = Field(default=500, ge=1)
    # Over `max_chars`: send the text alone ("text"), or speak a shortened version
    # ("summarise").
    over_max_chars: Literal["text", "summarise"] = "text"
    # Currency units per million characters spoken: the cost of its usage rows (model_name
    # "voice.tts"), counted against `limits` cost_per_day. None: no cost.
    price_per_million_chars: float | None = Field(default=None, ge=0)
    # Seconds for one speech request.
    timeout: float = Field(default=60.0, gt=0)

    @model_validator(mode="after")
    def _openai_needs_model(self) -> TtsSettings:
        if self.provider == "openai" and not self.model:
            raise ValueError("provider openai needs model (e.g. tts-1)")
        return self


class VoiceSettings(Section):
    """`voice:`: voice messages in (speech to text) and spoken replies out."""

    stt: SttSettings = Field(default_factory=SttSettings)
    tts: TtsSettings = Field(default_factory=TtsSettings)


class LimitValues(Section):
    """Counts one user (or one chat) may reach; None: no limit."""

    # Messages that reach a model, per minute.
    messages_per_minute: int | None = Field(default=None, ge=1)
    # Model requests per day (in `bot.timezone`), function-made ones included.
    model_calls_per_day: int | None = Field(default=None, ge=1)
    # Prompt plus completion tokens per day, as the provider reports them.
    tokens_per_day: int | None = Field(default=None, ge=1)
    # Money per day (currency units, as `models.<name>.price`): the cost of the usage rows.
    cost_per_day: float | None = Field(default=None, gt=0)


class LimitSettings(Section):
    """`limits:`: how much one user and one chat may use (all off by default); counted in the
    database, in fixed windows."""

    # What each sender may use (across chats).
    per_user: LimitValues = Field(default_factory=LimitValues)
    # What each chat may use (all its members together).
    per_chat: LimitValues = Field(default_factory=LimitValues)
    # Over `tokens_per_day` or `cost_per_day`: refuse, or go on with a cheaper model
    # (`{downgrade_to: MODEL}`); a `chats:` rule's `on_exceed` overrides it.
    on_exceed: OnExceed = "refuse"
    # Admins (bot.admins) are never limited.
    exempt_admins: bool = True


class FunctionCallSettings(Section):
    """`function_calls:`: which functions the bot offers, and the bounds of one message's tool
    loop."""

    # None: every registered function; a list: only these.
    enabled: list[str] | None = None
    # Names or fnmatch patterns never offered; wins over `enabled`.
    disabled: list[str] = Field(default_factory=list)
    # Keyed by chat id. Deprecated: `chats: [{match: {chat_id: ...}, functions: ...}]`.
    chats: dict[str, ChatFunctionRules] = Field(default_factory=dict, json_schema_extra=DEPRECATED)
    # Model requests one message may make in its tool loop (each may call functions).
    max_rounds: int = Field(default=5, ge=1, le=50)
    # Function calls one message may make in all.
    max_calls_per_message: int = Field(default=10, ge=1, le=100)
    # Failed attempts (invalid arguments, errors) one function may have per message.
    retries_per_call: int = Field(default=2, ge=0, le=10)
    # Seconds for one handler that declares no `timeout` of its own.
    call_timeout: float = Field(default=30.0, gt=0)
    # Seconds for the whole tool loop of one message, model calls included.
    total_timeout: float = Field(default=120.0, gt=0)
    # Characters of one tool result sent back to the model.
    max_result_chars: int = Field(default=4000, ge=100)


class OutboxSettings(Section):
    """Every message the bot sends waits in the outbox table until a channel took it."""

    # Seconds a message may wait for its channel (no OneBot account online, no /v1/events
    # subscriber, a webhook that keeps failing) before it is logged and counted as expired.
    max_wait: float = Field(default=86400.0, gt=0)
    # The longest wait a platform may ask for (a 429's retry_after) that is waited out inside
    # one delivery, in the chat's order; a longer one leaves the message here until it has
    # passed (chatfn/runtime/delivery_policy.py). `channels.<name>.max_retry_after` overrides
    # it for one platform.
    max_retry_after: float = Field(default=60.0, ge=0)
    # Seconds delivered and expired rows are kept (for `Last-Event-ID` replays), then deleted.
    retention: float = Field(default=7 * 86400.0, gt=0)
    # Seconds an event reader (a /v1/events stream, the webhook) waits for a missing event id
    # before passing it: with several processes writing, commit order is not id order, so a
    # lower id can still be committing; one rolled back never appears.
    gap_wait: float = Field(default=5.0, ge=0)


class StorageSettings(Section):
    """`storage:`: the database of history, usage, reminders and the outbox."""

    # SQLAlchemy URL: sqlite:///FILE (relative: to the config file's folder) or
    # postgresql+psycopg://user:password@host/db (the `postgres` extra).
    url: str = "sqlite:///data/chatfn.db"
    # Seconds a write keeps retrying while another process holds the database lock.
    busy_retry: float = Field(default=30.0, ge=0)
    outbox: OutboxSettings = Field(default_factory=OutboxSettings)


class BrokerSettings(Section):
    """The message broker that splits the bot into a gateway and workers (README, "Running more
    than one process"). No url: one process, no broker."""

    # amqp://user:password@host:5672/vhost (RabbitMQ)
    url: str | None = None
    # Incoming messages are routed by chat to one of this many queues, each consumed by one
    # worker at a time (per-chat order). Every process of a deployment must use the same
    # number; more partitions spread chats more evenly over more workers.
    partitions: int = Field(default=16, ge=1, le=1024)
    # Seconds within which the chats of a worker that died, vanished or stopped (SIGKILL, a
    # machine lost, SIGSTOP) are taken by another worker (their turns then run there): sets
    # the AMQP heartbeat (a quarter of it; RabbitMQ gives up after two to three), how long a
    # silent worker keeps its partitions, and (half of it) how long a worker's PostgreSQL
    # transaction may wait for its client before the server ends it.
    redelivery_timeout: float = Field(default=30.0, ge=2)
    # Name prefix of the queues, so several bots (or test runs) can share one broker.
    prefix: str = Field(default="chatfn", pattern=r"^[A-Za-z0-9_.-]{1,64}$")

    @field_validator("url")
    @classmethod
    def _amqp_url(cls, v: str | None) -> str | None:
        if v and not v.startswith(("amqp://", "amqps://")):
            raise ValueError("must be an amqp:// or amqps:// URL (RabbitMQ)")
        return v or None


class BreakerSettings(Section):
    """`plugins.breaker`: a plugin that keeps failing is switched off for a while, so it does
    not fail every message."""

    # A plugin whose functions or hooks fail (raise, time out) `failures` times within
    # `window` seconds is switched off for `cooldown` seconds (chatfn/runtime/plugin_breaker.py).
    failures: int = Field(default=5, ge=1)
    # Seconds over which the failures are counted.
    window: float = Field(default=60.0, gt=0)
    # Seconds a plugin stays switched off before it is tried again.
    cooldown: float = Field(default=300.0, gt=0)
    # Chats told when a plugin is switched off ("platform:chat_id", e.g. "telegram:12345").
    # Empty: the private chat each of `bot.admins` last wrote to the bot from; the console's
    # audit and Plugins page show it either way.
    notify: list[str] = Field(default_factory=list)

    @field_validator("notify")
    @classmethod
    def _chats(cls, v: list[str]) -> list[str]:
        for target in v:
            platform, _, chat = target.partition(":")
            if not platform or not chat:
                raise ValueError(f"{target!r} is not platform:chat_id")
        return v


class PluginSettings(Section):
    """`plugins:`: where plugin files are, which installed plugin packages load, and how."""

    # Folders (every *.py not starting with _) or single files; relative: to the config file.
    paths: list[ConfigPath] = Field(default_factory=lambda: ["plugins"])
    # Installed plugin packages (entry-point group `chatfn.plugins`) to load, by entry-point
    # or distribution name, globs allowed; `disabled` wins over `enabled`.
    enabled: list[str] = Field(default_factory=lambda: ["*"])
    # Installed plugin packages not to load, and built-ins and plugin files (by plugin or
    # file name) to switch off (`[reminders]`), names or globs; `help` is always on (naming it
    # is an error; a glob passes it by).
    disabled: list[str] = Field(default_factory=list)
    # How long a plugin's start-up hook may take; one that raises or overruns is switched off.
    startup_timeout: float = Field(default=30.0, gt=0)
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    # Where `chatfn plugin install` finds packages: pip's --index-url, or a local folder of
    # wheels (--find-links, no index). Empty: pip's own configuration.
    package_index: str | None = None
    # What installs and removes plugin packages: `uv` (uv pip, much faster), `pip`, or `auto`
    # (uv where it is on PATH, else pip); the dry run whose changes are checked runs on it too.
    installer: Literal["auto", "pip", "uv"] = "auto"
    # The plugin market's index, a JSON document (plugins/index.schema.json), a URL or a path;
    # unset: the project's own plugins/index.json, as the installed chatfn ships it (read
    # offline). Installs from the console and the command line check hashes against it.
    index_url: str | None = None


class LoggingSettings(Section):
    """`logging:`: the log's level, file and format (secrets are always masked)."""

    # The lowest level logged; DEBUG logs each model request in a line, TRACE their bodies.
    level: Literal["TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR"] = "INFO"
    # Also log to this file; relative: to the config file's folder.
    file: ConfigPath | None = None
    # "json": one JSON object per line (loguru's serializer), chat and message ids as fields.
    format: Literal["text", "json"] = "text"


# `chatfn admin passwd USER` prints one: scrypt$N$r$p$<salt base64>$<key base64>.
PASSWORD_HASH = r"^scrypt\$\d+\$\d+\$\d+\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$"


class AdminUser(Section):
    """One login of the web admin console (`admin.users.NAME`)."""

    # From `chatfn admin passwd NAME`; the password itself is never stored.
    password_hash: str | None = Field(default=None, pattern=PASSWORD_HASH)
    # A plain password, only from the environment (`${NAME_ADMIN_PASSWORD}`): a start-up
    # warning says to use `password_hash`.
    password: SecretStr | None = None
    # `platform:chat_id` patterns (`*`, `?`) of the chats this user sees and changes; None:
    # every chat, and the bot-wide pages (plugins, config check, logs of every chat).
    chats: list[str] | None = None
    # `owner`: may also change the models, channels and config from the console (the first
    # user, made by the first-run link, is one); `admin`: everything else.
    role: Literal["owner", "admin"] = "admin"

    @model_validator(mode="after")
    def _one_secret(self) -> AdminUser:
        if (self.password_hash is None) == (self.password is None):
            raise ValueError("give one of password_hash (chatfn admin passwd NAME) and password")
        if self.chats is not None and not all(p.strip() for p in self.chats):
            raise ValueError("chats: empty pattern (write platform:chat_id, e.g. telegram:-100*)")
        return self


class AdminSettings(Section):
    """The web admin console on the HTTP channel's port (`/admin/`), on when a user is set."""

    users: dict[str, AdminUser] = Field(default_factory=dict)
    # Hours a login lasts.
    session_hours: float = Field(default=12.0, gt=0, le=24 * 90)
    # Whether the console's plugin market may install, upgrade and remove plugin packages
    # (owners only, hashes the plugins.index_url lists only, each action audited).
    allow_plugin_install: bool = False


def check_zone(value: str | None) -> str | None:
    """Validator body for time-zone settings: an IANA name or None."""
    if value:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone {value!r} (use an IANA name such as 'Europe/Berlin')"
            ) from None
    return value or None


def zone_named(name: str | None) -> ZoneInfo:
    """The configured zone, or the machine's (tzlocal) when none is configured."""
    if name:
        return ZoneInfo(name)
    from tzlocal import get_localzone_name

    try:
        return ZoneInfo(get_localzone_name() or "UTC")
    except Exception:  # an odd /etc/localtime should not stop the bot; UTC is explicit
        return ZoneInfo("UTC")


S = TypeVar("S", bound=BaseModel)


class CoreSettings(Section):
    """The framework's own sections. The runtime's `Settings` extends it with `models:` and one
    section per loaded plugin (built-ins included); handlers read a plugin's section through
    `section(SettingsModel)`, typed, without knowing the config file's shape."""

    bot: BotSettings = Field(default_factory=BotSettings)
    function_calls: FunctionCallSettings = Field(default_factory=FunctionCallSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    broker: BrokerSettings = Field(default_factory=BrokerSettings)
    plugins: PluginSettings = Field(default_factory=PluginSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    # Named system prompts, for `bot.persona`, `chats[].persona` and `/persona NAME`.
    personas: dict[str, str] = Field(default_factory=dict)
    # Per-chat settings: the first matching rule naming a setting decides it, else `bot:`.
    chats: list[ChatRule] = Field(default_factory=list)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    # Voice messages in (speech to text) and spoken replies (text to speech).
    voice: VoiceSettings = Field(default_factory=VoiceSettings)
    # The web admin console (chatfn/channels/http/admin, docs/admin-api.md).
    admin: AdminSettings = Field(default_factory=AdminSettings)
    # Directory relative paths (plugins, SQLite files) are resolved against: the config file's
    # directory, or the current directory when there is no config file.
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)
    # The plugins' per-chat keys (set by the runtime with the plugins it validated with).
    _plugin_chat_keys: tuple[ChatKey[Any], ...] = PrivateAttr(default=())

    @property
    def chat_keys(self) -> tuple[ChatKey[Any], ...]:
        """Every per-chat key: the core's, then each loaded plugin's (common/chat_keys.py)."""
        return CORE_CHAT_KEYS + self._plugin_chat_keys

    def section(self, model: type[S]) -> S:
        """The validated section whose model is `model`; its defaults when the config has no
        such section (a plugin loaded outside the config, e.g. in a test)."""
        for name in type(self).model_fields:
            value = getattr(self, name)
            if type(value) is model:
                return value
        return model()
