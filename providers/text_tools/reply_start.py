"""The first characters of a reply, when the chat template put the start of a message in the
prompt (README.md, "Replies that begin inside a template's header").

Two templates end their generation prompt part-way through a header, so the model's reply
begins with the rest of it:

* Functionary v3.2 ends the prompt with `>>>`: the reply starts with the recipient, `all\\n`
  (text for the user follows) or `NAME\\n{json}` (a call). llama.cpp's template tests feed it
  so. Only an offered NAME followed by a JSON object counts, so a reply starting with an
  ordinary word on its own line stays text; after such a start, a later `>>>` ends the text
  even in the middle of a line (the model writes `What's up?>>>special_function`).
* gpt-oss (harmony) ends it with `<|start|>assistant`: a call addressed in the role header
  then begins ` to=functions.NAME<|channel|>...`.

Each is decided from a bounded prefix (at most `_LIMIT` characters) and only at offset 0, so
the rest of the reply is scanned as usual and streaming gives the same result as whole text.
"""

from __future__ import annotations

import re
from typing import Literal

from providers.text_tools.core import ParserCore
from providers.text_tools.markers import FIXED

_LIMIT = 80
_HARMONY_TO = re.compile(r"[ \t]*to=(?P<to>[\w.\-:]+)[ \t]*(?=<\|channel\|>)")
_NAME = re.compile(r"[A-Za-z_][\w.\-]*")
FUNCTIONARY = next(s for s in FIXED if s.open == ">>>")

Start = tuple[Literal["need", "fail", "harmony", "all", "call"], int, str]


def reply_start(buf: str, final: bool, allowed: frozenset[str]) -> Start:
    """(verdict, end, name): `need` more text, `fail` (an ordinary reply), or the header found
    at the start: `harmony` (recipient in `name`), `all`, or `call` (the JSON starts at end)."""
    stripped = buf.lstrip(" \t")
    if len(buf) - len(stripped) <= 2 and ("to=".startswith(stripped) or stripped.startswith("to=")):
        m = _HARMONY_TO.match(buf)
        if m is not None:
            return "harmony", m.end(), m.group("to")
        if final or len(buf) >= _LIMIT or "\n" in buf:
            return "fail", 0, ""
        return "need", 0, ""
    if buf.startswith("all\n"):
        return "all", 4, ""
    if "all\n".startswith(buf):
        return ("fail" if final else "need"), 0, ""
    m = _NAME.match(buf)
    if m is None:
        return "fail", 0, ""
    end = m.end()
    if end == len(buf):
        # Held back only while the word can still become an offered name: a reply starting
        # `Checking.` is shown at once, not when its stream ends.
        word = m.group()
        if final or end >= _LIMIT or not any(n.startswith(word) for n in allowed):
            return "fail", 0, ""
        return "need", 0, ""
    if buf[end] != "\n" or m.group() not in allowed:
        return "fail", 0, ""
    k = end + 1
    while k < len(buf) and buf[k] in " \t\r\n" and k - end <= 16:
        k += 1
    if k == len(buf) and not final and k - end <= 16:
        return "need", 0, ""
    if k < len(buf) and buf[k] == "{":
        return "call", end + 1, m.group()
    return "fail", 0, ""


class ReplyStartStates(ParserCore):
    """Mixed into StreamingToolParser (parser.py): the `start` state, entered once per reply."""

    def _reply_start(self, final: bool) -> bool:
        verdict, end, name = reply_start(self._buf, final, self._allowed)
        if verdict == "need":
            return False
        self._mode = "text"
        if verdict == "harmony":
            self._emit_markup(self._buf[:end])
            self._harmony_to = name
            self._pos = end
        elif verdict == "all":
            self._functionary = True
            self._emit_markup(self._buf[:end])
            self._pos = end
        elif verdict == "call":
            self._functionary = True
            self._name = name
            self._begin_value(FUNCTIONARY, 0, end)
        return True
