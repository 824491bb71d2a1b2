"""The start markers the parser looks for, and what follows each: one table for every dialect
(think blocks, tag-delimited calls, value-prefixed calls, DeepSeek tokens), plus the per-turn
index of markers by their first two characters so prose costs one dict lookup per `<`."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal


def random_id() -> str:
    return "call_" + secrets.token_hex(6)


@dataclass(frozen=True, slots=True)
class Spec:
    """One start marker and what follows it."""

    open: str
    #: think: reasoning until `close`; tag: a call section until `close`; value: a call whose
    #: end is found by bracket matching; markup: chat-template tokens, never shown.
    kind: Literal["think", "tag", "value", "markup"]
    close: str = ""
    body: str = ""
    head: re.Pattern[str] | None = None
    sep: bool = False
    #: How many characters after the marker the head pattern may need before it is refused.
    head_limit: int = 128
    #: Closing syntax that may follow the call and belongs to it (an outer wrapper whose opening
    #: was in the prompt, e.g. Qwen3-Coder's `</tool_call>`); absorbed after optional whitespace.
    trail: str = ""
    #: The marker counts only at the start of a line (it is made of ordinary characters).
    line_start: bool = False
    #: Another reading of the same marker, tried when this one's head fails (`<tool>` is a
    #: Hermes wrapper around a call object, or LangChain's `<tool>NAME</tool><tool_input>`).
    alt: Spec | None = None


_JSON_HEAD = re.compile(r"\s*[\[{]")
_TOOL_CALL_HEAD = re.compile(
    r"\s*(?:\{|\[\s*(?:\{|[A-Za-z_][\w.\-]*\s*\()|<function[=\s]"
    r"|[\w.\-]+(?:\s|\\n)*(?:<arg_key>|</tool_call>))"
)
_FUNCTION_HEAD = re.compile(r"[^<>\n]{1,80}>")
_ATTR_HEAD = re.compile(r"\s*name\s*=\s*([\"'])([^\"'<>\n]{1,100})\1\s*>")
_LANGCHAIN_HEAD = re.compile(r"[^<\n]{1,100}</tool>\s*<tool_input>")
_VALUE_PRE = re.compile(r"\s*(?=[\[{])")
_MISTRAL_PRE = re.compile(
    r"\s*(?:(?=[\[{])|(?P<name>[A-Za-z_][\w.\-]*)(?:\[CALL_ID\][\w\-]{0,64})?(?:\[ARGS\])?"
    r"(?=\{)|[^\n\[{]{0,64}?(?=\[\{))"
)
_PYTHON_TAG_PRE = re.compile(r"\s*(?:(?=[\[{])|(?P<name>[A-Za-z_]\w*)\.call(?=\())")
_FUNCTIONARY_PRE = re.compile(r"(?:(?P<all>all)\n|(?P<name>[A-Za-z_][\w.\-]*)\n(?=\s*\{))")
_ACTION_PRE = re.compile(r"[ \t]*\n?[ \t]*```(?:json)?[ \t]*\n(?=\s*[\[{])")
_TOOLCALL_HEAD = re.compile(r"\s*[\[{]")
_ECHO_HEAD = re.compile(r"(?:\s[^<>]{0,200})?>")
_FGEMMA_HEAD = re.compile(r"\s*call:[\w.\-]+\{")
# A call object right after a Hermes 2 Pro wrapper tag (llama.cpp's parser accepts these tags).
_CALL_OBJECT_HEAD = re.compile(r'\s*(?:\[\s*)?\{\s*"name"\s*:')
#: Tags Hermes 2 Pro / Qwen models sometimes wrap a `{"name": .., "arguments": ..}` call in,
#: instead of `<tool_call>`; the tags belong to the call (llama.cpp's Hermes 2 Pro parser).
HERMES_WRAPPERS = ("tools", "response", "json", "xml", "JSON")
# A space may follow each special token (LLM-jp-4.1 writes harmony so). A header followed by
# another `<|channel|>` instead of `<|message|>` (`<|channel|>commentary to=assistant`) is empty.
HARMONY_HEAD = re.compile(
    r"\s*(?P<channel>[A-Za-z_]\w*)(?:\s+to=(?P<to>[\w.\-:]+))?\s*(?:(?:<\|constrain\|>\s*)?"
    r"(?P<ctype>[\w/\-]+)?\s*<\|message\|>|(?P<empty>(?=<\|channel\|>)))"
)
_HARMONY_START = re.compile(r"\s*assistant(?:\s+to=(?P<to>[\w.\-:]+))?\s*(?=<\|)")
_FUNCTOOLS_PRE = re.compile(r"(?=\[)")
_CALL_LINE_HEAD = re.compile(r"\s*[A-Za-z_][\w.\-]*\s*\(")


def _ds(name: str) -> list[str]:
    """DeepSeek markers in the full-width form and the ASCII forms some servers emit."""
    out = []
    for bar in ("｜", "|"):
        for sp in ("▁", "_"):
            out.append(f"<{bar}{name.replace(' ', sp)}{bar}>")
    # A DeepSeek-R1-Distill spelling: the closing bar written as nothing before `>`.
    out.append(f"<｜{name.replace(' ', '▁')}>")
    return out


#: DeepSeek-R1-Distill spellings of the calls-begin marker (llama.cpp's R1 parser accepts them;
#: the Distill Qwen models get it wrong). In their sections a call may also lack its
#: `<｜tool▁call▁begin｜>`; after the canonical marker it may not (vLLM's rule, cases.jsonl).
R1_OPENERS = ("<｜tool▁calls｜>", "<｜tool calls begin｜>", "<｜tool\\_calls\\_begin｜>")
_R1_LOOSE = {"<｜tool_calls_begin｜>": "deepseek_r1"}


def _fixed_specs() -> list[Spec]:
    specs = [
        Spec("<think>", "think", "</think>"),
        Spec("<thinking>", "think", "</thinking>"),
        Spec("<seed:think>", "think", "</seed:think>"),
        Spec("[THINK]", "think", "[/THINK]"),  # Magistral
        Spec("<|START_THINKING|>", "think", "<|END_THINKING|>"),  # Command R7B / A
        Spec("<|START_ACTION|>", "tag", "<|END_ACTION|>", "json", _JSON_HEAD),
        Spec("<|START_RESPONSE|>", "markup"),
        Spec("<|END_RESPONSE|>", "markup"),
        Spec("<|eom_id|>", "markup"),  # Llama 3.1 after a built-in tool call
        Spec("<|eot_id|>", "markup"),
        Spec("<|CHATBOT_TOKEN|>", "markup"),  # Command R+ role token (llama.cpp's template test)
        Spec("<|END_OF_TURN_TOKEN|>", "markup"),  # Command R / R+ end of turn
        Spec("<SPECIAL_12>", "markup"),  # Nemotron Nano v2's end-of-turn token
        Spec("<|start|>", "markup", head=_HARMONY_START, head_limit=80),  # gpt-oss
        Spec("<|channel|>", "tag", body="harmony", head=HARMONY_HEAD, head_limit=160),
        Spec("<minimax:tool_call>", "tag", "</minimax:tool_call>", "minimax"),
        Spec("<TOOLCALL>", "tag", "</TOOLCALL>", "json_or_py", _TOOLCALL_HEAD),  # Nemotron
        Spec("<function ", "tag", "</function>", "attr", _ATTR_HEAD, trail="</tool_call>"),
        Spec("<start_function_call>", "tag", "<end_function_call>", "fgemma", _FGEMMA_HEAD),
        Spec("<|tool_call>", "tag", "<tool_call|>", "gemma4", _FGEMMA_HEAD),  # Gemma 4
        Spec("<|channel>", "think", "<channel|>"),  # Gemma 4's thought channel
        Spec("<channel|>", "markup"),  # a stray end of it (llama.cpp's Gemma 4 tests)
        Spec(
            "<|tool_call_begin|>",
            "tag",
            "<|tool_call_end|>",
            "kimi_one",
            trail="<|tool_calls_section_end|>",
        ),
        Spec("<tool_result", "tag", "</tool_result>", "echo", _ECHO_HEAD),
        Spec(
            ">>>", "value", body="named_json", head=_FUNCTIONARY_PRE, head_limit=70, line_start=True
        ),
        Spec(
            "Action:",
            "value",
            body="json",
            head=_ACTION_PRE,
            head_limit=24,
            trail="```",
            line_start=True,
        ),
        Spec("<tool_call>", "tag", "</tool_call>", "tool_call", _TOOL_CALL_HEAD),
        Spec("<seed:tool_call>", "tag", "</seed:tool_call>", "tool_call", _TOOL_CALL_HEAD),
        # Jamba / MiniMax-M1: an entry needs its arguments (vLLM drops `{"name": ..}` alone).
        Spec("<tool_calls>", "tag", "</tool_calls>", "json_args", _JSON_HEAD),
        # Ours, and Granite 20B FC's unclosed `<function_call> {..}` lines (parser.py splits).
        Spec("<function_call>", "tag", "</function_call>", "json", _JSON_HEAD),
        # OLMo 3: Python calls, one a line.
        Spec("<function_calls>", "tag", "</function_calls>", "call_lines", _CALL_LINE_HEAD),
        Spec("<|python_start|>", "tag", "<|python_end|>", "json_or_py"),
        Spec("<|tool_call_start|>", "tag", "<|tool_call_end|>", "json_or_py"),
        Spec("<|action_start|><|plugin|>", "tag", "<|action_end|>", "json"),
        Spec("<|tool_calls_section_begin|>", "tag", "<|tool_calls_section_end|>", "kimi"),
        Spec("<function=", "tag", "</function>", "qwen", _FUNCTION_HEAD, trail="</tool_call>"),
        Spec("<tool ", "tag", "</tool>", "attr", _ATTR_HEAD),
        Spec(
            "<tool>",
            "tag",
            "</tool>",
            "json",
            _CALL_OBJECT_HEAD,
            head_limit=48,
            alt=Spec("<tool>", "tag", "</tool_input>", "langchain", _LANGCHAIN_HEAD),
        ),
        Spec("[TOOL_CALLS]", "value", body="mistral", head=_MISTRAL_PRE, sep=True, head_limit=80),
        Spec("<|python_tag|>", "value", body="json", head=_PYTHON_TAG_PRE, sep=True, head_limit=40),
        Spec("<|tool_call|>", "value", body="json", head=_VALUE_PRE, head_limit=33),
        Spec("functools", "value", body="json", head=_FUNCTOOLS_PRE, head_limit=1),
    ]
    for tag in HERMES_WRAPPERS:
        specs.append(Spec(f"<{tag}>", "tag", f"</{tag}>", "json", _CALL_OBJECT_HEAD, head_limit=48))
    for begin, end in zip(_ds("tool calls begin"), _ds("tool calls end"), strict=True):
        specs.append(Spec(begin, "tag", end, _R1_LOOSE.get(begin, "deepseek")))
    for begin in R1_OPENERS:
        specs.append(Spec(begin, "tag", "<｜tool▁calls▁end｜>", "deepseek_r1"))
    # One DeepSeek-V3.1 call written without the calls-begin marker (SGLang reads it). The ASCII
    # `<|tool_call_begin|>` spelling is Kimi's marker and stays Kimi's.
    opens = {spec.open for spec in specs}
    for begin, end, outer in zip(
        _ds("tool call begin"), _ds("tool call end"), _ds("tool calls end"), strict=True
    ):
        if begin not in opens:
            specs.append(Spec(begin, "tag", end, "deepseek_one", trail=outer))
    for bar in ("｜", "|"):
        specs.append(
            Spec(
                f"<{bar}DSML{bar}function_calls>", "tag", f"</{bar}DSML{bar}function_calls>", "dsml"
            )
        )
    return specs


FIXED = _fixed_specs()
BARE_OBJECT = Spec("{", "value", body="bare_json", sep=True)
BARE_ARRAY = Spec("[", "value", body="bare_json", sep=True)
BARE_PY = Spec("[", "value", body="bare_py")
#: Markers made of ordinary characters: a suffix of the buffer that may still become one is held.
WORD_MARKERS = ("functools", "Action:", ">>>")
JSON_FENCE_INFOS = frozenset({"", "json", "json5", "jsonc", "tool_call", "tool_code"})
WS = frozenset(" \t\r\n")


class Markers:
    """Start markers by their first two characters, so a `<` in prose costs a dict lookup."""

    def __init__(self, allowed: frozenset[str]) -> None:
        specs = list(FIXED)
        fixed_opens = {s.open for s in specs}
        for name in sorted(allowed):
            if not re.fullmatch(r"[A-Za-z_][\w.\-]*", name):
                continue
            head = re.compile(r"\s*(?:<[A-Za-z_][\w.\-]*>|</" + re.escape(name) + r">|\{)")
            cline = Spec(f"<{name}>", "tag", f"</{name}>", "cline:" + name, head)
            if cline.open not in fixed_opens:
                specs.append(cline)
                continue
            # An offered tool named like a fixed marker (`response`): Cline-style is the
            # other reading of that marker.
            for k, spec in enumerate(specs):
                if spec.open == cline.open and spec.alt is None and spec.kind == "tag":
                    specs[k] = replace(spec, alt=cline)
        self.by_prefix: dict[str, list[Spec]] = {}
        for spec in specs:
            self.by_prefix.setdefault(spec.open[:2], []).append(spec)

    def match(self, buf: str, i: int, final: bool) -> tuple[Spec | None, bool]:
        """(spec, need_more) for a marker starting at buf[i]."""
        rest = len(buf) - i
        if rest < 2:
            first = buf[i]
            possible = any(k[0] == first for k in self.by_prefix)
            return None, possible and not final
        best: Spec | None = None
        need = False
        for spec in self.by_prefix.get(buf[i : i + 2], ()):
            if buf.startswith(spec.open, i):
                if best is None or len(spec.open) > len(best.open):
                    best = spec
            elif not final and rest < len(spec.open) and spec.open.startswith(buf[i:]):
                need = True
        if need:
            return None, True
        return best, False


@lru_cache(maxsize=64)
def markers_for(allowed: frozenset[str]) -> Markers:
    """The markers for one set of offered names, built once: a parser is made for every native
    request with tools (streamed or not), and building the index (a pattern per name) was
    ~30 us, twice a message in bench_pipeline's workload. Shared safely: Markers is never
    changed after it is built, and its Specs are frozen."""
    return Markers(allowed)
