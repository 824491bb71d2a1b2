"""Reasoning blocks (`<think>`, `[THINK]`, `<|START_THINKING|>`...): the parser's think state.

A reasoning block is never searched for calls, with one exception decided per family (README.md,
"Think blocks"): Kimi K2 and GLM write their call at the end of a think block they never close.
When one of their call markers appears inside reasoning, what follows is held: if the block then
closes, it was all reasoning; if the reply ends first, the block never closed and the call is
parsed as a call.
"""

from __future__ import annotations

import re

from providers.text_tools.core import ParserCore
from providers.text_tools.scan import window_head

#: Calls that end a reasoning block left open (README.md, "Think blocks"): Kimi K2's section
#: tokens and GLM's `<tool_call>NAME<arg_key>`; any other call inside reasoning is reasoning.
_THINK_EXIT = re.compile(r"<\|tool_calls_section_begin\|>|<\|tool_call_begin\|>|<tool_call>")
_GLM_HEAD = re.compile(r"\s*[\w.\-]+(?:\s|\\n)*(?:<arg_key>|</tool_call>)")
_THINK_EXIT_HOLD = len("<|tool_calls_section_begin|>") - 1


class ReasoningStates(ParserCore):
    """Mixed into StreamingToolParser (parser.py): the state inside a reasoning block."""

    def _think(self, final: bool) -> bool:
        close = self._spec.close
        buf, pos = self._buf, self._pos
        if self._think_exit >= 0:
            return self._think_after_call(final)
        idx = buf.find(close, pos)
        exit_at, hold_at = self._find_think_exit(buf, pos, idx, final)
        if exit_at != -1:
            self._emit_thinking(buf[pos:exit_at], buf[pos:exit_at])
            self._pos = self._think_exit = exit_at
            self._think_scan = exit_at
            return True
        if idx != -1 and hold_at == -1:
            self._emit_thinking(buf[pos:idx], buf[pos:idx] + close)
            self._pos = idx + len(close)
            self._mode = "text"
            return True
        hold = max(len(close) - 1, _THINK_EXIT_HOLD)
        end = len(buf) if final else max(pos, len(buf) - hold)
        if hold_at != -1:
            end = min(end, hold_at)
        self._emit_thinking(buf[pos:end], buf[pos:end])
        self._pos = end
        return False

    def _find_think_exit(self, buf: str, pos: int, limit: int, final: bool) -> tuple[int, int]:
        """The first Kimi/GLM call marker in reasoning before `limit`, and where to stop
        emitting if one may still be forming (-1: none)."""
        stop = len(buf) if limit == -1 else limit
        search = pos
        while True:
            m = _THINK_EXIT.search(buf, search, stop)
            if m is None:
                return -1, -1
            if m.group() != "<tool_call>":
                return m.start(), -1
            verdict = window_head(_GLM_HEAD, buf[m.end() : m.end() + 80], 80, final)
            if verdict == "ok":
                return m.start(), -1
            if verdict == "need":
                return -1, m.start()
            search = m.end()

    def _think_after_call(self, final: bool) -> bool:
        """A Kimi/GLM call began inside reasoning: if the reasoning closes after it, it was
        reasoning; if the reply ends first, the reasoning never closed and the call is parsed."""
        close = self._spec.close
        buf = self._buf
        idx = buf.find(close, self._think_scan)
        if idx != -1:
            raw = buf[self._pos : idx]
            self._emit_thinking(raw, raw + close)
            self._pos = idx + len(close)
            self._think_exit = -1
            self._mode = "text"
            return True
        if not final:
            self._think_scan = max(self._think_scan, len(buf) - len(close) + 1)
            return False
        self._think_exit = -1
        self._mode = "text"
        return True
