"""OpenAI harmony (gpt-oss): the parser state for one message after its `<|channel|>` header.

A reply is a run of messages, each `<|channel|>CHANNEL [to=RECIPIENT] [<|constrain|>TYPE]
<|message|>BODY` ended by `<|end|>`, `<|call|>` or `<|return|>` (or by the next `<|start|>` /
`<|channel|>` when a server stripped the end token). Per the harmony format spec
(openai/harmony docs/format.md) and gpt-oss's chat template:

* a message with a recipient (`to=functions.NAME`, in the header or after `<|start|>assistant`)
  is a call, its body the JSON arguments;
* the `analysis` channel is reasoning;
* `final`, and `commentary` without a recipient (a preamble the user is meant to see), are text;
* headers and end tokens are markup.
"""

from __future__ import annotations

import json
import re
from typing import Any

from providers.text_tools.args import is_missing, parse_tolerant
from providers.text_tools.core import ParserCore

_END = re.compile(r"<\|(?:end|call|return)\|>|<\|start\|>|<\|channel\|>")
_CLOSERS = ("<|end|>", "<|call|>", "<|return|>", "<|start|>", "<|channel|>")
_CONSUMED = frozenset(_CLOSERS[:3])


class HarmonyStates(ParserCore):
    """Mixed into StreamingToolParser (parser.py): the state inside one harmony message."""

    def _harmony_begin(self, m: re.Match[str]) -> bool:
        if m.group("empty") is not None:
            # A header with no message (`<|channel|>commentary to=assistant` then another
            # `<|channel|>`): template markup, and not a recipient for the next message.
            self._emit_markup(self._buf[self._start : m.end()])
            self._pos = m.end()
            self._mode = "text"
            return True
        recipient = m.group("to") or self._harmony_to
        self._harmony_to = ""
        self._open = self._buf[self._start : m.end()]
        self._pos = m.end()
        self._parts = []
        self._name = recipient
        if recipient:
            self._channel = "call"
        elif m.group("channel") == "analysis":
            self._channel = "analysis"
            self._emit_thinking("", self._open)
        else:
            self._channel = "text"
            self._emit_markup(self._open)
        self._mode = "harmony"
        return True

    def _harmony(self, final: bool) -> bool:
        buf, pos = self._buf, self._pos
        m = _END.search(buf, pos)
        if m is None:
            end = len(buf) if final else _hold(buf, pos)
            self._harmony_body(buf[pos:end])
            self._pos = end
            if final:
                return self._harmony_end("", truncated=True)
            return False
        self._harmony_body(buf[pos : m.start()])
        closer = m.group() if m.group() in _CONSUMED else ""
        self._pos = m.start() + len(closer)
        return self._harmony_end(closer, truncated=False)

    def _harmony_body(self, text: str) -> None:
        if not text:
            return
        if self._channel == "analysis":
            self._emit_thinking(text, text)
        elif self._channel == "text":
            self._emit_text(text)
        else:
            self._parts.append(text)

    def _harmony_end(self, closer: str, truncated: bool) -> bool:
        self._mode = "text"
        if self._channel == "analysis":
            self._emit_thinking("", closer)
            return True
        if self._channel == "text":
            self._emit_text("")
            self._emit_markup(closer)
            return True
        body = "".join(self._parts)
        self._parts = []
        raw = self._open + body + closer
        name = self._name.removeprefix("functions.")
        args = _arguments(body, truncated)
        found = None if args is None else [(name, args)]
        if not self._emit_calls(found, raw):
            self._emit_text(raw)
        return True


def _arguments(body: str, truncated: bool) -> Any:
    """The JSON arguments of a call message. Cut off at the end of the stream (`<|call|>` is a
    stop token many servers strip), they count only when they are already complete JSON."""
    text = body.strip()
    if not text:
        return {}
    if truncated:
        try:
            value = json.loads(text)
        except ValueError:
            return None
    else:
        value = parse_tolerant(text)
        if is_missing(value):
            return None
    return value if isinstance(value, dict) else None


def _hold(buf: str, pos: int) -> int:
    """Where to stop emitting: before a `<` that may still become an end token."""
    lt = buf.rfind("<", max(pos, len(buf) - 11))
    if lt != -1 and any(c.startswith(buf[lt:]) for c in _CLOSERS):
        return lt
    return len(buf)
