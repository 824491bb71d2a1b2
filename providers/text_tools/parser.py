"""Find tool calls in the text a model wrote, incrementally, in every common dialect.

One state machine serves both uses: `parse_text` feeds it a whole reply, `StreamingToolParser`
is fed chunk by chunk, so a streamed reply can never be parsed differently from the same reply
whole. Plain text goes out as soon as it is known not to start a marker; only a bounded suffix
that may still become a marker is held back. A call section is held until it closes, then
parsed once (dialects.py). Each character is looked at a constant number of times (the one
exception, a bare JSON object left unclosed at the end of the stream, is rescanned once from
its next `{`; see README.md). Policies (code fences, think blocks, truncated calls) are in
README.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from providers.text_tools import dialects
from providers.text_tools.args import complete_truncated_json, is_missing, parse_tolerant
from providers.text_tools.markers import (
    BARE_ARRAY,
    BARE_OBJECT,
    BARE_PY,
    FIXED,
    JSON_FENCE_INFOS,
    TRIGGER,
    WS,
    Markers,
    Spec,
    random_id,
)
from providers.text_tools.result import ParsedText, Segment, SegmentKind
from providers.text_tools.scan import BracketScanner, array_head, object_head, window_head
from providers.types import StreamEvent, ToolCall


class StreamingToolParser:
    """Incremental parser: `feed(chunk)` and `finish()` return StreamEvents (`text`,
    `thinking`, `tool_call_start`/`tool_call_end`); `result()` after finish gives ParsedText.

    Only names in `allowed_names` become calls; `schemas` (tool name -> JSON schema) types the
    raw-text values of XML-style dialects.
    """

    def __init__(
        self,
        allowed_names: Iterable[str],
        schemas: Mapping[str, Mapping[str, Any]] | None = None,
        id_factory: Callable[[], str] | None = None,
    ) -> None:
        self._allowed = frozenset(allowed_names)
        self._schemas = schemas
        self._new_id = id_factory or random_id
        self._markers = Markers(self._allowed)
        self._buf = ""
        self._pos = 0
        self._prev = "\n"  # the start of the reply counts as the start of a line
        self._mode = "text"
        self._out: list[StreamEvent] = []
        self._segments: list[Segment] = []
        self._calls: list[ToolCall] = []
        self._thinking: list[str] = []
        self._rejected: list[str] = []
        self._pending_sep = ""
        self._finished = False
        # per-section state
        self._spec: Spec = FIXED[0]
        self._start = 0
        self._open = ""
        self._parts: list[str] = []
        self._sep = ""
        self._name = ""
        self._scanner = BracketScanner()
        self._handler_map: dict[str, Callable[[bool], bool]] = {
            "text": self._text,
            "head": self._head,
            "think": self._think,
            "tag": self._tag_body,
            "value": self._value,
            "sep": self._separator,
            "fence_info": self._fence_info,
            "fence_ws": self._fence_ws,
            "fence_value": self._fence_value,
            "fence_close": self._fence_close,
            "code": self._code,
        }

    # --- public API -------------------------------------------------------------------------

    def feed(self, chunk: str) -> list[StreamEvent]:
        if self._finished:
            raise RuntimeError("feed() after finish()")
        if chunk:
            if self._pos:
                self._prev = self._buf[self._pos - 1]
                self._buf = self._buf[self._pos :]
                self._start -= self._pos
                self._pos = 0
            self._buf += chunk
            self._run(final=False)
        return self._take()

    def finish(self) -> list[StreamEvent]:
        if not self._finished:
            self._run(final=True)
            self._finished = True
            if self._pending_sep:
                self._emit_text("")
        return self._take()

    def result(self) -> ParsedText:
        """The whole reply as parsed; call after finish()."""
        content = "".join(seg.raw for seg in self._segments if seg.kind == "text")
        return ParsedText(
            content=content,
            calls=list(self._calls),
            thinking="".join(self._thinking),
            segments=self._segments,
            rejected=list(self._rejected),
        )

    # --- output -----------------------------------------------------------------------------

    def _take(self) -> list[StreamEvent]:
        out, self._out = self._out, []
        return out

    def _segment(self, kind: SegmentKind, text: str) -> None:
        if self._segments and self._segments[-1].kind == kind and kind != "call":
            self._segments[-1].parts.append(text)
        else:
            self._segments.append(Segment(kind, [text]))

    def _emit_text(self, text: str) -> None:
        if self._pending_sep:
            sep, self._pending_sep = self._pending_sep, ""
            self._emit_text(sep)
        if not text:
            return
        self._segment("text", text)
        if self._out and self._out[-1].type == "text":
            self._out[-1].text += text
        else:
            self._out.append(StreamEvent(type="text", text=text))

    def _emit_thinking(self, text: str, raw: str) -> None:
        if raw:
            self._segment("thinking", raw)
        if not text:
            return
        self._thinking.append(text)
        if self._out and self._out[-1].type == "thinking":
            self._out[-1].text += text
        else:
            self._out.append(StreamEvent(type="thinking", text=text))

    def _emit_calls(self, found: dialects.Found | None, raw: str, sep: str = "") -> bool:
        """Emit the allowed calls of a section; False (caller keeps it as text) if none."""
        if not found:
            return False
        calls: list[ToolCall] = []
        for name, args in found:
            if name not in self._allowed:
                self._rejected.append(name)
                continue
            arguments = json.dumps(args, ensure_ascii=False)
            calls.append(ToolCall(id=self._new_id(), name=name, arguments=arguments))
        if not calls:
            return False
        segment = Segment("call", [sep, raw], calls)
        self._segments.append(segment)
        for call in calls:
            index = len(self._calls)
            self._calls.append(call)
            self._out.append(StreamEvent(type="tool_call_start", index=index, tool_call=call))
            self._out.append(StreamEvent(type="tool_call_end", index=index, tool_call=call))
        return True

    # --- the machine ------------------------------------------------------------------------

    def _run(self, final: bool) -> None:
        handlers = self._handler_map
        while handlers[self._mode](final):
            pass

    def _prev_char(self, i: int) -> str:
        return self._buf[i - 1] if i > 0 else self._prev

    def _text(self, final: bool) -> bool:
        buf, pos = self._buf, self._pos
        m = TRIGGER.search(buf, pos)
        if m is None:
            end = len(buf)
            if not final:
                f = buf.rfind("f", max(pos, end - 8))
                if f != -1 and "functools".startswith(buf[f:]) and not _word(self._prev_char(f)):
                    end = f
            self._emit_text(buf[pos:end])
            self._pos = end
            return False
        i = m.start()
        if i > pos:
            self._emit_text(buf[pos:i])
            self._pos = i
        ch = buf[i]
        if ch == "`":
            return self._try_fence(i, final)
        if ch == "f" and _word(self._prev_char(i)):
            self._emit_text("f")
            self._pos = i + 1
            return True
        spec, need = self._markers.match(buf, i, final) if ch in "<[f" else (None, False)
        if need:
            return False
        if spec is None and ch in "{[":
            if ch == "{":
                verdict, kind = object_head(buf, i, final), "json"
            else:
                verdict, kind = array_head(buf, i, final)
            if verdict == "need":
                return False
            if verdict == "ok":
                spec = BARE_OBJECT if ch == "{" else (BARE_ARRAY if kind == "json" else BARE_PY)
                self._begin_value(spec, i, i)
                return True
        if spec is None:
            self._emit_text(ch)
            self._pos = i + 1
            return True
        if spec.kind == "think":
            self._emit_text("")
            self._spec = spec
            self._emit_thinking("", spec.open)
            self._pos = i + len(spec.open)
            self._mode = "think"
            return True
        self._spec = spec
        self._start = i
        self._mode = "head"
        return True

    def _head(self, final: bool) -> bool:
        """Decide from a bounded window after the marker whether this really is a call."""
        spec, buf, start = self._spec, self._buf, self._start
        body_start = start + len(spec.open)
        if spec.head is None:
            verdict, m = "ok", None
        else:
            limit = spec.head_limit
            m = spec.head.match(buf, body_start, min(len(buf), body_start + limit))
            verdict = "ok" if m else window_head(spec.head, buf[body_start:], limit, final)
        if verdict == "need":
            return False
        if verdict == "fail":
            self._emit_text(buf[start:body_start])
            self._pos = body_start
            self._mode = "text"
            return True
        if spec.kind == "value":
            assert m is not None
            self._name = (m.group("name") or "") if "name" in m.re.groupindex else ""
            self._begin_value(spec, start, m.end())
            return True
        self._emit_text("")
        self._name = spec.body.partition(":")[2]
        body_from = body_start
        if spec.body == "attr":
            assert m is not None
            self._name = m.group(2).strip()
            body_from = m.end()
        self._open = buf[start:body_from]
        self._parts = []
        self._pos = body_from
        self._mode = "tag"
        return True

    def _begin_value(self, spec: Spec, start: int, value_start: int) -> None:
        self._spec = spec
        self._sep, self._pending_sep = self._pending_sep, ""
        self._open = self._buf[start:value_start]
        self._parts = []
        self._scanner = BracketScanner()
        self._pos = value_start
        self._mode = "value"

    def _think(self, final: bool) -> bool:
        close = self._spec.close
        buf, pos = self._buf, self._pos
        idx = buf.find(close, pos)
        if idx != -1:
            self._emit_thinking(buf[pos:idx], buf[pos:idx] + close)
            self._pos = idx + len(close)
            self._mode = "text"
            return True
        end = len(buf) if final else max(pos, len(buf) - len(close) + 1)
        self._emit_thinking(buf[pos:end], buf[pos:end])
        self._pos = end
        return False

    def _tag_body(self, final: bool) -> bool:
        spec = self._spec
        close = f"</{self._name}>" if spec.body.startswith("cline:") else spec.close
        buf, pos = self._buf, self._pos
        idx = buf.find(close, pos)
        if idx == -1 and not final:
            end = max(pos, len(buf) - len(close) + 1)
            self._parts.append(buf[pos:end])
            self._pos = end
            return False
        truncated = idx == -1
        stop = len(buf) if truncated else idx
        self._parts.append(buf[pos:stop])
        body = "".join(self._parts)
        raw = self._open + body + ("" if truncated else close)
        self._pos = stop if truncated else idx + len(close)
        found = self._parse_tag(spec, body, truncated)
        if not self._emit_calls(found, raw):
            self._emit_text(raw)
        self._mode = "text"
        return True

    def _parse_tag(self, spec: Spec, body: str, truncated: bool) -> dialects.Found | None:
        kind = spec.body
        schemas = self._schemas
        if kind == "tool_call":
            return dialects.parse_tool_call_body(body, schemas, truncated)
        if kind == "json":
            return dialects.parse_json_calls(body, truncated)
        if kind == "json_or_py":
            return dialects.parse_json_or_pythonic(body, truncated)
        if truncated:
            # Raw-text and special-token dialects: a value cut off at the end cannot be told
            # from a complete one, so an unclosed section is never executed.
            return None
        if kind == "kimi":
            return dialects.parse_kimi(body)
        if kind == "deepseek":
            return dialects.parse_deepseek(body)
        if kind == "dsml":
            return dialects.parse_dsml(body, schemas)
        if kind == "qwen":
            return dialects.parse_qwen_functions(self._open + body + "</function>", schemas)
        if kind == "langchain":
            return dialects.parse_langchain(body)
        if kind == "attr" or kind.startswith("cline:"):
            return dialects.parse_named_body(self._name, body, schemas)
        return None

    def _value(self, final: bool) -> bool:
        buf, pos = self._buf, self._pos
        end = self._scanner.feed(buf, pos)
        state = self._scanner.state
        if state == "open":
            self._parts.append(buf[pos:])
            self._pos = len(buf)
            if not final:
                return False
            return self._value_truncated()
        stop = len(buf) if end == -1 else end
        self._parts.append(buf[pos:stop])
        self._pos = stop
        raw = self._open + "".join(self._parts)
        if state == "failed":
            self._emit_text(self._sep)
            self._emit_text(raw)
            self._mode = "text"
            return True
        value_text = raw[len(self._open) :]
        if self._emit_calls(self._parse_value(value_text), raw, self._sep):
            self._mode = "sep" if self._spec.sep else "text"
            self._sep = ""
            self._parts = []
            return True
        self._emit_text(self._sep)
        self._emit_text(raw)
        self._mode = "text"
        return True

    def _parse_value(self, text: str) -> dialects.Found | None:
        body = self._spec.body
        if body == "bare_json":
            value = parse_tolerant(text)
            return None if is_missing(value) else dialects.calls_from_value(value, True)
        if body == "bare_py":
            return dialects.parse_pythonic(text)
        if body == "mistral" and self._name:
            value = parse_tolerant(text)
            if is_missing(value) or not isinstance(value, dict):
                return None
            return [(self._name, value)]
        found = dialects.parse_json_calls(text)
        if found is None and text.lstrip().startswith("[") and not text.lstrip()[1:2] == "{":
            found = dialects.parse_pythonic(text)
        return found

    def _value_truncated(self) -> bool:
        """End of stream inside a value section (policy: README.md, "Truncated calls")."""
        text = "".join(self._parts)
        raw = self._open + text
        body = self._spec.body
        found: dialects.Found | None = None
        if body == "bare_py":
            found = dialects.parse_pythonic(text)
        elif body == "bare_json":
            value = complete_truncated_json(text)
            if not is_missing(value):
                found = dialects.calls_from_value(value, True)
        elif body == "mistral" and self._name:
            value = complete_truncated_json(text)
            if isinstance(value, dict):
                found = [(self._name, value)]
        else:
            found = dialects.parse_json_calls(text, truncated=True)
        if self._emit_calls(found, raw, self._sep):
            self._sep = ""
            self._mode = "text"
            return True
        self._emit_text(self._sep)
        self._sep = ""
        if body.startswith("bare"):
            # Resync: the opener was not a call; scan what followed it as ordinary text.
            self._emit_text(raw[0])
            self._prev = raw[0]
            self._buf = raw[1:] + self._buf[self._pos :]
            self._pos = 0
        else:
            self._emit_text(raw)
        self._mode = "text"
        return True

    def _separator(self, final: bool) -> bool:
        """After a JSON call: `;` between calls (Llama 3) belongs to the calls, not the text."""
        buf, pos = self._buf, self._pos
        while pos < len(buf) and (buf[pos] in WS or buf[pos] == ";"):
            pos += 1
        self._sep += buf[self._pos : pos]
        self._pos = pos
        if pos >= len(buf) and not final:
            return False
        sep, self._sep = self._sep, ""
        if ";" in sep and pos < len(buf):
            self._pending_sep = sep
        else:
            self._emit_text(sep)
        self._mode = "text"
        return True

    # --- code fences ------------------------------------------------------------------------

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
        if info not in JSON_FENCE_INFOS:
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


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def parse_text(
    text: str,
    allowed_names: Iterable[str],
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
) -> ParsedText:
    """Parse a whole reply (the streaming parser fed once, so both always agree)."""
    parser = StreamingToolParser(allowed_names, schemas)
    parser.feed(text)
    parser.finish()
    return parser.result()
