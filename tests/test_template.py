"""config.yaml.template and the settings schema name the same keys: every key the template shows
(set, or commented out as an example) exists in the schema the bot validates with, and every
key of that schema (core, models, channels, built-in plugin sections) appears in the template.

The schema is the class `parse_settings` really builds, so sections that move (channel
settings into channel packages) or that plugins add are walked wherever they come from."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from chatfn.common.config import is_deprecated
from chatfn.runtime.settings import parse_settings

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "config.yaml.template"
# `key:` at the start of a line (after the indentation, and an optional `- ` of a list item).
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<item>- +)?(?P<key>[A-Za-z_][A-Za-z0-9_]*):(?:\s+|$)")
FREE = "<free>"  # a mapping whose keys are the user's (personas, headers, welcome.messages)
# Deprecated mappings: the template shows the key and says what replaces it, no example entry.


def schema_paths(model: type[BaseModel], prefix: str = "") -> dict[str, str]:
    """Dotted path -> kind ("leaf", "section" or FREE) for every field, `*` standing for a
    key of a mapping of sections (`models.*.provider`) and list items adding no level."""
    paths: dict[str, str] = {}
    for name, field in model.model_fields.items():
        if field.exclude or is_deprecated(field):  # accepted, not shown (chatfn init)
            continue
        path = f"{prefix}{name}"
        paths.update(_walk_type(field.annotation, path))
    return paths


def _walk_type(annotation: Any, path: str) -> dict[str, str]:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        found: dict[str, str] = {}
        for arg in args:
            if arg is not type(None):
                found.update(_walk_type(arg, path))
        kinds = {found.get(path)} - {None}
        found[path] = "section" if "section" in kinds else (kinds.pop() if kinds else "leaf")
        return found
    if origin is typing.Annotated:
        return _walk_type(args[0], path)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {path: "section", **schema_paths(annotation, f"{path}.")}
    if origin is dict:
        value = args[1] if len(args) == 2 else Any
        inner = _walk_type(value, f"{path}.*")
        if inner.get(f"{path}.*") == "section":
            return {path: "section", **inner}
        return {path: FREE}
    if origin is list and args:
        inner = _walk_type(args[0], path)
        if inner.get(path) == "section":
            return inner
    return {path: "leaf"}


def template_paths(text: str) -> set[str]:
    """Every key path the template shows: its YAML keys, and the keys of commented-out example
    lines (`# timezone: Europe/Berlin`: the `# ` is taken away, the indentation kept), with
    the keys of flow mappings (`functions: {disabled: [...]}`) too."""
    found: set[str] = set()
    stack: list[tuple[int, str]] = []
    for raw in text.splitlines():
        line = raw
        stripped = line.lstrip(" ")
        if stripped.startswith("#"):
            cut = len(line) - len(stripped)
            line = line[:cut] + stripped[2:] if stripped.startswith("# ") else ""
            if line.lstrip(" ").startswith("#"):
                continue  # a comment continuing a comment
        m = KEY_LINE.match(line)
        if m is None:
            continue
        indent = len(m.group("indent")) + len(m.group("item") or "")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([p for _, p in stack] + [m.group("key")])
        found.add(path)
        stack.append((indent, m.group("key")))
        value = line[m.end() :].split(" #")[0].strip()
        if value.startswith("{"):
            found.update(_flow_keys(yaml.safe_load(value), path))
    return found


def _flow_keys(value: Any, path: str) -> set[str]:
    keys: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            keys.add(f"{path}.{key}")
            keys.update(_flow_keys(inner, f"{path}.{key}"))
    return keys


def _normalise(path: str, schema: dict[str, str]) -> str | None:
    """The schema path a template path stands for (a mapping's keys become `*`); None when it
    is under a free mapping (its keys are the user's)."""
    parts = path.split(".")
    out: list[str] = []
    for part in parts:
        parent = ".".join(out)
        if parent and schema.get(parent) == FREE:
            return None
        candidate = f"{parent}.{part}" if parent else part
        if candidate not in schema and f"{parent}.*" in schema:
            candidate = f"{parent}.*"
        out = candidate.split(".")
    return ".".join(out)


def test_template_keys_and_schema_keys_are_the_same() -> None:
    settings = parse_settings({"plugins": {"paths": []}})
    schema = schema_paths(type(settings))
    shown = {_normalise(p, schema) for p in template_paths(TEMPLATE.read_text(encoding="utf-8"))}
    shown.discard(None)
    unknown = sorted(p for p in shown if p not in schema)
    assert unknown == [], f"config.yaml.template shows keys the schema does not have: {unknown}"
    # Every schema key the template leaves out: a mapping of sections needs one example entry.
    missing = sorted(p for p in schema if p not in shown)
    assert missing == [], f"config.yaml.template does not show these keys: {missing}"


def test_the_template_itself_is_a_valid_config(monkeypatch: Any) -> None:
    """Copied to config.yaml as it is, the template starts a bot (no environment set)."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CHATFN_MODEL"):
        monkeypatch.delenv(var, raising=False)
    data = yaml.safe_load(TEMPLATE.read_text(encoding="utf-8"))
    data["plugins"] = {"paths": []}
    parse_settings(data)


def test_the_walker_sees_a_missing_or_unknown_key() -> None:
    """The check above could pass by seeing nothing: a made-up key and a dropped one show."""
    schema = schema_paths(type(parse_settings({"plugins": {"paths": []}})))
    text = TEMPLATE.read_text(encoding="utf-8")
    assert "bot.history_size" in {_normalise(p, schema) for p in template_paths(text)}
    changed = text.replace("  history_size: 20", "  histroy_size: 20")
    paths = {_normalise(p, schema) for p in template_paths(changed)}
    assert "bot.histroy_size" in paths and "bot.history_size" not in paths
    assert {"models.*.provider", "mcp.servers.*.command", "chats.match.chat_id"} <= paths


def test_the_docs_yaml_examples_use_schema_keys() -> None:
    """Every ```yaml block of README and docs/ shows keys the schema has (deprecated ones are
    shown only where the text says so)."""
    schema = schema_paths(type(parse_settings({"plugins": {"paths": []}})))
    wrong: list[str] = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        blocks = re.findall(r"```yaml\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
        for block in blocks:
            for path in template_paths(block):
                normal = _normalise(path, schema)
                if normal is not None and normal not in schema:
                    wrong.append(f"{doc.name}: {path}")
    assert wrong == []


def test_chatfn_init_writes_no_deprecated_key(tmp_path: Path) -> None:
    """What `chatfn init` writes means something now (issue 39): keys still accepted for old
    configs (marked DEPRECATED in the settings models) are not in it, and an old config that
    sets them still loads."""
    from chatfn.init import init

    init(tmp_path)
    written = (tmp_path / "config.yaml").read_text(encoding="utf-8")
    for key in ("resend_queue:", "resend_max_age:", "quote_replies:"):
        assert key not in written
    assert not re.search(r"^  chats:", written, re.M)  # function_calls.chats
    old = {
        "plugins": {"paths": []},
        "function_calls": {"chats": {"group:1": {"disabled": ["roll_dice"]}}},
        "channels": {"onebot": {"resend_queue": 5, "quote_replies": True}},
    }
    parse_settings(old)
