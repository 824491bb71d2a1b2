"""Body parsers: turn the text inside one recognised call section into (name, arguments) pairs.

Each dialect an open model emits gets one small function here, with the model family it is for.
They are pure functions of the section text: the streaming parser (parser.py) decides where a
section starts and ends, these decide what it says. They return None when the text is not a
call at all (it then stays content), and never filter by tool name (the parser does that, so
that a rejected name can be logged).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from typing import Any

from providers.text_tools.args import (
    _literal_to_json,
    complete_truncated_json,
    is_missing,
    parse_tolerant,
)

Schemas = Mapping[str, Mapping[str, Any]] | None
Found = list[tuple[str, Any]]

_DECODER = json.JSONDecoder(strict=False)
_NAME_KEYS = ("name", "tool", "tool_name", "function", "action")
_ARG_KEYS = ("arguments", "parameters", "args", "input", "action_input")


def _normalise_arguments(value: Any) -> Any:
    """`arguments` given as a JSON-encoded string (Granite) is decoded once; None becomes {}."""
    if value is None:
        return {}
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return json.loads(stripped, strict=False)
            except ValueError:
                return value
    return value


def call_from_dict(value: dict[str, Any], require_args: bool) -> tuple[str, Any] | None:
    """Recognise the object shapes a call is written in.

    `{"name", "arguments"|"parameters"}` (Hermes, Llama 3, Mistral), `{"tool", "arguments"}` (our
    json_block format), `{"function": {...}}` (OpenAI-shaped), `{"function_call": {...}}`
    (DeepChat), `{"action", "action_input"}` (LangChain JSON agent; "Final Answer" is not a
    call). `require_args` is set for text without a call marker: there a bare
    `{"name": "Alice"}` is data, not a call.
    """
    if len(value) == 1:
        ((key, inner),) = value.items()
        if key in ("function_call", "function", "tool_call") and isinstance(inner, dict):
            return call_from_dict(inner, require_args)
    if isinstance(value.get("function"), dict):
        return call_from_dict(value["function"], require_args)
    name = None
    for key in _NAME_KEYS:
        candidate = value.get(key)
        if isinstance(candidate, str) and candidate.strip():
            name = candidate.strip()
            break
    if name is None:
        return None
    if "action" in value and name == value.get("action") and name.lower() == "final answer":
        return None
    for key in _ARG_KEYS:
        if key in value:
            return name, _normalise_arguments(value[key])
    if require_args:
        return None
    return name, {}


def calls_from_value(value: Any, require_args: bool) -> Found | None:
    """A parsed JSON value as calls: one call object, or a list made only of call objects."""
    if isinstance(value, dict):
        found = call_from_dict(value, require_args)
        return [found] if found else None
    if isinstance(value, list) and value:
        out: Found = []
        for item in value:
            if not isinstance(item, dict):
                return None
            found = call_from_dict(item, require_args)
            if found is None:
                return None
            out.append(found)
        return out
    return None


_SEPARATORS = re.compile(r"[\s,;]*")
_NEXT_LINE_OBJECT = re.compile(r"\n\s*[\[{]")


def parse_json_calls(
    body: str, truncated: bool = False, require_args: bool = False
) -> Found | None:
    """JSON call objects: one object, an array, or several separated by `,`, `;` or newlines.

    A bad object among good ones (MiniMax writes one per line) is skipped, not fatal. When the
    whole body is one malformed value, the repair chain (args.parse_tolerant) gets it. For a
    section cut off at end of stream only closing syntax may be added
    (args.complete_truncated_json).
    """
    text = body.strip()
    if not text:
        return None
    if not truncated:
        try:
            return calls_from_value(json.loads(text), require_args)
        except ValueError:
            pass
    values, failed = _json_values(text, truncated)
    out: Found = []
    for value in values:
        out.extend(calls_from_value(value, require_args) or [])
    if out:
        return out
    if truncated:
        return None
    if failed or not values:
        repaired = parse_tolerant(text)
        if not is_missing(repaired):
            return calls_from_value(repaired, require_args)
    return None


def _json_values(text: str, truncated: bool) -> tuple[list[Any], bool]:
    """The JSON values written one after another in `text` (separated by `,`, `;` or space),
    and whether one of them could not be read (it is skipped up to the next line that starts a
    value; a value cut off at the end of a truncated section gets its closing syntax)."""
    values: list[Any] = []
    pos = 0
    failed = False
    while pos < len(text):
        pos = _SEPARATORS.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= len(text):
            break
        try:
            value, pos = _DECODER.raw_decode(text, pos)
            values.append(value)
            continue
        except ValueError:
            pass
        nxt = _NEXT_LINE_OBJECT.search(text, pos)
        if truncated and nxt is None:
            value = complete_truncated_json(text[pos:])
            if not is_missing(value):
                values.append(value)
            break
        failed = True
        if nxt is None:
            break
        pos = nxt.start() + 1
    return values, failed


def parse_json_sections(sections: list[str], truncated: bool) -> Found | None:
    """Calls written one per marker with no closer (Granite 20B FC: `<function_call> {..}` on
    each line): each piece between markers is parsed alone, and only the last may be cut off."""
    out: Found = []
    for i, section in enumerate(sections):
        if section.strip():
            out += parse_json_calls(section, truncated and i == len(sections) - 1) or []
    return out or None


# --- pythonic: [get_weather(city='SF'), f()] (Llama 3.2/4, LFM2) -------------------------------


def call_node(node: ast.expr) -> tuple[str, Any] | None:
    if not isinstance(node, ast.Call) or node.args:
        return None
    func = node.func
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return None
    parts.append(func.id)
    name = ".".join(reversed(parts))
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            return None
        try:
            args[kw.arg] = _node_value(kw.value)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            return None
    return name, args


#: JSON literals written inside a Python call (LFM2 writes `metadata={"reminder": true}`).
_JSON_NAMES = {"true": True, "false": False, "null": None}


def _node_value(node: ast.expr) -> Any:
    """A literal argument as JSON; like `ast.literal_eval` but JSON's true/false/null are read
    as the values they spell (a bare name is never looked up, so nothing is evaluated)."""
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.List | ast.Tuple):
        return [_node_value(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                raise ValueError("dict unpacking")
            k = _node_value(key)
            if not isinstance(k, str):
                raise ValueError("non-string key")
            out[k] = _node_value(value)
        return out
    return _literal_to_json(ast.literal_eval(node))


def _split_top_level(inner: str, sep: str = ",") -> list[str]:
    """Split the inside of a call list at top-level `sep` (quotes and brackets respected)."""
    parts: list[str] = []
    depth = 0
    quote: str | None = None
    escape = False
    start = 0
    for i, ch in enumerate(inner):
        if quote:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return parts


def _parse_expr(src: str) -> ast.expr | None:
    try:
        return ast.parse(src, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None


def _escape_newlines_in_strings(src: str) -> str:
    """`src` with each raw newline inside a single- or double-quoted literal written as `\\n`."""
    out: list[str] = []
    quote = ""
    i = 0
    while i < len(src):
        ch = src[i]
        if quote:
            if ch == "\\" and i + 1 < len(src):
                out.append(src[i : i + 2])
                i += 2
                continue
            if ch == quote:
                quote = ""
            elif ch == "\n":
                ch = "\\n"
        elif ch in "'\"":
            quote = ch
        out.append(ch)
        i += 1
    return "".join(out)


def parse_pythonic(text: str) -> Found | None:
    """A Python list of keyword-argument calls, parsed with `ast` (never evaluated).

    One unconvertible call (a bytes literal, a syntax error) does not drop its siblings: the list
    is split at top-level commas and each call parsed alone.
    """
    src = text.strip()
    if not src.startswith("["):
        return None
    tree = _parse_expr(src)
    if tree is None and "\n" in src:
        # A raw line break inside a quoted argument (a multi-line shell command, as LFM2 writes
        # it) is invalid Python but plainly meant as `\n`: escape it inside strings and retry.
        src = _escape_newlines_in_strings(src)
        tree = _parse_expr(src)
    if isinstance(tree, ast.List):
        listed = [call_node(el) for el in tree.elts]
        return [f for f in listed if f] or None
    if tree is not None:
        return None
    inner = src[1:-1] if src.endswith("]") else src[1:]
    good: Found = []
    for part in _split_top_level(inner):
        part = part.strip()
        if not part:
            continue
        try:
            node = ast.parse(part, mode="eval").body
        except (SyntaxError, ValueError, RecursionError):
            continue
        call = call_node(node)
        if call:
            good.append(call)
    return good or None


def parse_call_lines(body: str) -> Found | None:
    """OLMo 3's `<function_calls>` block: Python calls `f(a=1)`, one per line, no list brackets.
    Each line is parsed alone (`ast`, never evaluated), so one unconvertible call (a bytes or
    non-finite literal) does not drop its siblings; JSON's true/false/null are read as such."""
    out: Found = []
    for line in _split_top_level(body.strip(), "\n"):
        node = _parse_expr(line.strip()) if line.strip() else None
        found = call_node(node) if node is not None else None
        if found:
            out.append(found)
    return out or None


def parse_json_or_pythonic(body: str, truncated: bool) -> Found | None:
    """Wrappers that carry either format (`<|python_start|>`, LFM2 `<|tool_call_start|>`)."""
    stripped = body.strip()
    if stripped.startswith("[") and not stripped.startswith("[{"):
        found = parse_pythonic(stripped)
        if found:
            return found
    return parse_json_calls(body, truncated)
