"""docs/reference/config.md, generated from the settings models.

Every config key with its type, default and meaning: the core's sections, `models:`, every
built-in plugin's section and every one of chatfn's own channels' sections (the class
`parse_settings` builds). The meaning is the field's `Field(description=...)`, else the
comment line(s) right above the field in its class's source, else the section model's
docstring. Keys marked `DEPRECATED` (chatfn.common.config.is_deprecated) are listed as such.

docs/reference/http-api.md, the HTTP API, is rendered from the OpenAPI document the HTTP
channel serves at `GET /v1/openapi.json` (chatfn/channels/http/openapi.py).

docs/reference/cli.md and metrics.md: chatfn/reference_pages.py.

`python -m chatfn.docs_reference` prints the configuration page; `--write [FOLDER]` writes every
page there (default docs/reference). tests/test_docs_reference.py fails when the files and the
code differ, so the pages cannot drift: change a setting or a route, then run `--write`.
"""

from __future__ import annotations

import argparse
import ast
import enum
import inspect
import json
import sys
import textwrap
import types
import typing
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

from chatfn.common.config import RELATIVE_TO_CONFIG, is_deprecated
from chatfn.reference_pages import render_cli, render_metrics

__all__ = ["Entry", "entries", "main", "render", "render_http_api"]

DEFAULT_FOLDER = "docs/reference"
MAX_DEFAULT = 60  # characters of a default shown (a long prompt is cut)


@dataclass(frozen=True)
class Entry:
    """One key: its dotted path (`*` a key of a mapping, list items add no level)."""

    path: str
    type: str
    default: str
    meaning: str
    deprecated: bool
    section: bool


def settings_model() -> type[BaseModel]:
    """The class `parse_settings` builds with the built-in plugins and chatfn's own channels
    (not whatever else happens to be installed, so the page is the same everywhere)."""
    from chatfn.runtime.channel_registry import BUILTIN, Channels, find_channels
    from chatfn.runtime.plugins import load_builtins
    from chatfn.runtime.settings import settings_class

    found = find_channels()
    own = Channels()
    own.specs = {n: s for n, s in found.specs.items() if n in BUILTIN}
    return settings_class(load_builtins(), own)


@cache
def _comments(cls: type) -> dict[str, str]:
    """Field name -> the comment lines right above its annotation in the class body."""
    try:
        lines, _ = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return {}
    source = textwrap.dedent("".join(lines))
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    src = source.splitlines()
    found: dict[str, str] = {}
    for node in body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above: list[str] = []
            i = node.lineno - 2
            while i >= 0 and src[i].strip().startswith("#"):
                above.insert(0, src[i].strip().lstrip("#").strip())
                i -= 1
            found[node.target.id] = " ".join(t for t in above if t)
    return found


def _meaning(model: type[BaseModel], name: str, field: Any) -> str:
    if field.description:
        return " ".join(str(field.description).split())
    for cls in model.__mro__:
        if isinstance(cls, type) and name in getattr(cls, "__annotations__", {}):
            text = _comments(cls).get(name, "")
            if text:
                return text
    return ""


def _doc(model: type[BaseModel]) -> str:
    doc = inspect.cleandoc(model.__dict__.get("__doc__") or "")  # its own, not inherited
    return " ".join(doc.split("\n\n")[0].split())


def type_name(annotation: Any) -> str:
    """A reader's name for a type: `int`, `list[str]`, `"at" | "always"`, `secret`, `path`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        if any(a is RELATIVE_TO_CONFIG for a in args[1:]):
            return "path"
        return type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (list, dict, tuple, set):
        return f"{origin.__name__}[{', '.join(type_name(a) for a in args)}]"
    if annotation is type(None):
        return "null"
    if annotation is SecretStr:
        return "secret"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(json.dumps(m.value) for m in annotation)
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _value(value: Any) -> str:
    if isinstance(value, BaseModel):
        return ""
    if isinstance(value, SecretStr):
        return "(secret)"
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = str(value)
    return text if len(text) <= MAX_DEFAULT else text[: MAX_DEFAULT - 1] + "…"


def default_of(field: Any) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        try:
            return _value(field.default_factory())
        except TypeError:  # a factory that takes the validated data
            return ""
    if field.default is PydanticUndefined:
        return ""
    return _value(field.default)


def _sections(annotation: Any, path: str) -> list[tuple[type[BaseModel], str]]:
    """The section models a field's type holds, with the path their keys go under."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _sections(args[0], path)
    if origin in (typing.Union, types.UnionType):
        return [s for a in args for s in _sections(a, path)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, path)]
    if origin is dict and len(args) == 2:
        return _sections(args[1], f"{path}.*")
    if origin is list and args:
        return _sections(args[0], path)
    return []


