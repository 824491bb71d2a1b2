"""What a closed (or cut-off) call section says: the body parser of each tag kind.

The parser (parser.py) finds where a section starts and ends; `parse_section` hands its text to
the dialect's body parser (dialects.py, xml_dialects.py, token_dialects.py). A module of its own
so that the state machine stays one screenful per state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from providers.text_tools import dialects, token_dialects, xml_dialects
from providers.text_tools.markers import Spec


@dataclass(frozen=True, slots=True)
class _Section:
    spec: Spec
    open_: str
    name: str
    body: str
    truncated: bool
    allowed: Iterable[str]
    schemas: Mapping[str, Mapping[str, Any]] | None


Reader = Callable[[_Section], "dialects.Found | None"]


def _json(s: _Section) -> dialects.Found | None:
    if s.spec.open in s.body:
        # Granite 20B FC writes `<function_call> {..}` lines and never closes them.
        return dialects.parse_json_sections(s.body.split(s.spec.open), s.truncated)
    return dialects.parse_json_calls(s.body, s.truncated)


def _deepseek_one(s: _Section) -> dialects.Found | None:
    if s.truncated:
        return None
    return token_dialects.parse_deepseek(s.open_ + s.body + s.spec.close, s.schemas)


def _kimi_one(s: _Section) -> dialects.Found | None:
    end = "" if s.truncated else "<|tool_call_end|>"
    section = "<|tool_call_begin|>" + s.body + end
    return token_dialects.parse_kimi(section, s.truncated, s.allowed, s.schemas)


#: Readers that also get a section cut off at the end of the stream: JSON bodies (only closing
#: syntax may be added) and sections whose calls each have their own closer, so that when only
#: the section's end is missing the complete calls inside it still count (README.md,
#: "Truncated calls").
_ANY_END: dict[str, Reader] = {
    "tool_call": lambda s: xml_dialects.parse_tool_call_body(s.body, s.schemas, s.truncated),
    "json": _json,
    "json_args": lambda s: dialects.parse_json_calls(s.body, s.truncated, require_args=True),
    "json_or_py": lambda s: dialects.parse_json_or_pythonic(s.body, s.truncated),
    "kimi": lambda s: token_dialects.parse_kimi(s.body, s.truncated, s.allowed, s.schemas),
    "deepseek": lambda s: token_dialects.parse_deepseek(s.body, s.schemas),
    "deepseek_r1": lambda s: token_dialects.parse_deepseek(
        s.body, s.schemas, call_begin_optional=True
    ),
    "deepseek_one": _deepseek_one,
    "dsml": lambda s: token_dialects.parse_dsml(s.body, s.schemas),
    "minimax": lambda s: xml_dialects.parse_minimax(s.body, s.schemas),
    "kimi_one": _kimi_one,
}

#: Raw-text dialects whose only closer is the section's: a value cut off at the end cannot be
#: told from a complete one, so a truncated section of these is never executed.
_CLOSED_ONLY: dict[str, Reader] = {
    "qwen": lambda s: xml_dialects.parse_qwen_functions(
        s.open_ + s.body + "</function>", s.schemas
    ),
    "langchain": lambda s: xml_dialects.parse_langchain(s.body),
    "call_lines": lambda s: dialects.parse_call_lines(s.body),
    "fgemma": lambda s: token_dialects.parse_function_gemma(s.body, s.schemas),
    "gemma4": lambda s: token_dialects.parse_function_gemma(
        s.body, s.schemas, token_dialects.GEMMA4_QUOTE
    ),
    "attr": lambda s: xml_dialects.parse_named_body(s.name, s.body, s.schemas),
}


def parse_section(
    spec: Spec,
    open_: str,
    name: str,
    body: str,
    truncated: bool,
    allowed: Iterable[str],
    schemas: Mapping[str, Mapping[str, Any]] | None,
) -> dialects.Found | None:
    """The calls in one tag section (`open_` is its opening text, `name` the name its head
    matched, `truncated` that the stream ended before its closer), or None if it is no call."""
    kind = "attr" if spec.body.startswith("cline:") else spec.body
    section = _Section(spec, open_, name, body, truncated, allowed, schemas)
    reader = _ANY_END.get(kind)
    if reader is not None:
        return reader(section)
    reader = None if truncated else _CLOSED_ONLY.get(kind)
    return reader(section) if reader is not None else None
