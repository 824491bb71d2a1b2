"""Body parsers: turn the text inside one recognised call section into (name, arguments) pairs.

Each dialect an open model emits gets one small function here, with the model family it is for.
They are pure functions of the section text: the streaming parser (parser.py) decides where a
section starts and ends, these decide what it says. They return None when the text is not a
call at all (it then stays content), and never filter by tool name (the parser does that, so
that a rejected name can be logged).
"""

from __future__ import annotations

import ast
import html
import json
import re
from collections.abc import Mapping
from typing import Any

from providers.text_tools.args import (
    _literal_to_json,
    coerce_raw,
    complete_truncated_json,
    is_missing,
    parse_tolerant,
    property_schema,
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
        if truncated:
            tail = _NEXT_LINE_OBJECT.search(text, pos)
            if tail is None:
                value = complete_truncated_json(text[pos:])
                if not is_missing(value):
                    values.append(value)
                break
        failed = True
        nxt = _NEXT_LINE_OBJECT.search(text, pos)
        if nxt is None:
            break
        pos = nxt.start() + 1
    if values:
        out: Found = []
        for value in values:
            found = calls_from_value(value, require_args)
            if found:
                out.extend(found)
        if out:
            return out
    if truncated:
        return None
    if failed or not values:
        repaired = parse_tolerant(text)
        if not is_missing(repaired):
            return calls_from_value(repaired, require_args)
    return None


# --- pythonic: [get_weather(city='SF'), f()] (Llama 3.2/4, LFM2) -------------------------------


def _call_node(node: ast.expr) -> tuple[str, Any] | None:
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
            args[kw.arg] = _literal_to_json(ast.literal_eval(kw.value))
        except (ValueError, TypeError, SyntaxError, RecursionError):
            return None
    return name, args


def _split_top_level(inner: str) -> list[str]:
    """Split the inside of a call list at top-level commas (quotes and brackets respected)."""
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
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return parts


def parse_pythonic(text: str) -> Found | None:
    """A Python list of keyword-argument calls, parsed with `ast` (never evaluated).

    One unconvertible call (a bytes literal, a syntax error) does not drop its siblings: the list
    is split at top-level commas and each call parsed alone.
    """
    src = text.strip()
    if not src.startswith("["):
        return None
    try:
        tree = ast.parse(src, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        tree = None
    if isinstance(tree, ast.List):
        found = [_call_node(el) for el in tree.elts]
        good = [f for f in found if f]
        return good or None
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
        found = _call_node(node)
        if found:
            good.append(found)
    return good or None


def parse_json_or_pythonic(body: str, truncated: bool) -> Found | None:
    """Wrappers that carry either format (`<|python_start|>`, LFM2 `<|tool_call_start|>`)."""
    stripped = body.strip()
    if stripped.startswith("[") and not stripped.startswith("[{"):
        found = parse_pythonic(stripped)
        if found:
            return found
    return parse_json_calls(body, truncated)


# --- XML parameter dialects -----------------------------------------------------------------------


def _typed(tool: str, values: dict[str, list[str]], schemas: Schemas) -> dict[str, Any]:
    """Raw XML values to arguments: repeated tags become a list when the schema says array,
    otherwise the last one wins; scalars are typed by the schema (args.coerce_raw)."""
    out: dict[str, Any] = {}
    for key, raws in values.items():
        schema = property_schema(schemas, tool, key)
        if schema and schema.get("type") == "array" and len(raws) > 1:
            items = schema.get("items") if isinstance(schema.get("items"), Mapping) else None
            out[key] = [coerce_raw(r, items) for r in raws]
        else:
            out[key] = coerce_raw(raws[-1], schema)
    return out


_FUNCTION = re.compile(r"<function=([^>\n]+)>")
_PARAM = re.compile(r"<parameter=([^>\n]+)>")


def _strip_one_newline(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def parse_qwen_functions(body: str, schemas: Schemas) -> Found | None:
    """Qwen3-Coder / Seed-OSS: `<function=NAME><parameter=KEY>\\nVALUE\\n</parameter></function>`.

    Values are raw text; a missing `</parameter>` is closed by the next parameter or by
    `</function>`, as the models do emit it that way.
    """
    out: Found = []
    functions = list(_FUNCTION.finditer(body))
    if not functions:
        return None
    for index, fm in enumerate(functions):
        name = fm.group(1).strip()
        end = functions[index + 1].start() if index + 1 < len(functions) else len(body)
        chunk = body[fm.end() : end]
        close = chunk.find("</function>")
        if close != -1:
            chunk = chunk[:close]
        values: dict[str, list[str]] = {}
        params = list(_PARAM.finditer(chunk))
        for pi, pm in enumerate(params):
            stop = params[pi + 1].start() if pi + 1 < len(params) else len(chunk)
            raw = chunk[pm.end() : stop]
            closing = raw.find("</parameter>")
            if closing != -1:
                raw = raw[:closing]
            values.setdefault(pm.group(1).strip(), []).append(_strip_one_newline(raw).strip("\r"))
        out.append((name, _typed(name, values, schemas)))
    return out


_GLM_PAIR = re.compile(
    r"<arg_key>(.*?)</arg_key>(?:\s|\\n)*<arg_value>(.*?)</arg_value>", re.DOTALL
)


def parse_glm(body: str, schemas: Schemas) -> Found | None:
    """GLM-4.5/4.6/4.7: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`.

    The same tag as Hermes but not JSON. GLM sometimes writes literal `\\n` between tags; they
    are separators, not part of the name.
    """
    first = body.find("<arg_key>")
    head = body if first == -1 else body[:first]
    name = head.replace("\\n", "\n").strip()
    if not name or not re.fullmatch(r"[\w.\-]+", name):
        return None
    rest = "" if first == -1 else body[first:]
    values: dict[str, list[str]] = {}
    consumed = 0
    for m in _GLM_PAIR.finditer(rest):
        if rest[consumed : m.start()].replace("\\n", "").strip():
            return None
        values.setdefault(m.group(1).strip(), []).append(m.group(2))
        consumed = m.end()
    if rest[consumed:].replace("\\n", "").strip():
        return None
    return [(name, _typed(name, values, schemas))]


def parse_tool_call_body(body: str, schemas: Schemas, truncated: bool) -> Found | None:
    """`<tool_call>` is shared by Hermes/Qwen (JSON), xLAM (JSON array), Qwen3-Coder
    (`<function=`) and GLM (name + arg pairs): sniff the body, not the tag."""
    stripped = body.strip()
    if stripped.startswith("<function="):
        return None if truncated else parse_qwen_functions(stripped, schemas)
    if stripped[:1] in ("{", "["):
        found = parse_json_calls(stripped, truncated)
        if found is None and stripped.startswith("[") and not truncated:
            found = parse_pythonic(stripped)
        return found
    if truncated:
        return None
    return parse_glm(stripped, schemas)


_XML_OPEN = re.compile(r"<([A-Za-z_][\w.\-]*)>")
_XML_STRAY_CLOSE = re.compile(r"</[A-Za-z_][\w.\-]*>")
_NEXT_TAG = re.compile(r"\s*(?:</?[A-Za-z_][\w.\-]*>|$)")


def parse_xml_params(body: str) -> dict[str, list[str]] | None:
    """Cline/Roo-style `<param>value</param>` children; None if the body is anything else.

    A value may itself contain its closing tag (a file containing `</content>`), so a closing tag
    only ends the value when it is followed by another tag or the end of the body.
    """
    values: dict[str, list[str]] = {}
    pos = 0
    n = len(body)
    while True:
        while pos < n and body[pos].isspace():
            pos += 1
        if pos >= n:
            break
        m = _XML_OPEN.match(body, pos)
        if m is None:
            stray = _XML_STRAY_CLOSE.match(body, pos)
            if stray is None:
                return None
            pos = stray.end()
            continue
        key = m.group(1)
        close = f"</{key}>"
        search = m.end()
        end = -1
        last = -1
        while True:
            idx = body.find(close, search)
            if idx == -1:
                break
            last = idx
            if _NEXT_TAG.match(body, idx + len(close)):
                end = idx
                break
            search = idx + 1
        if end == -1:
            end = last
        if end == -1:
            return None
        values.setdefault(key, []).append(body[m.end() : end].strip())
        pos = end + len(close)
    return values


def parse_named_body(name: str, body: str, schemas: Schemas) -> Found | None:
    """`<tool name="X">BODY</tool>` and Cline `<X>BODY</X>`: the body is JSON arguments or XML
    parameters (sniffed by its first character)."""
    stripped = body.strip()
    if not stripped:
        return [(name, {})]
    if stripped[0] == "{":
        value = parse_tolerant(stripped)
        if is_missing(value) or not isinstance(value, dict):
            return None
        return [(name, value)]
    values = parse_xml_params(stripped)
    if values is None:
        return None
    return [(name, _typed(name, values, schemas))]


_LANGCHAIN = re.compile(r"([^<]+)</tool>\s*<tool_input>(.*)\Z", re.DOTALL)


def parse_langchain(body: str) -> Found | None:
    """LangChain XML agent: `<tool>NAME</tool><tool_input>TEXT</tool_input>`; the input is a
    single string and XML entities are unescaped."""
    m = _LANGCHAIN.match(body)
    if m is None:
        return None
    name = html.unescape(m.group(1).strip())
    return [(name, html.unescape(m.group(2)))]


# --- special-token sections -----------------------------------------------------------------------

_DS_CALL = re.compile(
    r"<[｜|]tool[▁_]call[▁_]begin[｜|]>(.*?)<[｜|]tool[▁_]call[▁_]end[｜|]>", re.DOTALL
)
_DS_SEP = re.compile(r"<[｜|]tool[▁_]sep[｜|]>")
_FENCED = re.compile(r"\A\s*```[a-zA-Z]*\s*\n?(.*?)\n?\s*```\s*\Z", re.DOTALL)


def _json_args(text: str) -> Any | None:
    fenced = _FENCED.match(text)
    if fenced:
        text = fenced.group(1)
    value = parse_tolerant(text)
    if is_missing(value):
        return None
    return _normalise_arguments(value)


def parse_deepseek(body: str) -> Found | None:
    """DeepSeek V3/R1 (`function<sep>NAME\\n```json {...}```) and V3.1 (`NAME<sep>{...}`)
    calls between the full-width bar markers; each call must be closed."""
    out: Found = []
    for m in _DS_CALL.finditer(body):
        parts = _DS_SEP.split(m.group(1), maxsplit=1)
        if len(parts) != 2:
            continue
        left, right = parts[0].strip(), parts[1]
        if left == "function" or not left:
            name, _, rest = right.lstrip().partition("\n")
            if not rest and "{" in name:
                name, rest = name[: name.index("{")], name[name.index("{") :]
        else:
            name, rest = left, right
        args = _json_args(rest)
        if name.strip() and args is not None:
            out.append((name.strip(), args))
    return out or None


_DSML_INVOKE = re.compile(
    r"<[｜|]DSML[｜|]invoke\s+name=\"([^\"]+)\"\s*>(.*?)</[｜|]DSML[｜|]invoke>", re.DOTALL
)
_DSML_PARAM = re.compile(
    r"<[｜|]DSML[｜|]parameter\s+name=\"([^\"]+)\"(?:\s+string=\"(true|false)\")?\s*>(.*?)"
    r"</[｜|]DSML[｜|]parameter>",
    re.DOTALL,
)


def parse_dsml(body: str, schemas: Schemas) -> Found | None:
    """DeepSeek V3.2 "DSML": `<｜DSML｜invoke name=..>` with `<｜DSML｜parameter name=..
    string="true|false">`; string="false" values are JSON."""
    out: Found = []
    for inv in _DSML_INVOKE.finditer(body):
        name = inv.group(1).strip()
        args: dict[str, Any] = {}
        for pm in _DSML_PARAM.finditer(inv.group(2)):
            key, is_string, raw = pm.group(1), pm.group(2), pm.group(3)
            if is_string == "false":
                value = parse_tolerant(raw)
                args[key] = raw if is_missing(value) else value
            elif is_string == "true":
                args[key] = raw
            else:
                args[key] = coerce_raw(raw, property_schema(schemas, name, key))
        out.append((name, args))
    return out or None


_KIMI_CALL = re.compile(
    r"<\|tool_call_begin\|>\s*([^<]+?)\s*<\|tool_call_argument_begin\|>(.*?)<\|tool_call_end\|>",
    re.DOTALL,
)


def parse_kimi(body: str) -> Found | None:
    """Kimi K2: `<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{json}`."""
    out: Found = []
    for m in _KIMI_CALL.finditer(body):
        ident = m.group(1).strip()
        name = ident.split(":", 1)[0]
        if name.startswith("functions."):
            name = name[len("functions.") :]
        args = _json_args(m.group(2))
        if name and args is not None:
            out.append((name, args))
    return out or None