def entries(model: type[BaseModel] | None = None, prefix: str = "") -> list[Entry]:
    """Every key of `model` (default: the whole config), depth first in declaration order."""
    model = model if model is not None else settings_model()
    out: list[Entry] = []
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        path = f"{prefix}{name}"
        inner = _sections(field.annotation, path)
        meaning = _meaning(model, name, field)
        if not meaning and inner:
            meaning = _doc(inner[0][0])
        out.append(
            Entry(
                path=path,
                type=type_name(field.annotation),
                default=default_of(field),
                meaning=meaning,
                deprecated=is_deprecated(field),
                section=bool(inner),
            )
        )
        seen: set[str] = set()
        for section, under in inner:
            for entry in entries(section, f"{under}."):
                if entry.path not in seen:
                    seen.add(entry.path)
                    out.append(entry)
    return out


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


INTRO = """\
# Configuration reference

<!-- generated by `python -m chatfn.docs_reference --write`: do not edit by hand -->

Every key of `config.yaml`, generated from the settings models (the core's sections,
`models:`, the built-in plugins' sections and chatfn's own channels' sections).
`chatfn init` writes a commented `config.yaml` with these keys. A path with `*` stands for
a key you choose (`models.*.provider`: `models.default.provider`); the keys of a list's
items are shown under the list's key (`chats.match.chat_id`). Unknown keys are errors.
Deprecated keys are still accepted so that an old config starts, but mean nothing new.
"""


def render(items: list[Entry] | None = None) -> str:
    """The page as Markdown: one table per top-level key."""
    items = items if items is not None else entries()
    parts = [INTRO]
    for top in dict.fromkeys(e.path.split(".")[0] for e in items):
        group = [e for e in items if e.path.split(".")[0] == top]
        parts.append(f"\n## `{top}`\n")
        parts.append("\n| key | type | default | meaning |\n| --- | --- | --- | --- |\n")
        for e in group:
            meaning = (("**Deprecated.** " if e.deprecated else "") + e.meaning).strip()
            default = f"`{_cell(e.default)}`" if e.default else ""
            parts.append(f"| `{e.path}` | {_cell(e.type)} | {default} | {_cell(meaning)} |\n")
    return "".join(parts)


HTTP_INTRO = """\
# HTTP API

<!-- generated by `python -m chatfn.docs_reference --write`: do not edit by hand -->

The HTTP channel (`channels.http`) serves this API, and describes it as an OpenAPI 3.1
document at `GET /v1/openapi.json` (load it into any OpenAPI viewer or client generator).
With `channels.http.token` set, every route marked "token" needs
`Authorization: Bearer <token>` (or `?token=`).
"""


def _schema_keys(doc: dict[str, Any], response: dict[str, Any]) -> str:
    content = response.get("content", {})
    if "application/json" not in content:
        return ", ".join(f"`{kind}`" for kind in content)
    schema = content["application/json"]["schema"]
    while "$ref" in schema:
        found: Any = doc
        for part in schema["$ref"].removeprefix("#/").split("/"):
            found = found[part]
        schema = found
    return ", ".join(f"`{key}`" for key in schema.get("properties", {}))


def render_http_api(doc: dict[str, Any] | None = None) -> str:
    """The HTTP API page, from the OpenAPI document (default: the channel's)."""
    if doc is None:
        from chatfn.channels.http.channel import MessageIn
        from chatfn.channels.http.openapi import document

        doc = document(MessageIn.model_json_schema())
    parts = [HTTP_INTRO]
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            token = " (token)" if op.get("security") else ""
            parts.append(f"\n## `{method.upper()} {path}`{token}\n\n{op['summary']}.\n")
            if op.get("description"):
                parts.append(f"\n{op['description']}\n")
            params = op.get("parameters", [])
            if params:
                parts.append("\n| parameter | in | type | required |\n| --- | --- | --- | --- |\n")
                for p in params:
                    kind = p["schema"].get("type", "")
                    parts.append(f"| `{p['name']}` | {p['in']} | {kind} | {p['required']} |\n")
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None:
                keys = _schema_keys(doc, {"content": {"application/json": body}})
                parts.append(f"\nBody (JSON): {keys}.\n")
            parts.append("\n| status | meaning | body |\n| --- | --- | --- |\n")
            for status, response in op["responses"].items():
                keys = _schema_keys(doc, response)
                parts.append(f"| {status} | {_cell(response['description'])} | {keys} |\n")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chatfn.docs_reference")
    parser.add_argument(
        "--write",
        nargs="?",
        const=DEFAULT_FOLDER,
        metavar="FOLDER",
        help=f"write the reference pages into FOLDER (default {DEFAULT_FOLDER})",
    )
    args = parser.parse_args(argv)
    page = render()
    if args.write is None:
        sys.stdout.write(page)
        return 0
    folder = Path(args.write)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.md").write_text(page, encoding="utf-8")
        (folder / "http-api.md").write_text(render_http_api(), encoding="utf-8")
        (folder / "cli.md").write_text(render_cli(), encoding="utf-8")
        (folder / "metrics.md").write_text(render_metrics(), encoding="utf-8")
    except OSError as exc:
        print(f"docs_reference: {folder}: {exc}", file=sys.stderr)
        return 1
    print(f"docs_reference: {folder}/config.md, http-api.md, cli.md and metrics.md written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
