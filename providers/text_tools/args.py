"""Tolerant parsing of the values models write for tool arguments.

Models without native tool calling write JSON by hand, and they get it wrong in a handful of
recurring ways: raw newlines inside strings, Python literals (`True`, `None`, single quotes),
unescaped inner quotes, trailing commas, comments, a missing closing brace. The repair order is
fixed and documented in README.md, cheapest and most faithful first:

1. strict `json.loads`;
2. `json.loads(strict=False)` (raw control characters inside strings);
3. `ast.literal_eval` (Python literals; never `eval`), converted to JSON-compatible values;
4. unescape once, for text whose quotes were escaped one level too many (GLM raw-string output);
5. `json_repair`, accepted only when it returns the container type the text started with, so a
   sentence is never "repaired" into a string or a one-element list.

Raw-text values (XML parameter dialects) are typed with the tool's JSON schema when we have it.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping
from typing import Any

import json_repair

_MISSING = object()


def _literal_to_json(value: Any) -> Any:
    """Convert an `ast.literal_eval` result to JSON-compatible values, or raise ValueError.

    Tuples become lists; bytes, sets, complex numbers and non-string keys are refused because
    JSON has no faithful spelling for them.
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise ValueError("non-finite number")
    if isinstance(value, list | tuple):
        return [_literal_to_json(v) for v in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError("non-string key")
            out[key] = _literal_to_json(item)
        return out
    raise ValueError(f"unsupported literal {type(value).__name__}")


def parse_tolerant(text: str) -> Any:
    """Parse `text` as a JSON value with the repair chain above; return _MISSING on failure."""
    stripped = text.strip()
    if not stripped:
        return _MISSING
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    try:
        return json.loads(stripped, strict=False)
    except ValueError:
        pass
    try:
        return _literal_to_json(ast.literal_eval(stripped))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    if '\\"' in stripped:
        try:
            unescaped = json.loads('"' + stripped.replace("\n", "\\n") + '"')
            return json.loads(unescaped, strict=False)
        except ValueError:
            pass
    if stripped[0] not in "{[":
        return _MISSING
    try:
        repaired = json_repair.loads(stripped)
    except Exception:  # noqa: BLE001 - third-party repair may raise anything; treat as failure
        return _MISSING
    expected_type = dict if stripped[0] == "{" else list
    if not isinstance(repaired, expected_type):
        return _MISSING
    if expected_type is list and any(not isinstance(v, dict | list) for v in repaired):
        # json_repair turns `{invalid json}` into ['invalid json}']: a guess, not a repair.
        return _MISSING
    return repaired


def is_missing(value: Any) -> bool:
    return value is _MISSING


def complete_truncated_json(text: str) -> Any:
    """Policy for a JSON body cut off at end of stream (see README, "Truncated calls").

    Accept it only when what is missing is closing syntax: the text does not end inside a string
    or after a key, and appending the missing `}`/`]` makes it valid JSON. A value cut mid-way
    (inside a string, a half-written number or literal) is refused, because executing a call with
    half an argument is worse than asking the model again.
    """
    stack: list[str] = []
    in_str = False
    esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return _MISSING
    if in_str:
        return _MISSING
    candidate = text.rstrip() + "".join(reversed(stack))
    for strict in (True, False):
        try:
            return json.loads(candidate, strict=strict)
        except ValueError:
            continue
    return _MISSING


#: Type names that are not JSON Schema's but appear in tool definitions written by hand (and
#: that vLLM's Qwen3-Coder and Step-3 parsers accept): read as the JSON type they mean.
_TYPE_ALIASES = {"float": "number", "double": "number", "int": "integer"}


def schema_types(schema: Mapping[str, Any] | None) -> list[str]:
    """The JSON types a property schema allows, in the schema's order (`type` as a string or a
    list, or the members of anyOf/oneOf); `float`/`double`/`int` read as number/integer."""
    if not schema:
        return []
    kind = schema.get("type")
    if isinstance(kind, str):
        return [_TYPE_ALIASES.get(kind, kind)]
    if isinstance(kind, list):
        return [_TYPE_ALIASES.get(k, k) for k in kind if isinstance(k, str)]
    out: list[str] = []
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            for option in options:
                if isinstance(option, Mapping):
                    out += [k for k in schema_types(option) if k not in out]
    return out


_JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
    "array": list,
    "null": type(None),
}


