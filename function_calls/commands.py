"""Slash commands: `/name key=value ...`, `/name free text`, `/name {json}`, `/name`.

They run a registered function directly, without any model call, so a user (or an admin) can
always reach a function even when no model is configured or the model is down.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from chatfn.common.i18n import translate
from function_calls.spec import FunctionSpec

COMMAND = re.compile(r"^/([A-Za-z0-9_-]{1,64})(?:\s+(.*))?$", re.DOTALL)
KEY_VALUE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)


class CommandSyntaxError(ValueError):
    """The command's arguments could not be read; the message says how to write them."""


@dataclass(slots=True)
class ParsedCommand:
    name: str
    rest: str


def split_command(text: str) -> ParsedCommand | None:
    """`/name rest` -> ParsedCommand; anything else (including a bare "/") -> None."""
    m = COMMAND.match(text.strip())
    if m is None:
        return None
    return ParsedCommand(m.group(1), (m.group(2) or "").strip())


def _value(raw: str) -> Any:
    """`3` -> 3, `true` -> True, `[1,2]` -> list, anything else stays text; pydantic's lax mode
    converts further ("3" for a float field) at validation."""
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, ValueError):
        return raw


def parse_arguments(spec: FunctionSpec, rest: str, language: str = "en") -> dict[str, Any]:
    if not rest:
        return {}
    if rest.startswith("{"):
        try:
            value = json.loads(rest)
        except json.JSONDecodeError as exc:
            raise CommandSyntaxError(
                translate(language, "core.bad_json", name=spec.name, error=exc.msg)
            ) from None
        if not isinstance(value, dict):
            raise CommandSyntaxError(translate(language, "core.json_not_object"))
        return value
    try:
        tokens = shlex.split(rest)
    except ValueError:
        tokens = None  # an apostrophe in free text, for instance
    fields = {name for name, _, _ in spec.fields}
    if tokens and all((m := KEY_VALUE.match(t)) and m.group(1) in fields for t in tokens):
        return {k: _value(v) for k, v in (t.split("=", 1) for t in tokens)}
    text_field = spec.single_text_field
    if text_field is not None:
        return {text_field: rest}
    unknown = [m.group(1) for t in tokens or () if (m := KEY_VALUE.match(t))]
    unknown = [k for k in unknown if k not in fields]
    if unknown:  # `/roll_dice cont=3`: say which key, and the one it was probably meant to be
        close = difflib.get_close_matches(unknown[0], sorted(fields), n=1)
        hint = translate(language, "core.did_you_mean", close=close[0]) if close else ""
        said = translate(language, "core.unknown_key", name=spec.name, key=unknown[0], close=hint)
        raise CommandSyntaxError(f"{said}\n{usage(spec, language)}")
    raise CommandSyntaxError(usage(spec, language))


def usage(spec: FunctionSpec, language: str = "en") -> str:
    """`Usage: /name a=… [b=…]  (or /name <a>)` in `language`."""
    line = spec.usage_line
    if spec.single_text_field:
        line += "  " + translate(
            language, "core.usage_or_text", name=spec.name, field=spec.single_text_field
        )
    return translate(language, "core.usage", line=line)
