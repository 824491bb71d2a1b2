"""The console's Models page (issue 39): `models:` as the operator sees it (keys only as set / not
set, values from `${VAR}` marked and not editable), a model added, edited or removed and the
default chosen, each written to config.yaml (config_file.py) and then put in use by the running
bot without a restart (the changed models are built again on their next use); and a test that
makes one real round trip with a saved model and says its answer or its provider's error in one
line."""

from __future__ import annotations

import time
from typing import Any

from chatfn.runtime.console import config_file
from chatfn.runtime.console.config_file import DELETE
from chatfn.runtime.console.errors import ConsoleError

# The console (chatfn/runtime/console/__init__.py, which imports this module): as Any, so the
# two do not import each other (tests/test_layers.py counts imports for the type checker).
Console = Any

# The fields the page edits; every other key of a model's section stays as written.
FIELDS = ("provider", "base_url", "model", "fallback", "vision", "streaming")
PROVIDERS = ("openai", "anthropic", "gemini")
TEST_PROMPT = "Reply with one short sentence: is this connection working?"


def listing(console: Console) -> dict[str, Any]:
    settings: Any = console.settings
    doc = config_file.read(config_file.config_path(settings))
    raw = doc.get("models") or {}
    rows = []
    for name, cfg in settings.models.items():
        env = sorted(
            ".".join(p[2:]) or "*" for p in config_file.env_paths(doc) if p[:2] == ("models", name)
        )
        rows.append(
            {
                "name": name,
                "provider": cfg.provider,
                "base_url": cfg.base_url,
                "model": cfg.model,
                "api_key": "set" if cfg.api_key is not None else "not set",
                "price": cfg.price.model_dump() if cfg.price is not None else None,
                "fallback": list(cfg.fallback),
                "vision": cfg.vision,
                "streaming": cfg.streaming,
                "from_env": env,  # keys written as ${VAR}: shown, not editable here
                "in_file": name in raw,  # else: from OPENAI_API_KEY/CHATFN_MODEL (the environment)
            }
        )
    return {
        "default": settings.chat_model_name(),
        "default_from_env": config_file.from_env(doc, ("bot", "model")),
        "models": rows,
        "providers": list(PROVIDERS),
        "file": str(config_file.config_path(settings)),
    }


def _edits(name: str, body: dict[str, Any], existing: bool) -> list[config_file.Edit]:
    """The page's form as edits of `models.<name>`: absent keys stay as they are; `api_key` is
    write-only (absent or null: kept; "": removed)."""
    edits: list[config_file.Edit] = []
    base = ("models", name)
    for key in FIELDS:
        if key in body:
            value = body[key]
            empty = value is None or value == "" or value == []  # back to the default
            edits.append(((*base, key), DELETE if empty else value))
    if "price" in body:
        price = body["price"]
        if isinstance(price, dict):
            price = {k: v for k, v in price.items() if v not in (None, "")} or None
        edits.append(((*base, "price"), DELETE if not price else price))
    secret = body.get("api_key")
    if secret is not None:
        edits.append(((*base, "api_key"), DELETE if secret == "" else str(secret)))
    if not existing and not body.get("model"):
        raise ConsoleError(400, "model: the provider's model id", "model")
    return edits


