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

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from providers.text_tools import dialects
from providers.text_tools.args import complete_truncated_json, is_missing, parse_tolerant
from providers.text_tools.fences import ASKED_MARKERS, FenceStates
from providers.text_tools.harmony import HarmonyStates
from providers.text_tools.markers import (
    BARE_ARRAY,
    BARE_OBJECT,
    BARE_PY,
    WORD_MARKERS,
    WS,
    Spec,
)
from providers.text_tools.reasoning import ReasoningStates
from providers.text_tools.reply_start import FUNCTIONARY, ReplyStartStates
from providers.text_tools.result import ParsedText, Segment
from providers.text_tools.scan import (
    ArgumentStrings,
    BracketScanner,
    array_head,
    object_head,
    window_head,
)
from providers.text_tools.sections import parse_section
from providers.text_tools.trigger import TRIGGER
from providers.types import StreamEvent


class StreamingToolParser(FenceStates, HarmonyStates, ReasoningStates, ReplyStartStates):
    """Incremental parser: `feed(chunk)` and `finish()` return StreamEvents (`text`,
    `thinking`, `tool_call_start`/`tool_call_end`); `result()` after finish gives ParsedText.

    Only names in `allowed_names` become calls; `schemas` (tool name -> JSON schema) types the
    raw-text values of XML-style dialects; `fmt` is the prompt format the model was taught (a
    fence holding one call in it may be a call, README.md "Code fences").
    """

    def __init__(
        self,
        allowed_names: Iterable[str],
        schemas: Mapping[str, Mapping[str, Any]] | None = None,
        id_factory: Callable[[], str] | None = None,
        fmt: str | None = None,
    ) -> None:
        super().__init__(allowed_names, schemas, id_factory, ASKED_MARKERS.get(fmt or "", ""))
        self._handler_map: dict[str, Callable[[bool], bool]] = {
            "start": self._reply_start,
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
            "fence_call": self._fence_call,
            "code": self._code,
            "trail": self._trail,
            "harmony": self._harmony,
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
                self._think_exit -= self._pos
                self._think_scan = max(0, self._think_scan - self._pos)
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
            self._settle_deferred(as_call=not self._calls)
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

    @property
    def segments(self) -> list[Segment]:
        """The reply as parsed so far (read, do not change): joined, the segments' raws are the
        text fed minus the suffix still held; a segment's parts only grow, except that the
        segment at `undecided` may still turn from a call into text."""
        return self._segments

    @property
    def undecided(self) -> int | None:
        """The index of a segment that may still change kind (a fenced call in the asked format
        waiting for the end of the reply, fences.py), or None."""
        return self._deferred[0] if self._deferred is not None else None

    def _parse_alone(self, text: str) -> ParsedText:
        inner = type(self)(self._allowed, self._schemas)
        inner.feed(text)
        inner.finish()
        return inner.result()

    # --- the machine ------------------------------------------------------------------------

    def _run(self, final: bool) -> None:
        handlers = self._handler_map
        while handlers[self._mode](final):
            pass

    def _text(self, final: bool) -> bool:
        buf, pos = self._buf, self._pos
        m = TRIGGER.search(buf, pos)
        if m is None:
            end = len(buf) if final else self._word_marker_tail(buf, pos)
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
        if ch in "fA>" and not self._word_start(buf, i, ch):
            self._emit_text(ch)
            self._pos = i + 1
            return True
        spec, need = self._markers.match(buf, i, final) if ch != "{" else (None, False)
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
            self._think_exit = -1
            self._think_scan = self._pos
            self._mode = "think"
            return True
        if spec.kind == "markup" and spec.head is None:
            self._emit_markup(spec.open)
            self._pos = i + len(spec.open)
            return True
        self._spec = spec
        self._start = i
        self._mode = "head"
        return True

    def _word_start(self, buf: str, i: int, ch: str) -> bool:
        """`functools` must start a word; `Action:` and `>>>` must start a line."""
        prev = self._prev_char(i)
        if ch == "f":
            return not _word(prev)
        return prev == "\n" or (ch == ">" and self._functionary)

    def _word_marker_tail(self, buf: str, pos: int) -> int:
        """Where to stop emitting when the buffer may end in the first part of a word marker."""
        end = len(buf)
        tail = buf[max(pos, end - 8) :]
        if "f" not in tail and "A" not in tail and ">" not in tail:
            return end
        for word in WORD_MARKERS:
            start = max(pos, end - len(word) + 1)
            for k in range(start, end):
                if word.startswith(buf[k:]) and self._word_start(buf, k, word[0]):
                    return k
        return end

    def _head(self, final: bool) -> bool:
        """Decide from a bounded window after the marker whether this really is a call."""
        spec, buf, start = self._spec, self._buf, self._start
        body_start = start + len(spec.open)
        if spec.head is None:
            verdict, m = "ok", None
        else:
            limit = spec.head_limit
            m = spec.head.match(buf, body_start, min(len(buf), body_start + limit))
            window = buf[body_start : body_start + limit]
            verdict = "ok" if m else window_head(spec.head, window, limit, final)
        if verdict == "need":
            return False
        if verdict == "fail" and spec.alt is not None:
            self._spec = spec.alt  # the other reading of the same marker
            return True
        if verdict == "fail":
            self._emit_text(buf[start:body_start])
            self._pos = body_start
            self._mode = "text"
            return True
        groups = m.groupdict() if m else {}
        self._functionary = self._functionary or spec is FUNCTIONARY
        if spec.kind == "markup" or groups.get("all"):
            # A role header (`<|start|>assistant`, Functionary's `>>>all`): markup, then text.
            assert m is not None
            self._harmony_to = groups.get("to") or ""
            self._emit_markup(buf[start : m.end()])
            self._pos = m.end()
            self._mode = "text"
            return True
        if spec.kind == "value":
            assert m is not None
            self._name = groups.get("name") or ""
            self._begin_value(spec, start, m.end())
            return True
        self._emit_text("")
        self._name = spec.body.partition(":")[2]
        body_from = body_start
        if spec.body == "attr":
            assert m is not None
            self._name = m.group(2).strip()
            body_from = m.end()
        if spec.body == "harmony":
            assert m is not None
            return self._harmony_begin(m)
        self._open = buf[start:body_from]
        self._parts = []
        self._json_args = ArgumentStrings()
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

    def _tag_body(self, final: bool) -> bool:
        spec = self._spec
        close = f"</{self._name}>" if spec.body.startswith("cline:") else spec.close
        buf, pos = self._buf, self._pos
        if spec.body in ("kimi", "kimi_one"):
            idx, end = self._json_args.find(buf, pos, close, final)
        else:
            idx = buf.find(close, pos)
            end = max(pos, len(buf) - len(close) + 1)
        if idx == -1 and not final:
            self._parts.append(buf[pos:end])
            self._pos = end
            return False
        truncated = idx == -1
        stop = len(buf) if truncated else idx
        self._parts.append(buf[pos:stop])
        body = "".join(self._parts)
        raw = self._open + body + ("" if truncated else close)
        self._pos = stop if truncated else idx + len(close)
        self._mode = "text"
        if spec.body == "echo":
            self._emit_markup(raw)  # a tool result the model echoed: never shown
            return True
        found = parse_section(
            spec, self._open, self._name, body, truncated, self._allowed, self._schemas
        )
        if not self._emit_calls(found, raw):
            self._emit_text(raw)
        elif spec.trail and not truncated:
            self._parts = []
            self._mode = "trail"
        return True

    def _trail(self, final: bool) -> bool:
        """After a call: whitespace and the closer of a wrapper opened in the prompt (spec.trail)
        belong to the call; anything else goes back to the text state."""
        trail = self._spec.trail
        buf, pos = self._buf, self._pos
        j = pos
        while j < len(buf) and buf[j] in WS and j - pos <= 64:
            j += 1
        if j >= len(buf) and not final and j - pos <= 64:
            return False
        if buf.startswith(trail, j):
            self._segments[-1].parts.append(buf[pos : j + len(trail)])
            self._pos = j + len(trail)
            self._mode = "text"
            return True
        if not final and len(buf) - j < len(trail) and trail.startswith(buf[j:]):
            return False
        self._mode = "text"
        return True

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
            self._mode = "trail" if self._spec.trail else "sep" if self._spec.sep else "text"
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
        if body in ("mistral", "named_json") and self._name:
            value = parse_tolerant(text)
            if is_missing(value) or not isinstance(value, dict):
                return None
            return [(self._name, value)]
        if self._name:  # Llama 3.1 built-in tool: <|python_tag|>brave_search.call(query="...")
            return dialects.parse_pythonic(f"[{self._name}{text}]")
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
        elif body in ("mistral", "named_json") and self._name:
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
