"""A chat in the console: the list, its effective settings with where each comes from (as
`/settings` shows them), the overrides an operator sets (written as the chat's admin commands
write theirs: `chat_overrides`, read with the chat's next message), its reset and history."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from typing import Any

from pydantic import ValidationError

from chatfn.common.chat_keys import ChatKey
from chatfn.common.config import ChatFunctionRules, LimitValues, zone_named
from chatfn.common.messages import IncomingMessage
from chatfn.runtime.console import views
from chatfn.runtime.console.errors import ConsoleError
from chatfn.storage.chat_state import Override
from chatfn.storage.console import chats as store
from chatfn.storage.console.scope import Scope
from chatfn.storage.console.sessions import iso
from function_calls.chat_settings import ChatSettings, overridable, resolve

# What the console may change is what the per-chat keys declare overridable
# (chatfn/common/chat_keys.py: the core's and each plugin's `Plugin(chat_keys=...)`).
MAX_PERSONA = 8000


def chat_message(platform: str, chat_id: str, is_group: bool) -> IncomingMessage:
    """A message standing for the chat, to resolve its settings as a message there would."""
    return IncomingMessage(
        platform=platform,
        chat_id=chat_id,
        sender_id="",
        sender_name="",
        text="",
        is_group=is_group,
    )


def _override_json(key: ChatKey[Any] | None, o: Override | None) -> dict[str, Any] | None:
    if o is None:
        return None
    value: Any = o.value
    if key is not None and key.owner != "core":
        value = key.dump(key.decode(o.value))
    elif key is not None and key.form == "json":
        value = json.loads(o.value)
    return {"value": value, "set_by": o.set_by, "set_at": iso(o.set_at)}


def settings_json(chat: ChatSettings, overrides: dict[str, Override]) -> dict[str, Any]:
    on_exceed: Any = (
        {"downgrade_to": chat.downgrade_to} if chat.downgrade_to is not None else "refuse"
    )
    values: dict[str, Any] = {
        "model": chat.model,
        "persona": chat.persona or chat.system_prompt,
        "system_prompt": chat.system_prompt,
        "functions": {"enabled": chat.functions_enabled, "disabled": chat.functions_disabled},
        "limits": {
            "per_chat": chat.limits.per_chat.model_dump(),
            "per_user": chat.limits.per_user.model_dump(),
        },
        "language": chat.language,
        "respond_in_groups": chat.respond_in_groups,
        "history_size": chat.history_size,
        "reply_with_mention": chat.reply_with_mention,
        "reply_with_quote": chat.reply_with_quote,
        "on_exceed": on_exceed,
        "reset": chat.reset_after,
    }
    declared = {k.name: k for k in chat.keys}
    for key in chat.keys:  # the plugins' keys, as they declared them
        if key.owner != "core":
            values[key.name] = key.dump(chat.get(key))
    source_key = {"system_prompt": "persona"}
    editable = {k.name for k in chat.keys if k.override} | {"reset"}
    return {
        key: {
            "value": value,
            "source": chat.sources.get(source_key.get(key, key), "default")
            if key != "reset"
            else chat.sources.get("reset", ""),
            "override": _override_json(declared.get(key), overrides.get(source_key.get(key, key)))
            if key in editable
            else None,
        }
        for key, value in values.items()
    }


def _key_choices(keys: tuple[ChatKey[Any], ...]) -> dict[str, Any]:
    """The values a plugin's key allows, for its form field (the core's are set below)."""
    return {k.name: k.choices for k in keys if k.owner != "core" and k.choices is not None}


class Chats:
    def __init__(self, console: Any) -> None:
        self.console = console
        self.bot = console._bot

    async def _facts(self, scope: Scope, platform: str, chat_id: str) -> dict[str, Any]:
        if not scope.allows(platform, chat_id):
            raise ConsoleError(404, f"no chat {platform}:{chat_id}")
        storage = self.bot.storage
        names = await storage.run_aside(views.chat_names, self.bot)  # `@plugin.chat_names`
        facts = await storage.run_aside(store.chat_facts, storage.engine, platform, chat_id, names)
        if facts is None:
            raise ConsoleError(404, f"no chat {platform}:{chat_id}")
        return facts

    async def listing(
        self,
        scope: Scope,
        q: str,
        platform: str,
        kind: str,
        active_days: int | None,
        limit: int,
        offset: int,
    ) -> dict[str, Any]:
        storage = self.bot.storage
        names = await storage.run_aside(views.chat_names, self.bot)  # `@plugin.chat_names`
        chats = await storage.run_aside(store.chat_list, storage.engine, scope, names)
        platforms = sorted({c["platform"] for c in chats})
        if platform:
            chats = [c for c in chats if c["platform"] == platform]
        if kind:
            chats = [c for c in chats if c["kind"] == kind]
        if active_days is not None:
            cutoff = datetime.now().astimezone().timestamp() - active_days * 86400
            chats = [
                c
                for c in chats
                if c["last_active"]
                and datetime.fromisoformat(c["last_active"]).timestamp() >= cutoff
            ]
        if q:
            low = q.lower()
            chats = [c for c in chats if low in c["chat_id"].lower() or low in c["name"].lower()]
        resolved = []
        for c in chats[offset : offset + limit]:
            chat = await self._resolve(c["platform"], c["chat_id"], c["kind"] == "group", {})
            model = c.pop("model_override") or chat.model
            resolved.append({**c, "model": model})
        return {"total": len(chats), "platforms": platforms, "chats": resolved}

    async def _overrides(self, platform: str, chat_id: str) -> dict[str, Override]:
        state = self.bot.storage.chat_state
        return await self.bot.storage.run_aside(state.overrides, platform, chat_id)

    async def _resolve(
        self, platform: str, chat_id: str, is_group: bool, overrides: dict[str, Override]
    ) -> ChatSettings:
        default = self.bot.model.name if self.bot.model is not None else None
        msg = chat_message(platform, chat_id, is_group)
        return resolve(self.bot.settings, msg, overrides, default_model=default)

    async def detail(self, scope: Scope, platform: str, chat_id: str) -> dict[str, Any]:
        facts = await self._facts(scope, platform, chat_id)
        overrides = await self._overrides(platform, chat_id)
        chat = await self._resolve(platform, chat_id, facts["kind"] == "group", overrides)
        storage = self.bot.storage
        summary = await storage.run_aside(storage.chat_state.summary, platform, chat_id)
        if (
            summary is not None
            and chat.reset_after is not None
            and summary.upto_id <= chat.reset_after
        ):
            summary = None
        zone = zone_named(self.bot.settings.bot.timezone)
        today = datetime.now(zone).replace(hour=0, minute=0, second=0, microsecond=0)
        stats = await storage.run_aside(storage.chat_state.stats, platform, chat_id, today)
        facts = {k: v for k, v in facts.items() if k != "last_id"}
        return {
            **facts,
            "settings": settings_json(chat, overrides),
            "editable": list(overridable(self.bot.settings)),
            # How the form edits each key (`ChatKey.describe`: its form, choices, default).
            "keys": {k.name: k.describe() for k in chat.keys},
            "choices": {
                **_key_choices(chat.keys),
                "models": self.bot.model_names(),
                "personas": list(self.bot.settings.personas),
                "functions": sorted(s.name for s in self.bot.registry.all()),
                "languages": _declared(chat.keys, "language").choices,
                "respond_in_groups": _declared(chat.keys, "respond_in_groups").choices,
            },
            "summary": {
                "messages": summary.messages,
                "tokens": summary.tokens,
                "model": summary.model_name,
                "created_at": iso(summary.created_at),
            }
            if summary is not None
            else None,
            "today": {
                "messages": stats.messages,
                "model_calls": stats.model_calls,
                "tokens": stats.tokens,
                "cost": round(stats.cost, 6) if stats.cost is not None else None,
            },
        }

    # -- changes -------------------------------------------------------------------------------
    def _validated(self, body: Any) -> dict[str, str | None]:
        """Each key of a PATCH body as the override value to store (None: clear it)."""
        editable = overridable(self.bot.settings)
        if not isinstance(body, dict) or not body:
            raise ConsoleError(400, f"body: a JSON object with any of {', '.join(editable)}")
        out: dict[str, str | None] = {}
        declared = {k.name: k for k in self.bot.settings.chat_keys}
        for key, value in body.items():
            if key not in editable:
                raise ConsoleError(400, f"{key}: not a setting the console changes", key)
            if value is None:
                out[key] = None
            elif declared[key].owner != "core":
                out[key] = _plugin_value(declared[key], value)
            else:
                out[key] = self._value(key, value)
        return out

    def _value(self, key: str, value: Any) -> str:
        if key == "model":
            names = self.bot.model_names()
            if not isinstance(value, str) or value not in names:
                raise ConsoleError(
                    400, f"model: no model named {value!r} under models ({', '.join(names)})", key
                )
            return value
        if key == "persona":
            if not isinstance(value, str) or not value.strip() or len(value) > MAX_PERSONA:
                raise ConsoleError(
                    400,
                    f"persona: a persona's name or a prompt of 1 to {MAX_PERSONA} characters",
                    key,
                )
            return value.strip()
        choices = _declared(self.bot.settings.chat_keys, key).choices
        if choices is not None:  # language, respond_in_groups
            if value not in choices:
                allowed = ", ".join(map(str, choices[:-1])) + f" or {choices[-1]}"
                raise ConsoleError(400, f"{key}: {allowed}", key)
            return str(value)
        if key == "functions":
            try:
                rules = ChatFunctionRules.model_validate(value)
            except ValidationError as exc:
                raise ConsoleError(400, f"functions: {_first_error(exc)}", key) from None
            known = {s.name for s in self.bot.registry.all()}
            for kind in ("enabled", "disabled"):
                for name in getattr(rules, kind) or ():
                    if not any(fnmatchcase(f, name) for f in known):
                        raise ConsoleError(
                            400, f"functions.{kind}: no function matches {name!r}", key
                        )
            return json.dumps(rules.model_dump(), ensure_ascii=False)
        return self._limits(value)

    @staticmethod
    def _limits(value: Any) -> str:
        if not isinstance(value, dict) or not set(value) <= {"per_chat", "per_user"}:
            raise ConsoleError(400, "limits: an object with per_chat and/or per_user", "limits")
        out = {}
        for scope, given in value.items():
            if not isinstance(given, dict):
                raise ConsoleError(400, f"limits.{scope}: an object of limits", "limits")
            try:
                LimitValues.model_validate(given)
            except ValidationError as exc:
                raise ConsoleError(400, f"limits.{scope}: {_first_error(exc)}", "limits") from None
            out[scope] = given
        return json.dumps(out)

    async def patch(
        self, scope: Scope, user: str, address: str, platform: str, chat_id: str, body: Any
    ) -> dict[str, Any]:
        await self._facts(scope, platform, chat_id)
        changes = self._validated(body)
        storage = self.bot.storage
        state = storage.chat_state
        before = await self._overrides(platform, chat_id)
        for key, value in changes.items():
            if value is None:
                await storage.run_aside(state.clear_override, platform, chat_id, key)
            else:
                await storage.run_aside(
                    state.set_override, platform, chat_id, key, value, f"admin:{user}"
                )
            old = before.get(key)
            await self.console.audit(
                user,
                address,
                "settings",
                platform,
                chat_id,
                {"key": key, "old": old.value if old else None, "new": value},
            )
        return await self.detail(scope, platform, chat_id)

    async def reset(
        self, scope: Scope, user: str, address: str, platform: str, chat_id: str
    ) -> dict[str, Any]:
        """As `/reset` in the chat: the model sees only what follows the last stored message,
        and the compacted summary goes."""
        facts = await self._facts(scope, platform, chat_id)
        storage = self.bot.storage
        last = str(facts["last_id"])
        await storage.run_aside(
            storage.chat_state.set_override, platform, chat_id, "reset", last, f"admin:{user}"
        )
        await storage.run_aside(storage.chat_state.clear_summary, platform, chat_id)
        await self.console.audit(
            user, address, "reset", platform, chat_id, {"after": facts["last_id"]}
        )
        return {"ok": True, "reset_after": facts["last_id"]}

    async def history(
        self,
        scope: Scope,
        platform: str,
        chat_id: str,
        limit: int,
        before: int | None,
        fate: str | None = None,
        days: int | None = None,
    ) -> dict[str, Any]:
        """A page of the chat's history with each message's fate (issue 40); `fate`: only the
        messages with that fate, `days`: of the last so many days."""
        await self._facts(scope, platform, chat_id)
        storage = self.bot.storage
        now = datetime.fromtimestamp(self.bot.clock(), UTC)
        window = self.bot.settings.bot.resume_window
        held_since = now - timedelta(seconds=window) if window > 0 else None
        since = now - timedelta(days=days) if days else None
        return await storage.run_aside(
            store.history_page,
            storage.engine,
            platform,
            chat_id,
            limit,
            before,
            fate=fate,
            held_since=held_since,
            since=since,
        )


def _declared(keys: tuple[ChatKey[Any], ...], name: str) -> ChatKey[Any]:
    return next(k for k in keys if k.name == name)


def _plugin_value(key: ChatKey[Any], value: Any) -> str:
    """A plugin key's override, validated as its declaration says."""
    try:
        return key.encode(key.validate(value))
    except ValidationError as exc:
        raise ConsoleError(400, f"{key.name}: {_first_error(exc)}", key.name) from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else err["msg"]
