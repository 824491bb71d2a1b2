"""Each chat's effective settings: an admin's override from the chat, else the first `chats:`
rule that matches and names the setting, else `bot:` (or the built-in default).

Resolved once per message from the config and that chat's overrides, so switching one chat's
model or persona can never change another chat's: nothing here is shared or mutated.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase as fnmatch
from typing import Any, TypeVar

from chatfn.common.chat_keys import ChatKey, override_keys, replan_keys
from chatfn.common.config import (
    DEFAULT_SYSTEM_PROMPT,
    ChatFunctionRules,
    ChatMatch,
    ChatRule,
    ConfigError,
    CoreSettings,
    DowngradeTo,
    LimitSettings,
    LimitValues,
)
from chatfn.common.messages import IncomingMessage
from chatfn.storage.chat_state import Override

T = TypeVar("T")

# The per-chat keys are declared once (chatfn/common/chat_keys.py: the core's, and each
# plugin's `Plugin(chat_keys=...)`); `config.chat_keys` is every one of them. Which of them
# an admin may override and which make a turn be planned again is read from there
# (`override_keys`, `replan_keys`); `reset` is the mark `/reset` and the console leave.


@dataclass(slots=True)
class ChatSettings:
    """What applies in one chat now, and where each value comes from (for `/settings`)."""

    model: str | None  # a key under `models:`; None: the bot has no model
    system_prompt: str
    persona: str | None  # the persona's name when the prompt is a named one
    history_size: int
    respond_in_groups: str
    reply_with_mention: bool
    reply_with_quote: bool
    language: str = "en"  # of built-in strings: "en" or "zh"
    # The allow-list shown by /settings (the rule's, else function_calls.enabled); None: all.
    functions_enabled: list[str] | None = None
    functions_disabled: list[str] = field(default_factory=list)
    # History before this stored message id is not shown to the model (`/reset`).
    reset_after: int | None = None
    # Over a cost or token budget: "refuse", or the model to go on with.
    on_exceed: str | DowngradeTo = "refuse"
    sources: dict[str, str] = field(default_factory=dict)
    # Every allow-list that applies (function_calls.enabled, the rule's): a function must
    # match each of them.
    allow_lists: list[list[str]] = field(default_factory=list)
    # The limits that apply here: `limits:`, with a chat's override (the admin console's).
    limits: LimitSettings = field(default_factory=LimitSettings)
    # Every per-chat key in force (the core's, then the plugins'), and the plugins' values
    # (`get`): an override, else the first rule naming it, else the key's default.
    keys: tuple[ChatKey[Any], ...] = ()
    values: dict[str, Any] = field(default_factory=dict)

    def get(self, key: ChatKey[T]) -> T:
        """A plugin's per-chat key's value in this chat (its default where nothing names it:
        a key of a plugin this bot did not load)."""
        return self.values[key.name] if key.name in self.values else key.default

    @property
    def downgrade_to(self) -> str | None:
        """The model a chat over its budget goes on with; None: it is refused."""
        return self.on_exceed.downgrade_to if isinstance(self.on_exceed, DowngradeTo) else None

    def function_allowed(self, name: str) -> bool:
        """`disabled` and `enabled` hold names or fnmatch patterns (`web_*`, `*`); an absent or
        empty `enabled` is no allow-list."""
        return _allowed(name, self.functions_disabled, self.allow_lists)


def _allowed(name: str, disabled: list[str], allow_lists: list[list[str]]) -> bool:
    if any(fnmatch(name, p) for p in disabled):
        return False
    return all(any(fnmatch(name, p) for p in allowed) for allowed in allow_lists)


def matches(match: ChatMatch, msg: IncomingMessage) -> bool:
    return match.fits(msg.platform, msg.chat_id, msg.is_group)


def _first(
    rules: list[tuple[int, ChatRule]], attr: str, default: Any, default_source: str
) -> tuple[Any, str]:
    for index, rule in rules:
        value = getattr(rule, attr)
        if value is not None:
            return value, f"chats[{index}]"
    return default, default_source


def _bot_source(config: CoreSettings, key: str) -> str:
    return f"bot.{key}" if key in config.bot.model_fields_set else "default"


def _override_source(o: Override) -> str:
    return f"override by {o.set_by} at {o.set_at:%Y-%m-%d %H:%M} UTC"


def resolve(
    config: CoreSettings,
    msg: IncomingMessage,
    overrides: Mapping[str, Override] | None = None,
    *,
    default_model: str | None = None,
) -> ChatSettings:
    """The settings for `msg`'s chat. `default_model`: the model `bot:` falls back to (the
    first entry of `models:` when `bot.model` is unset)."""
    overrides = overrides or {}
    rules = [(i, r) for i, r in enumerate(config.chats) if matches(r.match, msg)]
    bot = config.bot
    sources: dict[str, str] = {}

    model, sources["model"] = _first(rules, "model", default_model, _bot_source(config, "model"))
    if "model" in overrides:
        model, sources["model"] = overrides["model"].value, _override_source(overrides["model"])

    persona, prompt, sources["persona"] = _prompt(config, rules)
    if "persona" in overrides:
        o = overrides["persona"]
        persona = o.value if o.value in config.personas else None
        prompt = config.personas.get(o.value, o.value)
        sources["persona"] = _override_source(o)

    history, sources["history_size"] = _first(
        rules, "history_size", bot.history_size, _bot_source(config, "history_size")
    )
    respond, sources["respond_in_groups"] = _first(
        rules, "respond_in_groups", bot.respond_in_groups, _bot_source(config, "respond_in_groups")
    )
    if "respond_in_groups" in overrides:
        o = overrides["respond_in_groups"]
        respond, sources["respond_in_groups"] = o.value, _override_source(o)
    mention, sources["reply_with_mention"] = _first(
        rules,
        "reply_with_mention",
        bot.reply_with_mention,
        _bot_source(config, "reply_with_mention"),
    )
    quote, sources["reply_with_quote"] = _first(
        rules, "reply_with_quote", bot.reply_with_quote, _bot_source(config, "reply_with_quote")
    )
    language, sources["language"] = _first(
        rules, "language", bot.language, _bot_source(config, "language")
    )
    if "language" in overrides:
        language, sources["language"] = (
            overrides["language"].value,
            _override_source(overrides["language"]),
        )
    functions, sources["functions"] = _first(rules, "functions", None, "function_calls")
    if "functions" in overrides:
        o = overrides["functions"]
        functions = ChatFunctionRules.model_validate(json.loads(o.value))
        sources["functions"] = _override_source(o)
    limits = config.limits
    sources["limits"] = "limits"
    if "limits" in overrides:
        limits = limits_with(limits, overrides["limits"].value)
        sources["limits"] = _override_source(overrides["limits"])
    on_exceed, sources["on_exceed"] = _first(
        rules,
        "on_exceed",
        limits.on_exceed,
        "limits.on_exceed" if "on_exceed" in limits.model_fields_set else "default",
    )
    reset_after = None
    if "reset" in overrides:
        reset_after = int(overrides["reset"].value)
        sources["reset"] = _override_source(overrides["reset"])
    fc = config.function_calls
    allow_lists = [fc.enabled] if fc.enabled else []
    disabled = list(fc.disabled)
    if functions is not None:
        disabled += functions.disabled
        if functions.enabled:
            allow_lists.append(functions.enabled)
    enabled = allow_lists[-1] if allow_lists else None
    return ChatSettings(
        model=model,
        system_prompt=prompt,
        persona=persona,
        history_size=history,
        respond_in_groups=respond,
        reply_with_mention=mention,
        reply_with_quote=quote,
        language=language,
        functions_enabled=enabled,
        functions_disabled=disabled,
        reset_after=reset_after,
        on_exceed=on_exceed,
        sources=sources,
        allow_lists=allow_lists,
        limits=limits,
        keys=config.chat_keys,
        values=_plugin_values(config, rules, overrides, sources),
    )


def _plugin_values(
    config: CoreSettings,
    rules: list[tuple[int, ChatRule]],
    overrides: Mapping[str, Override],
    sources: dict[str, str],
) -> dict[str, Any]:
    """Each plugin key's value: an override where the key allows one, else the first rule
    naming it, else its default (the core's keys are resolved above, each its own way)."""
    values: dict[str, Any] = {}
    for key in config.chat_keys:
        if key.owner == "core":
            continue
        value, sources[key.name] = _first_named(rules, key.name, key.default)
        o = overrides.get(key.name) if key.override else None
        if o is not None:
            value, sources[key.name] = key.decode(o.value), _override_source(o)
        values[key.name] = value
    return values


def _first_named(rules: list[tuple[int, ChatRule]], name: str, default: Any) -> tuple[Any, str]:
    for index, rule in rules:
        value = rule.get(name)
        if value is not None:
            return value, f"chats[{index}]"
    return default, "default"


def overridable(config: CoreSettings) -> tuple[str, ...]:
    """The keys a chat's admins and the console may override, in declaration order."""
    return override_keys(config.chat_keys)


def replanning(config: CoreSettings) -> frozenset[str]:
    """The overrides after which `Storage.begin_turn` plans a turn again."""
    return replan_keys(config.chat_keys)


def limits_with(limits: LimitSettings, override: str) -> LimitSettings:
    """`limits` with a chat's override (JSON `{"per_chat": {...}, "per_user": {...}}`): each
    key given replaces the configured value (`null`: no limit in this chat)."""
    given = json.loads(override)
    values = {}
    for scope in ("per_chat", "per_user"):
        base: LimitValues = getattr(limits, scope)
        values[scope] = base.model_copy(update=dict(given.get(scope) or {}))
    return limits.model_copy(update=values)


def _prompt(config: CoreSettings, rules: list[tuple[int, ChatRule]]) -> tuple[str | None, str, str]:
    """(persona name or None, prompt text, source): a rule's persona or system_prompt, else
    bot.persona, else bot.system_prompt."""
    for index, rule in rules:
        if rule.persona is not None:
            return rule.persona, config.personas[rule.persona], f"chats[{index}]"
        if rule.system_prompt is not None:
            return None, rule.system_prompt, f"chats[{index}]"
    bot = config.bot
    if bot.persona is not None:
        return bot.persona, config.personas[bot.persona], "bot.persona"
    source = "bot.system_prompt" if bot.system_prompt != DEFAULT_SYSTEM_PROMPT else "default"
    return None, bot.system_prompt, source


def check_rules(
    config: CoreSettings,
    models: Iterable[str],
    functions: Iterable[str],
    patterns: Iterable[str] = (),
) -> None:
    """Stop at start on a rule naming a model, persona or function that does not exist,
    naming the key path: `chats[0].model: no model named 'deepseek' under models`. `patterns`
    are globs of functions that plugins register later (`Plugin.function_patterns`)."""
    names, known, globs = set(models), set(functions), list(patterns)
    errors = [
        *_model_reference_errors(config, names),
        *_chat_rule_errors(config, names, known, globs),
        *_function_list_errors("function_calls", config.function_calls, known, globs),
    ]
    if errors:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(errors))


