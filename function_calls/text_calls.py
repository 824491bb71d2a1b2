"""Tool calls a native-mode model wrote as text.

With `native_tools: auto` or `true`, a model served without a tool parser (common with vLLM,
LM Studio and Ollama templates) answers `<tool_call>{...}</tool_call>` as plain text. The
prompt-mode parser (providers/text_tools) and its policies decide what counts as a call: a call
inside a code fence, or to a function not offered, stays text; other text is left alone.

- `text_calls_as_native`: a whole answer (not streamed) whose text is such a call becomes that
  call.
- `NativeTextFilter`: a streamed answer goes through the same parser as it arrives, so the
  call's markup is held back and never reaches the user's stream; ordinary text is passed on as
  soon as it cannot be the start of a call (the parser holds back only a bounded suffix).

The parser is imported on first use: it (and json_repair) is ~80 ms of a bot's start-up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from providers.text_tools.trigger import may_hold_call
from providers.types import LLMResponse, StreamEvent, ToolDefinition

if TYPE_CHECKING:
    from providers.text_tools.parser import StreamingToolParser
    from providers.text_tools.result import ParsedText


def _as_calls(response: LLMResponse, parsed: ParsedText) -> LLMResponse:
    if response.tool_calls or not parsed.calls:
        return response
    return replace(
        response,
        content=parsed.content.strip() or None,
        tool_calls=list(parsed.calls),
        finish_reason="tool_calls",
    )


def text_calls_as_native(response: LLMResponse, tools: Sequence[ToolDefinition]) -> LLMResponse:
    """A native-mode answer with no native calls whose text is a call to an offered function
    becomes that call, so the user never sees the raw markup (see the module docstring)."""
    if response.tool_calls or not tools or not response.content:
        return response
    if not may_hold_call(response.content):  # most replies: no marker, nothing to parse
        return response
    # Imported on first use: the parser (and json_repair) is ~80 ms of a bot's start-up and
    # ~2 MB of its memory, which a bot whose model always calls natively never needs.
    from providers.text_tools.parser import parse_text

    parsed = parse_text(
        response.content, [t.name for t in tools], {t.name: t.parameters for t in tools}
    )
    return _as_calls(response, parsed)


class NativeTextFilter:
    """The text of a streamed native-mode answer, minus call markup for an offered function.

    `feed(event)` takes each provider stream event and returns what the user may see now: text
    that is settled as not being a call (reasoning blocks and template tokens included, raw, as
    they were shown before; only call sections are removed), and every other event unchanged.
    `finish(response)` returns the rest of the text, the call events of the calls found, and the
    final response with those calls (the same parse `text_calls_as_native` makes of the whole
    answer, so streamed and unstreamed answers agree; native calls, when there are any, win).

    What is shown is read from the parser's segments, which together are exactly the text fed
    so far minus the suffix still held: a segment's parts are passed on as they are appended.
    """

    def __init__(self, tools: Sequence[ToolDefinition]) -> None:
        from providers.text_tools.parser import StreamingToolParser

        self._parser: StreamingToolParser = StreamingToolParser(
            [t.name for t in tools], {t.name: t.parameters for t in tools}
        )
        self._seg = 0  # the segment being shown
        self._parts = 0  # its parts shown so far
        self._chars = 0  # their length
        self._calls: list[StreamEvent] = []

    def feed(self, event: StreamEvent) -> list[StreamEvent]:
        if event.type != "text":
            return [event]
        self._calls += [e for e in self._parser.feed(event.text) if e.type != "text"]
        return self._shown()

    def finish(self, response: LLMResponse | None) -> tuple[list[StreamEvent], LLMResponse | None]:
        parser = self._parser
        self._calls += [e for e in parser.finish() if e.type != "text"]
        out = self._shown()
        parsed = parser.result()
        if response is None or response.tool_calls or not parsed.calls:
            return out, response
        out += [e for e in self._calls if e.type in ("tool_call_start", "tool_call_end")]
        return out, _as_calls(response, parsed)

    def _shown(self) -> list[StreamEvent]:
        segments = self._parser.segments
        undecided = self._parser.undecided
        pieces: list[str] = []
        while self._seg < len(segments):
            if undecided is not None and self._seg >= undecided:
                break  # a ```tool_code fence that may be a call: held until the reply ends
            seg = segments[self._seg]
            last = self._seg == len(segments) - 1
            if seg.kind == "call":
                pass
            elif len(seg.parts) >= self._parts:
                new = seg.parts[self._parts :]
                pieces += new
                self._parts = len(seg.parts)
                self._chars += sum(len(p) for p in new)
            else:  # the parts were joined (Segment.raw): read on from the characters shown
                raw = seg.raw
                pieces.append(raw[self._chars :])
                self._parts, self._chars = len(seg.parts), len(raw)
            if last:
                break
            self._seg += 1
            self._parts = self._chars = 0
        text = "".join(pieces)
        return [StreamEvent(type="text", text=text)] if text else []
