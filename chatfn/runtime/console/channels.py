"""The console's Channels page (issue 39): every installed channel with its state (running in
this process, configured, failed to load), a form generated from its settings model (a
`SecretStr` field write-only: shown as set / not set; a `${VAR}` value shown as coming from the
environment and not editable), its README (the platform's set-up steps) and a test that runs
its `check(settings, online=True)` probe with the settings in config.yaml. A change is written
to config.yaml (config_file.py) and takes effect when the bot restarts: the page says so."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from pydantic import BaseModel, SecretStr

from chatfn.runtime.channel_host import channel_state
from chatfn.runtime.console import config_file
from chatfn.runtime.console.config_file import DELETE
from chatfn.runtime.console.errors import ConsoleError

# The console (which imports this module), as Any: tests/test_layers.py counts type imports.
Console = Any
KINDS = {"boolean": "boolean", "integer": "integer", "number": "number", "string": "string"}


def _schema_kind(prop: dict[str, Any]) -> tuple[str, list[Any] | None]:
    """A JSON-schema property as a form field's kind: secret, boolean, integer, number,
    string, choice (with its options) or json (lists, mappings, sections: edited as JSON)."""
    options = [p for p in prop.get("anyOf", [prop]) if p.get("type") != "null"]
    if len(options) != 1:
        return "json", None
    one = options[0]
    if one.get("format") == "password" or one.get("writeOnly"):
        return "secret", None
    if "enum" in one:
        return "choice", list(one["enum"])
    if "const" in one:
        return "choice", [one["const"]]
    return KINDS.get(one.get("type", ""), "json"), None


def _shown(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return "set"
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | dict | tuple):
        return _json(value)
    return value


def _json(value: Any) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(Any).dump_python(value, mode="json")


def _default(info: Any) -> Any:
    from pydantic_core import PydanticUndefined

    try:
        value = info.get_default(call_default_factory=True)
    except Exception:  # noqa: BLE001 - a factory that needs the other fields
        return None
    return None if value is PydanticUndefined else _shown(value)


def fields(
    spec: Any, section: Any, doc: Any, command_line: dict[tuple[str, ...], str] | None = None
) -> list[dict[str, Any]]:
    schema = spec.settings.model_json_schema()
    props = schema.get("properties", {})
    out = []
    for name, info in spec.settings.model_fields.items():
        kind, choices = _schema_kind(props.get(name, {}))
        value = getattr(section, name, None) if section is not None else info.default
        shown = ("set" if value is not None else "not set") if kind == "secret" else _shown(value)
        out.append(
            {
                "name": name,
                "kind": kind,
                "choices": choices,
                "value": shown,
                "default": None if kind == "secret" else _default(info),
                "description": info.description or "",
                "from_env": config_file.from_env(doc, ("channels", spec.name, name)),
                # The flag of `chatfn run` that gives it (not editable here), or None.
                "from_command_line": config_file.covers(
                    ("channels", spec.name, name), command_line or {}
                ),
                "written": name in ((doc.get("channels") or {}).get(spec.name) or {}),
            }
        )
    return out


def listing(console: Console) -> dict[str, Any]:
    from chatfn.runtime.channel_registry import installed_channels

    settings: Any = console.settings
    doc = config_file.read(config_file.config_path(settings))
    found = installed_channels()
    running = dict(console._bot.delivery.channels.items())
    run = getattr(settings.channels, "run", None)
    saved = getattr(console, "saved_settings", None) or settings
    rows = []
    for name in sorted(found.specs):
        spec = found.specs[name]
        section = getattr(saved.channels, name, None)
        state = channel_state(name, running[name]) if name in running else None
        rows.append(
            {
                "name": name,
                "summary": spec.summary,
                "extra": spec.extra,
                "running": state,
                "configured": name in saved.channels.model_fields_set,
                "in_run": bool(run and name in run),
                "run_from_command_line": config_file.covers(
                    ("channels", "run"), console.command_line
                ),
                "readme": _readme(spec),
                "fields": fields(spec, section, doc, console.command_line),
                "can_test": spec.check is not None,
                "can_login": getattr(spec, "login", None) is not None,
            }
        )
    broken = [{"name": n, "error": why} for n, why in sorted(found.broken.items())]
    return {
        "channels": rows,
        "broken": broken,
        "file": str(config_file.config_path(settings)),
        "restart_needed": saved is not settings,  # a change saved waits for a restart
    }


def _readme(spec: Any) -> str:
    text = spec.readme or ""
    if text and "\n" not in text and text.endswith(".md"):
        try:
            from pathlib import Path

            return Path(text).read_text(encoding="utf-8")
        except OSError:
            return ""
    return str(text)


def _spec(name: str) -> Any:
    from chatfn.runtime.channel_registry import installed_channels

    spec = installed_channels().specs.get(name)
    if spec is None:
        raise ConsoleError(404, f"no installed channel {name}")
    return spec


def _edits(spec: Any, body: dict[str, Any]) -> list[config_file.Edit]:
    props = spec.settings.model_json_schema().get("properties", {})
    edits: list[config_file.Edit] = []
    for key, value in body.items():
        if key not in spec.settings.model_fields:
            raise ConsoleError(400, f"channels.{spec.name}.{key}: no such setting", key)
        kind, _ = _schema_kind(props.get(key, {}))
        path = ("channels", spec.name, key)
        if kind == "secret":
            if value is None:
                continue  # write-only: left out or null keeps the secret set
            edits.append((path, DELETE if value == "" else str(value)))
        else:
            edits.append((path, DELETE if value is None or value == "" else value))
    return edits


async def save(console: Console, user: str, address: str, name: str, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ConsoleError(400, "body: a JSON object of the channel's settings")
    spec = _spec(name)
    edits = _edits(spec, body)
    if not edits:
        raise ConsoleError(400, "nothing to change")
    settings: Any = console.settings
    # Saved but not in use until a restart: the page shows what the file now holds.
    console.saved_settings = await asyncio.to_thread(
        config_file.change, settings, edits, console.command_line
    )
    shown = {k: ("set" if v else "removed") if k in _secrets(spec) else v for k, v in body.items()}
    await console.audit(user, address, "channel.save", detail={"channel": name, **shown})
    # Channels hold connections made at start: a change takes effect with a restart.
    return {"saved": name, "applied": "restart"}


def _secrets(spec: Any) -> set[str]:
    props = spec.settings.model_json_schema().get("properties", {})
    return {k for k in spec.settings.model_fields if _schema_kind(props.get(k, {}))[0] == "secret"}


async def test(console: Console, user: str, address: str, name: str) -> dict[str, Any]:
    """The channel's online probe with the settings config.yaml holds now (what a restart
    would use), each line as `chatfn check --online` prints it."""
    spec = _spec(name)
    if spec.check is None:
        raise ConsoleError(409, f"the {name} channel has no probe")
    settings: Any = console.settings
    path = config_file.config_path(settings)
    try:
        now = await asyncio.to_thread(
            lambda: config_file.validate(
                config_file.plain(config_file.read(path)), settings, path.parent
            )
        )
        section = getattr(now.channels, name)
        probes = spec.check(section, True)
        if inspect.isawaitable(probes):
            probes = await probes
        lines = [
            {"status": p.status, "text": f"{p.name or 'channel ' + name}: {p.detail}"}
            for p in probes
        ]
    except ConsoleError:
        raise
    except Exception as exc:  # noqa: BLE001 - a probe that crashes is shown, not fatal
        lines = [{"status": "fail", "text": f"probe failed: {type(exc).__name__}: {exc}"}]
    ok = all(line["status"] != "fail" for line in lines)
    await console.audit(user, address, "channel.test", detail={"channel": name, "ok": ok})
    return {"ok": ok, "lines": lines}


class ChannelsPage:
    """`host.console.channels_page`: what the HTTP side calls."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def listing(self) -> dict[str, Any]:
        return listing(self.console)

    async def save(self, user: str, address: str, name: str, body: Any) -> dict[str, Any]:
        return await save(self.console, user, address, name, body)

    async def test(self, user: str, address: str, name: str) -> dict[str, Any]:
        return await test(self.console, user, address, name)
