"""What the parser returns: the reply split into segments, and the calls found in it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from providers.types import ToolCall

SegmentKind = Literal["text", "thinking", "call", "markup"]


@dataclass(slots=True)
class Segment:
    """A run of the reply: plain text, a reasoning block (raw, with its tags), a call section
    (raw) or markup (chat-template tokens and echoed tool results, never shown). Joining every
    segment's `raw` gives back the reply exactly."""

    kind: SegmentKind
    parts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)

    @property
    def raw(self) -> str:
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""


@dataclass(slots=True)
class ParsedText:
    """What a reply says: visible text, calls, reasoning, and the segments they came from."""

    content: str
    calls: list[ToolCall]
    thinking: str = ""
    segments: list[Segment] = field(default_factory=list)
    #: Names of calls written in a call syntax but naming a function not offered this turn.
    rejected: list[str] = field(default_factory=list)

    def text_runs(self) -> list[str]:
        """Non-call text as runs split at each call, think blocks kept raw in place. This is the
        shape of the fixtures' `expected_content`, and the reply minus its calls and markup."""
        runs: list[str] = []
        current: list[str] = []
        for seg in self.segments:
            if seg.kind == "markup":
                continue
            if seg.kind == "call":
                runs.append("".join(current))
                current = []
            else:
                current.append(seg.raw)
        runs.append("".join(current))
        return runs
