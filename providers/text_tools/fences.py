"""Code fences: the parser states between an opening ``` and its closing ```.

A fence is text (markers inside it are ignored) except in three cases, each decided from a
bounded look at its start (policy: README.md, "Code fences"): a JSON fence whose whole body is a
call object or list of call objects; a Gemma ```tool_code fence whose body is Python calls; and a
fence whose only content is one call in the dialect the prompt asked for, when nothing else in
the answer is a call (that last one is held as a candidate until the end of the reply).
"""

from __future__ import annotations

import ast

from providers.text_tools import dialects
from providers.text_tools.args import is_missing, parse_tolerant
from providers.text_tools.core import ParserCore
from providers.text_tools.markers import JSON_FENCE_INFOS, WS
from providers.text_tools.scan import BracketScanner

#: Prompt format -> the start of a call in it (prompt.py teaches these).
ASKED_MARKERS = {
    "hermes": "<tool_call>",
    "xml_tag": "<tool name=",
    "function_call": "<function_call>",
}


class FenceStates(ParserCore):
    """Mixed into StreamingToolParser (parser.py): the states inside a code fence."""

    def _try_fence(self, i: int, final: bool) -> bool:
        buf = self._buf
        at_line_start = self._prev_char(i) == "\n"
        if at_line_start and not buf.startswith("```", i):
            if not final and "```".startswith(buf[i:]):
                return False
        if not (at_line_start and buf.startswith("```", i)):
            self._emit_text("`")
            self._pos = i + 1
            return True
        self._emit_text("")
        self._start = i
        self._mode = "fence_info"
        return True

    def _fence_info(self, final: bool) -> bool:
        buf, i = self._buf, self._start
        nl = buf.find("\n", i + 3, i + 3 + 40)
        if nl == -1:
            if not final and len(buf) - i < 43:
                return False
            self._emit_text(buf[i : i + 3])
            self._pos = i + 3
            self._mode = "code"
            return True
        info = buf[i + 3 : nl].strip().lower()
        if info not in JSON_FENCE_INFOS or info == "tool_code":
            if self._asked_marker or info == "tool_code":
                self._open = buf[i : nl + 1]
                self._pos = nl + 1
                self._parts = []
                self._fence_checked = False
                self._mode = "fence_call"
                return True
            self._emit_text(buf[i : nl + 1])
            self._pos = nl + 1
            self._mode = "code"
            return True
        self._open = buf[i : nl + 1]
        self._parts = []
        self._sep = ""
        self._pos = nl + 1
        self._mode = "fence_ws"
        return True

    def _fence_abandon(self) -> bool:
        """The fence is not a call: what was held is text, and the rest is code."""
        self._emit_text(self._open + "".join(self._parts))
        self._parts = []
        self._mode = "code"
        return True

    def _fence_ws(self, final: bool) -> bool:
        buf, pos = self._buf, self._pos
        while pos < len(buf) and buf[pos] in WS:
            pos += 1
        self._parts.append(buf[self._pos : pos])
        self._pos = pos
        if pos >= len(buf):
            if final:
                return self._fence_abandon()
            return False
        if buf[pos] == "<" and self._asked_marker:
            # A JSON fence holding a call in the asked format (`<function_call>` in ```json):
            # the same candidate as any other fence (README.md, "Code fences").
            self._fence_checked = False
            self._mode = "fence_call"
            return True
        if buf[pos] not in "{[":
            return self._fence_abandon()
        self._open += "".join(self._parts)
        self._parts = []
        self._scanner = BracketScanner()
        self._mode = "fence_value"
        return True

    def _fence_value(self, final: bool) -> bool:
        buf, pos = self._buf, self._pos
        end = self._scanner.feed(buf, pos)
        state = self._scanner.state
        if state == "open":
            self._parts.append(buf[pos:])
            self._pos = len(buf)
            return self._fence_abandon() if final else False
        stop = len(buf) if end == -1 else end
        self._parts.append(buf[pos:stop])
        self._pos = stop
        if state == "failed":
            return self._fence_abandon()
        self._name = "".join(self._parts)  # the JSON value text
        self._parts = [self._name]
        self._mode = "fence_close"
        return True

    def _fence_close(self, final: bool) -> bool:
        buf, pos = self._buf, self._pos
        start = pos
        while pos < len(buf) and buf[pos] in WS:
            pos += 1
        self._parts.append(buf[start:pos])
        self._pos = pos
        rest = buf[pos : pos + 3]
        if rest == "```" or (final and pos >= len(buf)):
            closing = "```" if rest == "```" else ""
            self._pos = pos + len(closing)
            raw = self._open + "".join(self._parts) + closing
            value = parse_tolerant(self._name)
            found = None if is_missing(value) else dialects.calls_from_value(value, True)
            self._parts = []
            if not self._emit_calls(found, raw):
                self._emit_text(raw)
            self._mode = "text"
            return True
        if not final and "```".startswith(rest):
            return False
        return self._fence_abandon()

    def _code(self, final: bool) -> bool:
        """Inside a code fence that is not a call: text passes through, markers are ignored."""
        buf, pos = self._buf, self._pos
        if self._prev_char(pos) == "\n" and buf.startswith("```", pos):
            self._emit_text("```")
            self._pos = pos + 3
            self._mode = "text"
            return True
        idx = buf.find("\n```", pos)
        if idx != -1:
            self._emit_text(buf[pos : idx + 4])
            self._pos = idx + 4
            self._mode = "text"
            return True
        end = len(buf) if final else max(pos, len(buf) - 3)
        self._emit_text(buf[pos:end])
        self._pos = end
        return False

    def _fence_call(self, final: bool) -> bool:
        """A ```tool_code fence (Gemma), or a fence that may hold one call in the asked format:
        check its first characters (bounded), then hold it to its closing fence, parse it once."""
        buf, pos = self._buf, self._pos
        tool_code = self._open[3:].strip().lower() == "tool_code"
        if not self._fence_checked:
            j = pos
            while j < len(buf) and buf[j] in WS and j - pos <= 32:
                j += 1
            expected = "" if tool_code else self._asked_marker
            if j - pos > 32:
                return self._fence_abandon()
            if len(buf) - j < max(len(expected), 1):
                if not final and expected.startswith(buf[j:]):
                    return False
                return self._fence_abandon()
            fits = buf.startswith(expected, j) if expected else buf[j].isalpha() or buf[j] in "_[{"
            if not fits:
                return self._fence_abandon()
            self._fence_checked = True
        idx = buf.find("\n```", pos)
        if idx == -1 and not final:
            end = max(pos, len(buf) - 3)
            self._parts.append(buf[pos:end])
            self._pos = end
            return False
        stop = len(buf) if idx == -1 else idx + 4
        self._parts.append(buf[pos:stop])
        self._pos = stop
        body = "".join(self._parts)
        raw = self._open + body
        self._parts = []
        self._mode = "text"
        if idx == -1:
            self._emit_text(raw)
        elif tool_code:
            if not self._emit_calls(parse_tool_code(body[:-4]), raw):
                self._emit_text(raw)
        else:
            self._fence_candidate(body[:-4], raw)
        return True

    def _fence_candidate(self, inner: str, raw: str) -> None:
        """One call in the asked format alone in a fence: a call only if nothing else in the
        answer is one. Everything after it is held until the end of the reply decides."""
        sub = self._parse_alone(inner)
        alone = [s for s in sub.segments if s.kind == "call"]
        rest_blank = all(s.raw.strip() == "" for s in sub.segments if s.kind == "text")
        other = [s for s in sub.segments if s.kind not in ("call", "text")]
        if self._calls or len(alone) != 1 or not rest_blank or other or self._deferred:
            self._emit_text(raw)
            return
        self._deferred = (len(self._segments), [(c.name, c.arguments) for c in sub.calls])
        self._hold_from = len(self._out)
        self._segments.append(self._new_segment("call", raw))


def parse_tool_code(body: str) -> dialects.Found | None:
    """Gemma's ```tool_code fence: one Python call per line (or a call list), never evaluated;
    or JSON call objects (`[{"name": .., "arguments": {..}}]`, LiteRT-LM's JSON syntax)."""
    src = body.strip()
    if src[:1] in ("[", "{"):
        found = dialects.parse_json_calls(src)
        if found is not None or src[0] == "{":
            return found
        return dialects.parse_pythonic(src)
    try:
        tree = ast.parse(src, mode="exec")
    except (SyntaxError, ValueError, RecursionError):
        return None
    out: dialects.Found = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            return None
        call = dialects.call_node(stmt.value)
        if call is None:
            return None
        out.append(call)
    return out or None
