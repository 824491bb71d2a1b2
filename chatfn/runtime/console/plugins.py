"""The console's Plugins page (docs/admin-api.md "Plugins"): the plugins with their state,
metadata and health; on and off for the bot and for one chat; a plugin's settings form from its
settings model; the market (`plugins.index_url`) and, for owners where
`admin.allow_plugin_install` is on, install, upgrade and remove with the command line's code
(chatfn/runtime/plugin_install.py) and its confirmation.

Every change is audited, takes effect for the next message where the plugin allows it
(chatfn/runtime/plugin_reload.py) and is written to the config file where it is a setting
(chatfn/runtime/console/config_file.py), so it holds after a restart.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger
from pydantic import BaseModel, SecretStr

from chatfn.runtime import plugin_install
from chatfn.runtime.console import config_file
from chatfn.runtime.console.errors import ConsoleError
from chatfn.runtime.plugin_index import PluginIndexError, index_in_use, read_index
from chatfn.runtime.plugin_pip import PipFailed, canonicalize_name, installed_versions
from chatfn.runtime.plugin_reload import Change, PluginSwitch
from chatfn.storage.console.scope import Scope

if TYPE_CHECKING:
    from chatfn.runtime.plugins import LoadedPlugin

#: How long an install's confirmation waits for its yes.
PLAN_TTL = 600.0


@dataclass
class Pending:
    user: str
    plan: plugin_install.InstallPlan | plugin_install.FilePlan
    upgrade: bool
    made: float


class Plugins:
    """One per console."""

    def __init__(self, console: Any) -> None:  # the Console
        self.console = console
        self.switch = PluginSwitch(console._bot)
        self._pending: dict[str, Pending] = {}

    @property
    def bot(self) -> Any:
        return self.console._bot

    # -- who may ------------------------------------------------------------------------------
    def owner(self, user: str) -> bool:
        found = self.console.user(user)
        return found is not None and getattr(found, "role", None) == "owner"

    async def _may_install(self, user: str, address: str, action: str, detail: Any) -> None:
        """403 unless installs are on and `user` is an owner; a refusal is audited
        (`action`.refused, with what was asked)."""
        error = None
        if not self.console.settings.admin.allow_plugin_install:
            error = ConsoleError(
                403,
                "installing plugins from the console is off (admin.allow_plugin_install)",
                "allow_plugin_install",
            )
        elif not self.owner(user):
            error = ConsoleError(403, "only a console user with role: owner installs plugins")
        if error is not None:
            why = {"asked": detail, "why": error.message}
            await self.console.audit(user, address, action + ".refused", detail=why)
            raise error

    # -- the list -----------------------------------------------------------------------------
    def listing(self, user: str) -> dict[str, Any]:
        from chatfn.runtime.console import ops

        found = ops.plugins(self.bot)
        for row in found["plugins"]:
            loaded = self.switch.loaded(row["name"])
            plugin = loaded.plugin if loaded is not None else None
            row["reload"] = plugin.reload if plugin is not None else True
            row["restart"] = self.switch.restart.get(row["name"])
            row["settings"] = bool(plugin is not None and plugin.settings is not None)
            row["health"] = (
                plugin.health_of(self.bot.plugin_host, True) if plugin is not None else {}
            )
        found["market"] = {
            "index_url": self._index_url(),
            "allow_install": self.console.settings.admin.allow_plugin_install,
            "owner": self.owner(user),
        }
        return found

    def _loaded(self, name: str) -> LoadedPlugin:
        loaded = self.switch.find(name)
        if loaded is None:
            raise ConsoleError(404, f"no plugin {name} is loaded")
        return loaded

    # -- on and off ---------------------------------------------------------------------------
    async def turn(self, user: str, address: str, name: str, on: bool) -> dict[str, Any]:
        loaded = self._loaded(name)
        async with self.switch.lock:
            try:
                change = self.switch.switch(name, on)
            except ValueError as exc:
                raise ConsoleError(409, str(exc)) from None
        # Held after a restart: every kind of plugin obeys plugins.disabled (a file since
        # issue 37's last gap closed), so the choice is written there.
        change, kept = await self._persist_disabled(loaded, on, change)
        out = {**change.json(), "kept": kept}
        action = "plugin.on" if on else "plugin.off"
        await self.console.audit(user, address, action, detail={"plugin": name, **out})
        return out

    async def _persist_disabled(
        self, loaded: LoadedPlugin, on: bool, change: Change
    ) -> tuple[Change, bool]:
        """`plugins.disabled` in the config file without (on) or with (off) the plugin; kept:
        whether the next start does the same (False: the file could not be written, or a
        glob there still names the plugin, which the console does not rewrite)."""
        settings = self.bot.settings
        names = {loaded.name, (loaded.meta.distribution if loaded.meta else "") or loaded.name}
        if not loaded.builtin and not loaded.installed:
            names.add(Path(loaded.origin).stem)  # a file is named by its file too
        disabled = [n for n in settings.plugins.disabled if n not in names]
        if not on:
            disabled.append(loaded.name)
        try:
            await asyncio.to_thread(
                config_file.change, settings, [(("plugins", "disabled"), disabled)]
            )
        except ConsoleError as exc:
            change.restart = f"not written to the config file: {exc.message}"
            return change, False
        settings.plugins.__dict__["disabled"] = disabled
        glob = next(
            (p for p in disabled for n in names if on and fnmatchcase(n.lower(), p.lower())), None
        )
        if glob is not None:
            change.restart = (
                f"plugins.disabled still names it with {glob!r}: it is off again at the next "
                "start unless that entry is changed in the config file"
            )
            return change, False
        return change, True

    async def chat_turn(
        self, scope: Scope, user: str, address: str, name: str, body: Any
    ) -> dict[str, Any]:
        """On or off in one chat: its functions in the chat's `functions.disabled` (the
        chat's override, as the chat form writes it)."""
        if not isinstance(body, dict) or not isinstance(body.get("on"), bool):
            raise ConsoleError(400, 'body: {"chat": "platform:chat_id", "on": true|false}')
        platform, sep, chat_id = str(body.get("chat", "")).partition(":")
        if not sep or not platform or not chat_id:
            raise ConsoleError(400, "chat: platform:chat_id", "chat")
        loaded = self._loaded(name)
        mine = sorted(s.name for s in loaded.specs())
        if not mine:
            raise ConsoleError(409, f"{name} has no functions to switch in a chat")
        chats = self.console.chats
        detail = await chats.detail(scope, platform, chat_id)
        functions = detail["settings"]["functions"]["value"]
        bot_wide = set(self.bot.settings.function_calls.disabled)
        disabled = [n for n in functions["disabled"] or [] if n not in bot_wide and n not in mine]
        if not body["on"]:
            disabled += mine
        rules = {"enabled": functions["enabled"], "disabled": disabled}
        await chats.patch(scope, user, address, platform, chat_id, {"functions": rules})
        await self.console.audit(
            user,
            address,
            "plugin.chat_on" if body["on"] else "plugin.chat_off",
            platform,
            chat_id,
            {"plugin": name, "functions": mine},
        )
        return {"plugin": name, "chat": f"{platform}:{chat_id}", "on": body["on"]}

    async def chat_states(self, scope: Scope, name: str, chat: str) -> dict[str, Any]:
        platform, _, chat_id = chat.partition(":")
        loaded = self._loaded(name)
        detail = await self.console.chats.detail(scope, platform, chat_id)
        disabled = set(detail["settings"]["functions"]["value"]["disabled"] or [])
        mine = {s.name for s in loaded.specs()}
        return {"plugin": name, "chat": chat, "on": not mine or not mine <= disabled}

    # -- settings -----------------------------------------------------------------------------
    def _model(self, name: str) -> tuple[LoadedPlugin, type[BaseModel], str]:
        loaded = self._loaded(name)
        plugin = loaded.plugin
        if plugin is None or plugin.settings is None or plugin.section is None:
            raise ConsoleError(404, f"{name} has no settings")
        return loaded, plugin.settings, plugin.section

    def settings_form(self, name: str) -> dict[str, Any]:
        """The plugin's settings model as a JSON Schema, its values (a secret only as set or
        not), and the keys the config file takes from the environment (read only here)."""
        _, model, section = self._model(name)
        current = self.bot.settings.section(model)
        values: dict[str, Any] = {}
        secret = []
        for key in type(current).model_fields:
            value = getattr(current, key)
            if isinstance(value, SecretStr) or _is_secret(model, key):
                secret.append(key)
                values[key] = {"set": bool(value and str(_reveal(value)))}
            elif isinstance(value, BaseModel):
                values[key] = value.model_dump(mode="json")
            else:
                values[key] = _jsonable(value)
        doc = config_file.read(config_file.config_path(self.bot.settings))
        node = doc.get(section) if hasattr(doc, "get") else None
        env = sorted(
            k for k in type(current).model_fields if config_file.from_env(node or {}, (k,))
        )
        return {
            "plugin": name,
            "section": section,
            "schema": model.model_json_schema(),
            "values": values,
            "secret": secret,
            "from_env": env,
        }

    async def configure(self, user: str, address: str, name: str, body: Any) -> dict[str, Any]:
        """New values for some of the plugin's keys: validated with the whole config as `chatfn
        run` validates it, written to the file, in force from the next message. A secret left
        out (or empty) keeps its value; it is never shown."""
        loaded, model, section = self._model(name)
        if not isinstance(body, dict) or not isinstance(body.get("values"), dict):
            raise ConsoleError(400, 'body: {"values": {key: value}}')
        fields = model.model_fields
        edits = []
        for key, value in body["values"].items():
            if key not in fields:
                raise ConsoleError(400, f"{section}.{key}: {name} has no such setting", key)
            if _is_secret(model, key) and value in (None, "", {"set": True}):
                continue  # write-only: not given, kept
            edits.append(((section, key), value))
        settings = self.bot.settings
        if edits:
            new = await asyncio.to_thread(config_file.change, settings, edits)
            change = self.switch.configure(name, section, getattr(new, section))
        else:
            change = Change(name, "unchanged")
        keys = [k[1] for k, _ in edits]
        await self.console.audit(
            user,
            address,
            "plugin.configure",
            detail={"plugin": name, "keys": keys, **change.json()},
        )
        return {**change.json(), "form": self.settings_form(loaded.name)}

    # -- the market ---------------------------------------------------------------------------
    def _index_url(self) -> str:
        return index_in_use(self.bot.settings.plugins.index_url)

    async def market(self, q: str) -> dict[str, Any]:
        url = self._index_url()
        try:
            index = await asyncio.to_thread(
                read_index, url, self.bot.settings.base_dir, self.bot.settings.bot.fetch
            )
        except PluginIndexError as exc:
            raise ConsoleError(502, str(exc)) from None
        have = installed_versions()
        words = q.lower().split()
        out = []
        for entry in index["plugins"]:
            if not isinstance(entry, dict):
                continue
            text = " ".join(
                str(entry.get(k, "")) for k in ("name", "distribution", "summary", "author")
            )
            text = (text + " " + " ".join(map(str, entry.get("tags", [])))).lower()
            if any(w not in text for w in words):
                continue
            dist = str(entry.get("distribution", ""))
            versions = [v for v in entry.get("versions", []) if isinstance(v, dict)]
            out.append(
                {
                    **{k: entry.get(k) for k in ("name", "kind", "summary", "homepage", "author")},
                    "distribution": dist,
                    "tags": entry.get("tags", []),
                    "versions": versions,
                    "latest": str(versions[-1].get("version")) if versions else None,
                    "installed": have.get(canonicalize_name(dist)) if dist else self._file(entry),
                }
            )
        return {"index_url": url, "plugins": out}

    def _file(self, entry: dict[str, Any]) -> str | None:
        """The version of a listed plugin file the plugins folder holds (None: none; "changed
        locally": a file there that is no listed version)."""
        import hashlib

        try:
            folder = plugin_install.plugin_folder(
                self.bot.settings.plugins, self.bot.settings.base_dir
            )
            data = (folder / f"{entry.get('name')}.py").read_bytes()
        except (ValueError, OSError):
            return None
        digest = hashlib.sha256(data).hexdigest()
        for version in entry.get("versions") or []:
            if any(f.get("sha256") == digest for f in version.get("files") or []):
                return str(version.get("version"))
        return "changed locally"

    async def plan(self, user: str, address: str, body: Any, *, upgrade: bool) -> dict[str, Any]:
        """Fetch and check the package; its confirmation (as the command line's) and the token
        its yes is given with."""
        action = "plugin.upgrade" if upgrade else "plugin.install"
        asked = (
            {k: str(body.get(k))[:200] for k in ("distribution", "version")}
            if isinstance(body, dict)
            else None
        )
        await self._may_install(user, address, action, asked)
        if isinstance(body, dict) and isinstance(body.get("name"), str):
            return await self._plan_file(user, address, body, action, upgrade)
        if not isinstance(body, dict) or not isinstance(body.get("distribution"), str):
            raise ConsoleError(400, 'body: {"distribution": NAME, "version": VERSION}')
        dist = body["distribution"].strip()
        version = str(body.get("version") or "").strip()
        spec = f"{dist}=={version}" if version else dist
        settings = self.bot.settings
        try:
            found = await asyncio.to_thread(
                plugin_install.plan,
                spec,
                settings.plugins,
                settings.base_dir,
                upgrade=upgrade,
                require_listed=True,
                allow=settings.bot.fetch,
            )
        except (ValueError, PipFailed) as exc:
            await self.console.audit(
                user, address, action + ".refused", detail={"spec": spec, "why": str(exc)}
            )
            raise ConsoleError(409, str(exc)) from None
        if found.current:
            found.discard()
            raise ConsoleError(409, f"{found.wheel.name} {found.wheel.version} is installed")
        self._expire()
        token = secrets.token_urlsafe(18)
        self._pending[token] = Pending(user, found, upgrade, time.monotonic())
        wheel = found.wheel
        await self.console.audit(
            user, address, action + ".asked", detail={"spec": spec, "sha256": wheel.sha256}
        )
        return {
            "token": token,
            "package": wheel.name,
            "version": wheel.version,
            "installed": found.have,
            "permissions": wheel.permissions,
            "chatfn": wheel.chatfn,
            "sha256": wheel.sha256,
            "file": wheel.path.name,
            "also": found.others,
            "lines": found.lines(),
        }

    async def _plan_file(
        self, user: str, address: str, body: dict[str, Any], action: str, upgrade: bool
    ) -> dict[str, Any]:
        """A one-file plugin the index lists (`{"name", "version"}`): read, its sha256 checked,
        waiting for the yes like a package."""
        name = body["name"].strip()
        version = str(body.get("version") or "").strip() or None
        settings = self.bot.settings
        try:
            found = await asyncio.to_thread(
                plugin_install.plan_file,
                name,
                version,
                settings.plugins,
                settings.base_dir,
                allow=settings.bot.fetch,
            )
            if found is None:
                raise ValueError(f"{self._index_url()} lists no plugin file {name}")
        except (ValueError, PluginIndexError) as exc:
            why = {"name": name, "version": version, "why": str(exc)}
            await self.console.audit(user, address, action + ".refused", detail=why)
            raise ConsoleError(409, str(exc)) from None
        if found.current:
            raise ConsoleError(409, f"{found.name} {found.version} is installed")
        self._expire()
        token = secrets.token_urlsafe(18)
        self._pending[token] = Pending(user, found, upgrade, time.monotonic())
        detail = {"name": name, "version": found.version, "sha256": found.sha256}
        await self.console.audit(user, address, action + ".asked", detail=detail)
        return {
            "token": token,
            "package": found.name,
            "version": found.version,
            "installed": found.have,
            "permissions": found.permissions,
            "chatfn": found.chatfn,
            "sha256": found.sha256,
            "file": found.target.name,
            "also": [],
            "lines": found.lines(),
        }

    async def _confirm_file(
        self, user: str, address: str, pending: Pending, found: plugin_install.FilePlan, yes: bool
    ) -> dict[str, Any]:
        """The yes to a plugin file: written into the plugins folder, loaded for the next
        message (the version there before swapped out)."""
        from chatfn.runtime.plugins import load_plugin_files

        action = "plugin.upgrade" if pending.upgrade else "plugin.install"
        if not yes:
            said = {"package": found.name, "version": found.version}
            await self.console.audit(user, address, action + ".declined", detail=said)
            return {"installed": False}
        async with self.switch.lock:
            try:
                await asyncio.to_thread(found.apply)
                [new] = await asyncio.to_thread(
                    load_plugin_files, [str(found.target)], self.bot.settings.base_dir
                )
            except (ValueError, OSError) as exc:
                raise ConsoleError(409, str(exc)) from None
            old = self.switch.loaded(found.name)
            self.switch._swap(old, new)
        change = {"plugin": found.name, "done": "reloaded" if old else "loaded", "restart": None}
        detail: dict[str, Any] = {
            "package": found.name,
            "version": found.version,
            "was": found.have,
            "sha256": found.sha256,
            "permissions": found.permissions,
            "file": str(found.target),
            "changes": [change],
        }
        await self.console.audit(user, address, action, detail=detail)
        logger.info("console: {} {} {} by {}", action, found.name, found.version, user)
        return {"installed": True, **detail}

    async def confirm(self, user: str, address: str, body: Any) -> dict[str, Any]:
        """The owner's yes to a confirmation: the wheel shown (its hash checked again) is
        installed, and loaded now where the plugin allows."""
        token = body.get("token") if isinstance(body, dict) else None
        await self._may_install(user, address, "plugin.confirm", {"token": bool(token)})
        self._expire()
        pending = self._pending.pop(str(token), None) if token else None
        if pending is None or pending.user != user:
            raise ConsoleError(404, "no such confirmation (asked again?)")
        if isinstance(pending.plan, plugin_install.FilePlan):
            return await self._confirm_file(user, address, pending, pending.plan, body.get("yes"))
        found, wheel = pending.plan, pending.plan.wheel
        action = "plugin.upgrade" if pending.upgrade else "plugin.install"
        try:
            if not body.get("yes"):
                await self.console.audit(
                    user,
                    address,
                    action + ".declined",
                    detail={"package": wheel.name, "version": wheel.version},
                )
                return {"installed": False}
            from chatfn.runtime.plugin_pip import read_wheel

            again = await asyncio.to_thread(read_wheel, wheel.path)
            if again.sha256 != wheel.sha256:
                raise ConsoleError(409, f"{wheel.path.name} changed since it was shown")
            async with self.switch.lock:
                try:
                    await asyncio.to_thread(found.apply)
                except PipFailed as exc:
                    raise ConsoleError(502, str(exc)) from None
                changes = self.switch.installed(wheel.name, list(wheel.plugins))
        finally:
            found.discard()
        detail = {
            "package": wheel.name,
            "version": wheel.version,
            "was": found.have,
            "sha256": wheel.sha256,
            "permissions": wheel.permissions,
            "changes": [c.json() for c in changes],
        }
        await self.console.audit(user, address, action, detail=detail)
        logger.info("console: {} {} {} by {}", action, wheel.name, wheel.version, user)
        return {"installed": True, **detail}

    async def remove(self, user: str, address: str, name: str) -> dict[str, Any]:
        await self._may_install(user, address, "plugin.remove", {"name": name})
        found = plugin_install.installed_plugin(name)
        if found is None:
            return await self._remove_file(user, address, name)
        dist_name, version = found
        from chatfn.runtime.plugin_pip import installed_distributions

        dist = installed_distributions()[dist_name]
        entries = [p.name for p in dist.entry_points if p.group == plugin_install.plugin_pip.GROUP]
        loaded = [self.switch.loaded(e) for e in entries]
        sections = [p.plugin.section for p in loaded if p and p.plugin and p.plugin.section]
        async with self.switch.lock:
            try:
                await asyncio.to_thread(
                    plugin_install.uninstall, dist_name, self.bot.settings.plugins.installer
                )
            except PipFailed as exc:
                raise ConsoleError(502, str(exc)) from None
            changes = self.switch.removed(entries)
        detail = {"package": dist_name, "version": version, "changes": [c.json() for c in changes]}
        detail["sections_removed"] = await self._drop_sections(sections)
        await self.console.audit(user, address, "plugin.remove", detail=detail)
        return {"removed": True, **detail}

    async def _remove_file(self, user: str, address: str, name: str) -> dict[str, Any]:
        """A one-file plugin the index lists, removed from the plugins folder when it is one
        of the listed versions (never a file of the operator's own or one they changed);
        its functions go from the next message where it allows, as a package's do."""
        settings = self.bot.settings
        try:
            filed = await asyncio.to_thread(
                plugin_install.plan_file_removal,
                name,
                settings.plugins,
                settings.base_dir,
                allow=settings.bot.fetch,
            )
        except (ValueError, PluginIndexError) as exc:
            why = {"name": name, "why": str(exc)}
            await self.console.audit(user, address, "plugin.remove.refused", detail=why)
            raise ConsoleError(409, str(exc)) from None
        if filed is None:
            missing = f"no installed plugin package {name}, nor a plugin file {name}.py"
            raise ConsoleError(404, missing)
        loaded = self.switch.loaded(name)
        section = loaded.plugin.section if loaded and loaded.plugin else None
        async with self.switch.lock:
            try:
                await asyncio.to_thread(filed.apply)
            except (ValueError, OSError) as exc:
                raise ConsoleError(409, str(exc)) from None
            changes = self.switch.removed([name])
        detail: dict[str, Any] = {
            "package": name,
            "version": filed.version,
            "file": str(filed.path),
            "changes": [c.json() for c in changes],
        }
        detail["sections_removed"] = await self._drop_sections([section] if section else [])
        await self.console.audit(user, address, "plugin.remove", detail=detail)
        logger.info("console: plugin.remove {} {} by {}", name, filed.version, user)
        return {"removed": True, **detail}

    async def _drop_sections(self, sections: list[str]) -> list[str]:
        """A removed plugin's sections out of the config file: a section no plugin declares
        would stop the next start."""
        doc = config_file.read(config_file.config_path(self.bot.settings))
        found = [s for s in sections if s in doc]
        if found:
            edits = [((s,), config_file.DELETE) for s in found]
            try:
                await asyncio.to_thread(config_file.change, self.bot.settings, edits)
            except ConsoleError as exc:
                logger.warning("sections {} not removed from the config: {}", found, exc.message)
                return []
        return found

    def _expire(self) -> None:
        now = time.monotonic()
        for token, pending in list(self._pending.items()):
            if now - pending.made > PLAN_TTL:
                self._pending.pop(token).plan.discard()


def _is_secret(model: type[BaseModel], key: str) -> bool:
    annotation = str(model.model_fields[key].annotation)
    return "SecretStr" in annotation or "SecretBytes" in annotation


def _reveal(value: Any) -> Any:
    return value.get_secret_value() if hasattr(value, "get_secret_value") else value


def _jsonable(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)
