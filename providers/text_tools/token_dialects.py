"""Body parsers for the dialects written in a model's special tokens.

DeepSeek V3/R1/V3.1 tool-call tokens and V3.2 DSML, Kimi K2 sections, FunctionGemma
`call:NAME{...}`. The parser (parser.py) finds where a section starts and ends; these read it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from providers.text_tools.args import (
    coerce_raw,
    is_missing,
    parse_tolerant,
    property_schema,
    schema_types,
)
from providers.text_tools.dialects import Found, Schemas, _normalise_arguments

# --- special-token sections -----------------------------------------------------------------------

# The closing bar is optional: a DeepSeek-R1-Distill spelling writes `<｜tool▁call▁begin>`.
_DS_CALL = re.compile(
    r"<[｜|]tool[▁_]call[▁_]begin[｜|]?>(.*?)<[｜|]tool[▁_]call[▁_]end[｜|]?>", re.DOTALL
)
# In a section opened by a DeepSeek-R1-Distill spelling (markers.R1_OPENERS) the call-begin
# marker may be missing, as llama.cpp's R1 parser allows.
_DS_CALL_LOOSE = re.compile(
    r"(?:<[｜|]tool[▁_]call[▁_]begin[｜|]?>)?(.*?)<[｜|]tool[▁_]call[▁_]end[｜|]?>", re.DOTALL
)
_DS_SEP = re.compile(r"<[｜|]tool[▁_]sep[｜|]?>")
_FENCED = re.compile(r"\A\s*```[a-zA-Z]*\s*\n?(.*?)\n?\s*```\s*\Z", re.DOTALL)


def _json_args(text: str) -> Any | None:
    fenced = _FENCED.match(text)
    if fenced:
        text = fenced.group(1)
    value = parse_tolerant(text)
    if is_missing(value):
        return None
    return _normalise_arguments(value)


def parse_deepseek(
    body: str, schemas: Schemas = None, call_begin_optional: bool = False
) -> Found | None:
    """DeepSeek V3/R1 (`function<sep>NAME\\n```json {...}```) and V3.1 (`NAME<sep>{...}`)
    calls between the full-width bar markers, and Step-3's `<steptml:invoke>` in the same
    markers; each call must be closed (its begin marker may be missing when
    `call_begin_optional`, in the sections of the R1-Distill spellings)."""
    out: Found = []
    pattern = _DS_CALL_LOOSE if call_begin_optional else _DS_CALL
    for m in pattern.finditer(body):
        if "<steptml:invoke" in m.group(1):
            out += _parse_steptml(m.group(1), schemas)
            continue
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


_STEP_INVOKE = re.compile(
    r"<steptml:invoke\s+name=\"([^\"]+)\"\s*>(.*?)</steptml:invoke>", re.DOTALL
)
_STEP_PARAM = re.compile(
    r"<steptml:parameter\s+name=\"([^\"]+)\"\s*>(.*?)</steptml:parameter>", re.DOTALL
)


def _parse_steptml(call: str, schemas: Schemas) -> Found:
    """Step-3 (StepFun): `[function<｜tool_sep｜>[NAME\\n]]<steptml:invoke name=..>` with
    `<steptml:parameter name=..>` children, inside DeepSeek-style call markers. Values are raw
    text, typed by the schema; the whitespace of a string value is data (vLLM's Step-3 parser
    keeps it, for edit tools)."""
    out: Found = []
    for inv in _STEP_INVOKE.finditer(call):
        name = inv.group(1).strip()
        args: dict[str, Any] = {}
        for pm in _STEP_PARAM.finditer(inv.group(2)):
            args[pm.group(1)] = coerce_raw(pm.group(2), property_schema(schemas, name, pm.group(1)))
        out.append((name, args))
    return out


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
    string="true|false">`. The schema has the last word, as in vLLM's DSML parser (README.md,
    "DSML values"): string="false" values are JSON, except that a JSON value for a parameter the
    schema types as string only is kept as written (`null` is the text "null"); string="true"
    values are raw text typed by the schema (`42` for an integer is 42). A lone `arguments` or
    `input` parameter that the schema does not have, holding an object of the schema's
    parameters, is the arguments themselves."""
    out: Found = []
    for inv in _DSML_INVOKE.finditer(body):
        name = inv.group(1).strip()
        args: dict[str, Any] = {}
        for pm in _DSML_PARAM.finditer(inv.group(2)):
            key, is_string, raw = pm.group(1), pm.group(2), pm.group(3)
            schema = property_schema(schemas, name, key)
            if is_string == "false":
                value = parse_tolerant(raw)
                if is_missing(value) or (not isinstance(value, str) and _string_only(schema)):
                    value = raw
                args[key] = value
            elif is_string == "true" and schema is None:
                args[key] = raw
            else:
                args[key] = coerce_raw(raw, schema)
        out.append((name, _unwrap_arguments(name, args, schemas)))
    return out or None


def _string_only(schema: Mapping[str, Any] | None) -> bool:
    return schema is not None and schema_types(schema) == ["string"]


def _unwrap_arguments(name: str, args: dict[str, Any], schemas: Schemas) -> dict[str, Any]:
    """`{"arguments": {...}}` / `{"input": "{...}"}` -> the object inside, when the schema is
    known, has no such parameter, and has every key of the object inside."""
    if len(args) != 1:
        return args
    ((key, inner),) = args.items()
    tool = schemas.get(name) if schemas else None
    props = tool.get("properties") if isinstance(tool, Mapping) else None
    if key not in ("arguments", "input") or not isinstance(props, Mapping) or key in props:
        return args
    if isinstance(inner, str):
        inner = parse_tolerant(inner)
    if isinstance(inner, dict) and inner and all(k in props for k in inner):
        return inner
    return args


_KIMI_CALL = re.compile(
    r"<\|tool_call_begin\|>\s*([^<]+?)\s*<\|tool_call_argument_begin\|>(.*?)"
    r"(<\|tool_call_end\|>|(?=<\|tool_call_begin\|>)|\Z)",
    re.DOTALL,
)


def parse_kimi(
    body: str,
    truncated: bool = False,
    allowed: Iterable[str] = (),
    schemas: Schemas = None,
) -> Found | None:
    """Kimi K2: `<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{json}`.

    With `truncated` (the section's end never came: servers strip it as a stop token, or the
    stream was cut inside it) the calls closed by `<|tool_call_end|>` still count. A call whose
    `<|tool_call_end|>` is missing (stripped as a stop token, or the next call begins at once, as
    in llama.cpp's Kimi tests) counts only if its arguments are complete JSON as written.

    A call id that is only a number (`<|tool_call_begin|>0 <|tool_call_argument_begin|>`) names
    no function: the name is the one offered tool, or the one offered tool whose schema has every
    key of the arguments (vLLM's rule); when that is ambiguous there is no call."""
    out: Found = []
    consumed = 0
    for m in _KIMI_CALL.finditer(body):
        consumed = m.end()
        ident = m.group(1).strip()
        name = ident.split(":", 1)[0]
        if name.startswith("functions."):
            name = name[len("functions.") :]
        args = _json_args(m.group(2)) if m.group(3) else _complete_object(m.group(2))
        if name.isdigit() and ":" not in ident:
            name = _infer_name(args, allowed, schemas)
        if name and args is not None:
            out.append((name, args))
    if truncated:
        tail = body[consumed:].strip()
        if tail and not _KIMI_SECTION_END.startswith(tail) and "<|tool_call_begin|>" not in tail:
            return None
    return out or None


_KIMI_SECTION_END = "<|tool_calls_section_end|>"


def _infer_name(args: Any, allowed: Iterable[str], schemas: Schemas) -> str:
    """The offered tool a nameless Kimi call is for, or "" when that is not certain."""
    names = sorted(allowed)
    if len(names) == 1:
        return names[0]
    if not isinstance(args, dict) or not schemas:
        return ""
    fits = []
    for name in names:
        tool = schemas.get(name)
        props = tool.get("properties") if isinstance(tool, Mapping) else None
        if isinstance(props, Mapping) and all(key in props for key in args):
            fits.append(name)
    return fits[0] if len(fits) == 1 else ""


def _complete_object(text: str) -> dict[str, Any] | None:
    """A JSON object exactly as written (strict `json.loads`, nothing repaired or added)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# --- FunctionGemma: <start_function_call>call:NAME{key:<escape>text<escape>,n:3}<end_...> ---
# --- Gemma 4:       <|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|>            ---

_FG_CALL = re.compile(r"\s*call:([\w.\-]+)\{")
_ESCAPE = "<escape>"
GEMMA4_QUOTE = '<|"|>'


def parse_function_gemma(body: str, schemas: Schemas = None, quote: str = _ESCAPE) -> Found | None:
    """FunctionGemma (Gemma 3 270M function-calling model, its chat template) and Gemma 4 (its
    template; llama.cpp's tests): strings are wrapped in a quote token (`<escape>`, Gemma 4's
    `<|"|>`), other values are JSON-like literals; one call per section.

    A quoted string is raw text like an XML value: typed by the tool's schema when that says
    it is not a string (vLLM's parser reads `limit:<escape>10<escape>` as 10)."""
    m = _FG_CALL.match(body)
    if m is None:
        return None
    try:
        value, end = _fg_object(body, m.end(), quote)
    except (ValueError, IndexError):
        return None
    if body[end:].strip():
        return None
    name = m.group(1)
    for key, item in value.items():
        schema = property_schema(schemas, name, key)
        if isinstance(item, str) and schema is not None:
            value[key] = coerce_raw(item, schema)
    return [(name, value)]


def _fg_object(text: str, pos: int, quote: str) -> tuple[dict[str, Any], int]:
    """Read `key:value,...}` from text[pos:] (after the `{`)."""
    out: dict[str, Any] = {}
    while True:
        pos = _skip(text, pos)
        if text[pos] == "}":
            return out, pos + 1
        colon = text.index(":", pos)
        key = text[pos:colon].strip()
        if not key or "<" in key or "," in key:
            raise ValueError("bad key")
        escaped = text.startswith(quote, _skip(text, colon + 1))
        out[key], pos = _fg_value(text, colon + 1, quote)
        pos = _skip(text, pos)
        if text[pos] == ",":
            pos += 1
        elif text[pos] != "}" and not escaped:
            # After an `<escape>`-delimited string the next key needs no comma: the token
            # already ends the value (vLLM's streaming test writes them so).
            raise ValueError("expected , or }")


def _fg_value(text: str, pos: int, quote: str) -> tuple[Any, int]:
    pos = _skip(text, pos)
    if text.startswith(quote, pos):
        end = text.index(quote, pos + len(quote))
        return text[pos + len(quote) : end], end + len(quote)
    if text[pos] == "{":
        return _fg_object(text, pos + 1, quote)
    if text[pos] == "[":
        items: list[Any] = []
        pos += 1
        while True:
            pos = _skip(text, pos)
            if text[pos] == "]":
                return items, pos + 1
            item, pos = _fg_value(text, pos, quote)
            items.append(item)
            pos = _skip(text, pos)
            if text[pos] == ",":
                pos += 1
    end = pos
    while end < len(text) and text[end] not in ",}]":
        end += 1
    token = text[pos:end].strip()
    value = parse_tolerant(token)
    return (token if is_missing(value) else value), end


def _skip(text: str, pos: int) -> int:
    while text[pos] in " \t\r\n":
        pos += 1
    return pos