def _union_value(raw: str, kinds: list[str]) -> Any:
    """A raw value under a union type: the first non-string member, in the schema's order, that
    the text spells exactly as JSON (`42`, `null`, `true`, `[1]`); otherwise the text itself.
    String matches any text, so it is the fallback wherever it stands in the union; exact JSON
    spelling keeps `007` or `1.50` a string rather than a guessed number."""
    text = raw.strip()
    try:
        value = json.loads(text)
    except ValueError:
        value = _MISSING
    if text == "None" and "null" in kinds:
        value = None
    if not is_missing(value):
        for kind in kinds:
            expected = _JSON_TYPES.get(kind)
            if expected is None:
                continue
            if kind in ("integer", "number") and isinstance(value, bool):
                continue
            if kind == "integer" and isinstance(value, float) and "string" in kinds:
                continue
            if isinstance(value, expected):
                return value
    if "string" in kinds:
        return raw
    for kind in kinds:
        coerced = coerce_raw(raw, {"type": kind})
        if coerced is not raw:
            return coerced
    return raw


def coerce_raw(raw: str, schema: Mapping[str, Any] | None) -> Any:
    """Type a raw-text parameter value (Qwen3-Coder, GLM, Cline-style XML) by its schema.

    Without a schema a value stays a string unless it is a JSON object or array: the executor
    validates types against the function's model anyway, and guessing that "007" is a number
    would lose data. A union type (`["string", "integer"]`, anyOf) is followed in order
    (`_union_value`).
    """
    kinds = schema_types(schema)
    if len(kinds) > 1:
        return _union_value(raw, kinds)
    kind = kinds[0] if kinds else None
    text = raw.strip()
    if kind == "string":
        return raw
    if kind in ("integer", "number"):
        number = _number(text)
        if number is None:
            # GLM quotes a number now and then (`"123"`, or `\"123\"` one level over-escaped);
            # SGLang's GLM-4.7 parser reads both as 123. Text that is not a number stays as it is.
            inner = _unquoted(text)
            number = _number(inner) if inner is not None else None
        return raw if number is None else number
    if kind == "boolean":
        lowered = text.lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        return raw
    if kind == "null" and text.lower() in ("null", "none"):
        return None
    if kind in ("array", "object") or (kind is None and text[:1] in ("{", "[")):
        value = parse_tolerant(text)
        if not is_missing(value):
            if kind == "array" and not isinstance(value, list):
                return [value]
            return value
        if kind == "array":
            return [raw]
    return raw


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def coerce_json_spelled(raw: str) -> Any:
    """A raw value whose parameter has no schema, read as vLLM's and SGLang's GLM parsers read
    it: the JSON value its text spells exactly (`42`, `-1.5`, `true`, `null`, `[1, 2]`), else
    what `coerce_raw` makes of it without a schema. Exact JSON keeps `007`, `1_000` or `True`
    text; NaN and infinities are not JSON and stay text too."""
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except ValueError:
        return coerce_raw(raw, None)
    if isinstance(value, float) and not math.isfinite(value):
        return raw
    return value


def _number(text: str) -> int | float | None:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _unquoted(text: str) -> str | None:
    """The inside of `"..."` or `\\"...\\"`, or None."""
    for quote in ('\\"', '"'):
        if len(text) >= 2 * len(quote) and text.startswith(quote) and text.endswith(quote):
            return text[len(quote) : -len(quote)].strip()
    return None


def property_schema(
    schemas: Mapping[str, Mapping[str, Any]] | None, tool: str, param: str
) -> Mapping[str, Any] | None:
    """The JSON schema of one parameter of one tool, if known."""
    if not schemas:
        return None
    schema = schemas.get(tool)
    if not isinstance(schema, Mapping):
        return None
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return None
    prop = props.get(param)
    return prop if isinstance(prop, Mapping) else None