def _model_reference_errors(config: CoreSettings, models: set[str]) -> list[str]:
    """bot.vision_model, bot.summary_model, each model's fallbacks, every downgrade_to and
    bot.persona name something that exists."""
    errors: list[str] = []
    vision = config.bot.vision_model
    entries = getattr(config, "models", None) or {}
    if vision is not None and vision not in models:
        errors.append(f"bot.vision_model: no model named {vision!r} under models")
    elif vision is not None and vision in entries and not entries[vision].vision:
        errors.append(f"bot.vision_model: the model {vision!r} needs `vision: true`")
    for name, entry in entries.items():
        for i, other in enumerate(getattr(entry, "fallback", ())):
            if other == name:
                errors.append(f"models.{name}.fallback[{i}]: a model cannot be its own fallback")
            elif other not in models:
                errors.append(f"models.{name}.fallback[{i}]: no model named {other!r} under models")
    summary = config.bot.summary_model
    if summary is not None and summary not in models:
        errors.append(f"bot.summary_model: no model named {summary!r} under models")
    downgrades = [("limits.on_exceed", config.limits.on_exceed)] + [
        (f"chats[{i}].on_exceed", rule.on_exceed) for i, rule in enumerate(config.chats)
    ]
    for where, value in downgrades:
        if isinstance(value, DowngradeTo) and value.downgrade_to not in models:
            errors.append(
                f"{where}.downgrade_to: no model named {value.downgrade_to!r} under models"
            )
    if config.bot.persona is not None and config.bot.persona not in config.personas:
        errors.append(f"bot.persona: no persona named {config.bot.persona!r} under personas")
    return errors


