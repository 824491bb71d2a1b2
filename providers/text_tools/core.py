"""The state the text-tools parser's states share: its buffer, the reply as parsed so far, and
the emitters that add to it.

`StreamingToolParser` (parser.py) is this core, the states of the machine (the mixins
fences.py, harmony.py, reasoning.py, reply_start.py, each a subclass of this core, so that
what one reads or calls is declared and typed here) and the dispatch between them. What a state
needs from the machine itself is declared at the end and given by parser.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from providers.text_tools import dialects
from providers.text_tools.markers import FIXED, Spec, markers_for, random_id
from providers.text_tools.result import ParsedText, Segment, SegmentKind
from providers.text_tools.scan import ArgumentStrings, BracketScanner
from providers.types import StreamEvent, ToolCall


class ParserCore:
    """The parser's state and output (see the module docstring)."""

    def __init__(
        self,
        allowed_names: Iterable[str],
        schemas: Mapping[str, Mapping[str, Any]] | None = None,
        id_factory: Callable[[], str] | None = None,
        asked_marker: str = "",
    ) -> None:
        self._allowed = frozenset(allowed_names)
        self._schemas = schemas
        self._asked_marker = asked_marker
        self._fence_checked = False
        # A fenced call in the asked format waits for the end of the reply (fences.py).
        self._deferred: tuple[int, list[tuple[str, str]]] | None = None
        self._hold_from: int | None = None
        self._think_exit = -1  # where a call began inside reasoning left open
        self._think_scan = 0
        self._harmony_to = ""
        self._channel = ""
        self._new_id = id_factory or random_id
        self._markers = markers_for(self._allowed)
        self._buf = ""
        self._pos = 0
        self._prev = "\n"  # the start of the reply counts as the start of a line
        self._mode = "start"  # reply_start.py: a header the prompt began, then "text"
        self._functionary = False  # a Functionary v3.2 recipient was seen
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
        self._json_args = ArgumentStrings()

    def _take(self) -> list[StreamEvent]:
        if self._hold_from is not None:
            out, self._out = self._out[: self._hold_from], self._out[self._hold_from :]
            self._hold_from = 0
            return out
        out, self._out = self._out, []
        return out

    def _mergeable(self, kind: str) -> bool:
        """Whether new output may be appended to the last event (never across a held call)."""
        if not self._out or self._out[-1].type != kind:
            return False
        return self._hold_from is None or len(self._out) > self._hold_from

    @staticmethod
    def _new_segment(kind: SegmentKind, raw: str) -> Segment:
        return Segment(kind, [raw])

    def _segment(self, kind: SegmentKind, text: str) -> None:
        if self._segments and self._segments[-1].kind == kind and kind != "call":
            self._segments[-1].parts.append(text)
        else:
            self._segments.append(Segment(kind, [text]))

    def _emit_markup(self, raw: str) -> None:
        """Chat-template tokens (a role header, an end-of-turn token, an echoed tool result):
        kept in the segments so nothing is lost, never shown and never reasoning."""
        if raw:
            self._segment("markup", raw)

    def _settle_deferred(self, as_call: bool) -> None:
        """Decide the fenced call held by fences.py: a call if nothing else was, else text."""
        if self._deferred is None:
            return
        seg_index, found = self._deferred
        at = self._hold_from if self._hold_from is not None else len(self._out)
        self._deferred = None
        self._hold_from = None
        segment = self._segments[seg_index]
        if as_call:
            events: list[StreamEvent] = []
            for name, arguments in found:
                call = ToolCall(id=self._new_id(), name=name, arguments=arguments)
                index = len(self._calls)
                self._calls.append(call)
                segment.calls.append(call)
                events.append(StreamEvent(type="tool_call_start", index=index, tool_call=call))
                events.append(StreamEvent(type="tool_call_end", index=index, tool_call=call))
            self._out[at:at] = events
        else:
            segment.kind = "text"
            self._out.insert(at, StreamEvent(type="text", text=segment.raw))

    def _emit_text(self, text: str) -> None:
        if self._pending_sep:
            sep, self._pending_sep = self._pending_sep, ""
            self._emit_text(sep)
        if not text:
            return
        self._segment("text", text)
        if self._mergeable("text"):
            self._out[-1].text += text
        else:
            self._out.append(StreamEvent(type="text", text=text))

    def _emit_thinking(self, text: str, raw: str) -> None:
        if raw:
            self._segment("thinking", raw)
        if not text:
            return
        self._thinking.append(text)
        if self._mergeable("thinking"):
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
        self._settle_deferred(as_call=False)
        segment = Segment("call", [sep, raw], calls)
        self._segments.append(segment)
        for call in calls:
            index = len(self._calls)
            self._calls.append(call)
            self._out.append(StreamEvent(type="tool_call_start", index=index, tool_call=call))
            self._out.append(StreamEvent(type="tool_call_end", index=index, tool_call=call))
        return True

    def _prev_char(self, i: int) -> str:
        return self._buf[i - 1] if i > 0 else self._prev

    # --- given by the machine (parser.py) ---------------------------------------------------

    def _begin_value(self, spec: Spec, start: int, value_start: int) -> None:
        """Enter a call section's value (reply_start.py's Functionary call)."""
        raise NotImplementedError

    def _parse_alone(self, text: str) -> ParsedText:
        """`text` parsed whole by a fresh parser of the same tools (fences.py's candidate)."""
        raise NotImplementedError
