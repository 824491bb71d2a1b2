"""Body parsers for the dialects that write arguments as raw text between tags.

Qwen3-Coder / Seed-OSS `<function=..><parameter=..>`, GLM `<arg_key>/<arg_value>`, MiniMax-M2
`<invoke name=..><parameter name=..>`, Cline-style `<param>value</param>` and LangChain
`<tool_input>`. Values are raw text, typed by the tool's JSON schema (args.coerce_raw); whitespace
inside a value is data.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from typing import Any

from providers.text_tools.args import (
    coerce_json_spelled,
    coerce_raw,
    is_missing,
    parse_tolerant,
    property_schema,
)
from providers.text_tools.dialects import Found, Schemas, parse_json_calls, parse_pythonic

# --- XML parameter dialects -----------------------------------------------------------------------


def _typed(
    tool: str,
    values: dict[str, list[str]],
    schemas: Schemas,
    untyped: Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """Raw XML values to arguments: repeated tags become a list when the schema says array,
    otherwise the last one wins; scalars are typed by the schema (args.coerce_raw). A value
    whose parameter has no schema goes to `untyped` when the dialect has its own rule."""
    out: dict[str, Any] = {}
    for key, raws in values.items():
        schema = property_schema(schemas, tool, key)
        if schema is None and untyped is not None:
            out[key] = untyped(raws[-1])
        elif schema and schema.get("type") == "array" and len(raws) > 1:
            items = schema.get("items") if isinstance(schema.get("items"), Mapping) else None
            out[key] = [coerce_raw(r, items) for r in raws]
        else:
            out[key] = coerce_raw(raws[-1], schema)
    return out


_FUNCTION = re.compile(r"<function=([^>\n]+)>")
_PARAM = re.compile(r"<parameter=([^>\n]+)>")


def _strip_one_newline(value: str) -> str:
    """Qwen3-Coder's template writes `<parameter=K>\nVALUE\n</parameter>`: that one newline on
    each side is syntax. Seed-OSS writes `<parameter=K>VALUE</parameter>`: nothing to strip, and a
    value's own trailing newline is data (an edit tool's old_string must match byte for byte)."""
    for nl in ("\r\n", "\n"):
        if value.startswith(nl):
            value = value[len(nl) :]
            if value.endswith(nl):
                value = value[: -len(nl)]
            break
    return value


_DRIFTED_CLOSE = re.compile(r"</parameter[\w\-]*>?\s*\Z")


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
        if not params:
            # Llama 3.1 / Functionary v3.1 write `<function=NAME>{json}</function>`: JSON
            # arguments, or nothing. Any other body is not this dialect: no call at all.
            stripped = chunk.strip()
            if not stripped:
                out.append((name, {}))
                continue
            value = parse_tolerant(stripped) if stripped[0] == "{" else None
            if not isinstance(value, dict):
                return None
            out.append((name, value))
            continue
        if chunk[: params[0].start()].strip():
            return None
        for pi, pm in enumerate(params):
            stop = params[pi + 1].start() if pi + 1 < len(params) else len(chunk)
            raw = chunk[pm.end() : stop]
            closing = raw.find("</parameter>")
            drifted = _DRIFTED_CLOSE.search(raw) if closing == -1 else None
            if closing != -1:
                raw = raw[:closing]
            elif drifted is not None:
                # A close tag the model misspelt (`</parameter1>`, `</parameter_x>`, a bare
                # `</parameter`) at the end of an unclosed value is the close, not data.
                raw = raw[: drifted.start()]
            elif not raw.startswith("\n"):
                # No `</parameter>`: the next tag closes the value, and the line break before
                # that tag is layout, not data.
                raw = raw.removesuffix("\n").removesuffix("\r")
            values.setdefault(pm.group(1).strip(), []).append(_strip_one_newline(raw))
        out.append((name, _typed(name, values, schemas)))
    return out


_GLM_PAIR = re.compile(
    r"<arg_key>(.*?)</arg_key>(?:\s|\\n)*<arg_value>(.*?)</arg_value>", re.DOTALL
)


def parse_glm(body: str, schemas: Schemas) -> Found | None:
    """GLM-4.5/4.6/4.7: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`.

    The same tag as Hermes but not JSON. GLM sometimes writes literal `\\n` between tags; they
    are separators, not part of the name. A value whose parameter the schema does not type is
    the JSON it spells (`42` is 42), as vLLM and SGLang read GLM (args.coerce_json_spelled).
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
    return [(name, _typed(name, values, schemas, coerce_json_spelled))]


def parse_tool_call_body(body: str, schemas: Schemas, truncated: bool) -> Found | None:
    """`<tool_call>` is shared by Hermes/Qwen (JSON), xLAM (JSON array), Qwen3-Coder
    (`<function=`) and GLM (name + arg pairs): sniff the body, not the tag."""
    stripped = body.strip()
    if stripped.startswith("<function="):
        if truncated and not stripped.endswith("</function>"):
            return None  # the call's own closer is missing: a cut value looks complete
        return parse_qwen_functions(stripped, schemas)
    if stripped.startswith("<function "):
        m = _FUNCTION_ATTR.match(stripped)
        if m is None or not stripped.endswith("</function>"):
            return None
        return parse_named_body(m.group(2), stripped[m.end() : -len("</function>")], schemas)
    if stripped[:1] in ("{", "["):
        found = parse_json_calls(stripped, truncated)
        if found is None and stripped.startswith("[") and not truncated:
            found = parse_pythonic(stripped)
        return found
    if truncated:
        return None
    return parse_glm(stripped, schemas)


_FUNCTION_ATTR = re.compile(r"<function\s+name\s*=\s*([\"'])([^\"'<>\n]{1,100})\1\s*>")
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
    if stripped.startswith("<param"):
        values = parse_attr_params(stripped)
    else:
        values = parse_xml_params(stripped)
    if values is None:
        return None
    return [(name, _typed(name, values, schemas))]


_ATTR_PARAM = re.compile(r"<(param|parameter)\s+name\s*=\s*([\"'])([^\"'<>\n]{1,100})\2\s*>")
_CDATA = "<![CDATA["


def parse_attr_params(body: str) -> dict[str, list[str]] | None:
    """`<param name="K">V</param>` children (MiniCPM5's `<function name=..>` calls; also
    `<parameter name=..>`). A value in `<![CDATA[...]]>` is taken literally, so it may hold
    its own closing tag; other values end at the first closing tag. Values are raw text (data,
    whitespace included); None if the body is anything else."""
    values: dict[str, list[str]] = {}
    pos = 0
    while True:
        while pos < len(body) and body[pos].isspace():
            pos += 1
        if pos >= len(body):
            return values
        m = _ATTR_PARAM.match(body, pos)
        if m is None:
            return None
        close = f"</{m.group(1)}>"
        start = m.end()
        if body.startswith(_CDATA, start):
            end = body.find("]]>", start)
            if end == -1 or not body.startswith(close, end + 3):
                return None
            value, pos = body[start + len(_CDATA) : end], end + 3 + len(close)
        else:
            end = body.find(close, start)
            if end == -1:
                return None
            value, pos = body[start:end], end + len(close)
        values.setdefault(m.group(3), []).append(value)


_LANGCHAIN = re.compile(r"([^<]+)</tool>\s*<tool_input>(.*)\Z", re.DOTALL)


def parse_langchain(body: str) -> Found | None:
    """LangChain XML agent: `<tool>NAME</tool><tool_input>TEXT</tool_input>`; the input is a
    single string and XML entities are unescaped."""
    m = _LANGCHAIN.match(body)
    if m is None:
        return None
    name = html.unescape(m.group(1).strip())
    return [(name, html.unescape(m.group(2)))]


# --- MiniMax-M2: <minimax:tool_call><invoke name="f"><parameter name="k">v</parameter></invoke> ---

_INVOKE = re.compile(r"<invoke\s+name\s*=\s*\"([^\"]+)\"\s*>(.*?)</invoke>", re.DOTALL)
_MM_PARAM = re.compile(r"<parameter\s+name\s*=\s*\"([^\"]+)\"\s*>(.*?)</parameter>", re.DOTALL)


def parse_minimax(body: str, schemas: Schemas) -> Found | None:
    """MiniMax-M2 / M2.1 / M2.5 (their chat template and tool-calling guide): `<invoke>`
    elements with raw-text `<parameter>` values typed by the schema. Only closed `<invoke>`
    elements count, so a section cut off at the end of the stream keeps its complete calls."""
    out: Found = []
    consumed = 0
    for inv in _INVOKE.finditer(body):
        if body[consumed : inv.start()].strip():
            return None
        consumed = inv.end()
        name = inv.group(1).strip()
        values: dict[str, list[str]] = {}
        for pm in _MM_PARAM.finditer(inv.group(2)):
            values.setdefault(pm.group(1).strip(), []).append(_strip_one_newline(pm.group(2)))
        out.append((name, _typed(name, values, schemas)))
    tail = body[consumed:].strip()
    if tail and not tail.startswith("<invoke"):
        return None
    return out or None