def _chat_rule_errors(
    config: CoreSettings, models: set[str], functions: set[str], globs: list[str]
) -> list[str]:
    """Each `chats:` rule's model, persona and function lists name something that exists."""
    errors: list[str] = []
    for i, rule in enumerate(config.chats):
        if rule.model is not None and rule.model not in models:
            errors.append(f"chats[{i}].model: no model named {rule.model!r} under models")
        if rule.persona is not None and rule.persona not in config.personas:
            errors.append(f"chats[{i}].persona: no persona named {rule.persona!r} under personas")
        if rule.functions is not None:
            errors += _function_list_errors(
                f"chats[{i}].functions", rule.functions, functions, globs
            )
    return errors


def _function_list_errors(
    where: str, lists: Any, functions: set[str], globs: list[str]
) -> list[str]:
    """`enabled` / `disabled` of one function rule each name (or match) a function."""
    return [
        f"{where}.{kind}: {_no_such(name)}"
        for kind in ("enabled", "disabled")
        for name in getattr(lists, kind) or ()
        if not _names_some(name, functions, globs)
    ]


def _is_pattern(name: str) -> bool:
    return any(c in name for c in "*?[")


def _names_some(name: str, functions: set[str], globs: list[str]) -> bool:
    """A name is a registered function (or fits a plugin's later-registered pattern); a
    pattern matches one of them (any pattern passes while a plugin registers more later)."""
    if _is_pattern(name):
        return bool(globs) or any(fnmatch(f, name) for f in functions)
    return name in functions or any(fnmatch(name, g) for g in globs)