async def save(console: Console, user: str, address: str, name: str, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ConsoleError(400, "body: a JSON object")
    if not name.replace("-", "_").replace(".", "_").isidentifier():
        raise ConsoleError(400, "name: letters, digits, _ . -", "name")
    settings: Any = console.settings
    existing = name in settings.models
    edits = _edits(name, body, existing)
    await _change(console, edits)
    shown = {k: v for k, v in body.items() if k != "api_key"}
    if "api_key" in body:
        shown["api_key"] = "removed" if body["api_key"] == "" else "set"
    await console.audit(
        user, address, "model.save" if existing else "model.add", detail={"model": name, **shown}
    )
    return {"saved": name, "applied": "reload"}


async def remove(console: Console, user: str, address: str, name: str) -> dict[str, Any]:
    settings: Any = console.settings
    if name not in settings.models:
        raise ConsoleError(404, f"no model {name}")
    if settings.chat_model_name() == name and len(settings.models) > 1:
        raise ConsoleError(409, f"{name} is the default model: choose another default first")
    users = [n for n, cfg in settings.models.items() if name in cfg.fallback]
    edits: list[config_file.Edit] = [(("models", name), DELETE)]
    edits += [
        (("models", n, "fallback"), [f for f in settings.models[n].fallback if f != name])
        for n in users
    ]
    if settings.bot.model == name:
        edits.append((("bot", "model"), DELETE))
    await _change(console, edits)
    await console.audit(user, address, "model.remove", detail={"model": name})
    return {"removed": name, "applied": "reload"}


async def set_default(console: Console, user: str, address: str, body: Any) -> dict[str, Any]:
    name = body.get("name") if isinstance(body, dict) else None
    settings: Any = console.settings
    if not isinstance(name, str) or name not in settings.models:
        raise ConsoleError(400, "name: one of the models", "name")
    await _change(console, [(("bot", "model"), name)])
    await console.audit(user, address, "model.default", detail={"model": name})
    return {"default": name, "applied": "reload"}


async def _change(console: Console, edits: list[config_file.Edit]) -> None:
    import asyncio

    settings: Any = console.settings
    new = await asyncio.to_thread(config_file.change, settings, edits, console.command_line)
    await apply(console, new)


async def apply(console: Console, new: Any) -> None:
    """Put the new `models:` and `bot.model` in use: the running settings take them, the models
    whose config changed are dropped (built again on next use) and the default is chosen again."""
    bot: Any = console._bot
    settings: Any = console.settings
    old = dict(settings.models)
    settings.models.clear()
    settings.models.update(new.models)
    settings.bot.model = new.bot.model
    models = bot.models
    dropped = []
    for name, cfg in old.items():
        if new.models.get(name) != cfg:
            built = models._models.pop(name, None)
            if built is not None:
                dropped.append(built)
    models.default = None
    bot.model = models.set_default(None)
    for model in dropped:
        if model is not bot.model:
            try:
                await model.aclose()
            except Exception:  # noqa: BLE001 - a model closing badly must not fail the save
                pass


async def test(console: Console, user: str, address: str, name: str) -> dict[str, Any]:
    """One real request to the saved model `name` (no fallback): its answer, or its provider's
    error, in one line."""
    from providers.factory import build_model
    from providers.types import Message

    settings: Any = console.settings
    cfg = settings.models.get(name)
    if cfg is None:
        raise ConsoleError(404, f"no model {name}")
    started = time.perf_counter()
    model = None
    try:
        model = build_model(name, cfg)
        answer = await model.complete([Message(role="user", content=TEST_PROMPT)], [])
        text = " ".join((answer.content or "").split())[:200] or "(an empty answer)"
        result = {"ok": True, "line": text}
    except Exception as exc:  # noqa: BLE001 - the provider's error is the answer here
        line = " ".join(str(exc).split())[:300] or type(exc).__name__
        result = {"ok": False, "line": f"{type(exc).__name__}: {line}"}
    finally:
        if model is not None:
            await model.aclose()
    result["ms"] = round((time.perf_counter() - started) * 1000)
    await console.audit(user, address, "model.test", detail={"model": name, "ok": result["ok"]})
    return result


class ModelsPage:
    """`host.console.models_page`: what the HTTP side calls (it may import the console package
    only)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def listing(self) -> dict[str, Any]:
        return listing(self.console)

    async def save(self, user: str, address: str, name: str, body: Any) -> dict[str, Any]:
        return await save(self.console, user, address, name, body)

    async def remove(self, user: str, address: str, name: str) -> dict[str, Any]:
        return await remove(self.console, user, address, name)

    async def set_default(self, user: str, address: str, body: Any) -> dict[str, Any]:
        return await set_default(self.console, user, address, body)

    async def test(self, user: str, address: str, name: str) -> dict[str, Any]:
        return await test(self.console, user, address, name)