def _no_such(name: str) -> str:
    return f"no function matches {name!r}" if _is_pattern(name) else f"no function named {name!r}"


def _describe_match(match: ChatMatch) -> str:
    keys = match.model_dump(exclude_none=True)
    return "{" + ", ".join(f"{k}: {v}" for k, v in keys.items()) + "}" if keys else "{} (all)"


def rules_without_functions(config: CoreSettings, functions: Iterable[str]) -> list[str]:
    """A sentence for each function rule that leaves its chats no function at all (`/help`
    included), naming the rule by its key path and match: logged at start, since such a rule
    is more often a mistake (`enabled: [x]` with a typo'd pattern) than a wish."""
    names = sorted(set(functions))
    if not names:
        return []
    fc = config.function_calls
    top_allow = [fc.enabled] if fc.enabled else []
    if not any(_allowed(n, fc.disabled, top_allow) for n in names):
        return [
            f"function_calls (enabled {fc.enabled or 'all'}, disabled {fc.disabled}) leaves "
            "every chat with no functions"
        ]
    found = []
    for i, rule in enumerate(config.chats):
        rules = rule.functions
        if rules is None:
            continue
        disabled = fc.disabled + rules.disabled
        allow = top_allow + ([rules.enabled] if rules.enabled else [])
        if not any(_allowed(n, disabled, allow) for n in names):
            # The deprecated function_calls.chats entries were folded in first (settings.py).
            where = (
                f"function_calls.chats[{rule.match.chat_id!r}]"
                if i < len(fc.chats)
                else f"chats[{i - len(fc.chats)}] (match {_describe_match(rule.match)})"
            )
            found.append(
                f"{where} leaves its chats with no functions: "
                f"functions {rules.model_dump(exclude_none=True)}"
            )
    return found


def rule_models(config: CoreSettings) -> list[str]:
    """Every model name the `chats:` rules use (check_system checks each)."""
    return sorted({r.model for r in config.chats if r.model is not None})


def downgrade_models(config: CoreSettings) -> list[str]:
    """Every model `on_exceed` downgrades to, and `bot.summary_model` (check_system checks
    each, with its fallback chain)."""
    values = [config.limits.on_exceed, *(r.on_exceed for r in config.chats)]
    names = {v.downgrade_to for v in values if isinstance(v, DowngradeTo)}
    if config.bot.summary_model is not None:
        names.add(config.bot.summary_model)
    return sorted(names)
