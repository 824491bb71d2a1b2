"""Replies a platform takes only as answers: each names the message (or event) it answers, goes
out within a window after it arrived, and a message takes only so many of them. What a reply
answers, how many it still may send, and a reply cut to that room are the same wherever a
platform has such rules; its wire format (which fields carry the ids) is the platform's.

A message without `reply_to` (a reminder, a welcome) answers the chat's newest message, else
its newest event, still inside the window. A reply's parts are counted by their sequence
numbers (kit/keys.py's `part_seq`), so a row sent again counts once against a
message's replies. Memory only: after a restart a reply
tries its `reply_to`.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TypeVar

from chatfn.channels.kit.recent import Recent

__all__ = ["Answer", "ReplyWindow", "fit_replies", "unlinked"]

T = TypeVar("T")

_REMEMBER = 5000
_URL = re.compile(
    r"(?:https?://|\b(?:[a-z0-9-]+\.)+[a-z]{2,}\b)(?:[^\s)\]>]*[^\s)\]>.,;:!?])?", re.I
)


def unlinked(text: str) -> str:
    """`text` with its URLs (and bare domains) replaced by "[link]": for a platform that
    refuses links it has not been told about."""
    return _URL.sub("[link]", text)


@dataclass(frozen=True, slots=True)
class Answer:
    """What one outgoing message answers: a message (`msg_id`), an event, or nothing (an
    active message); `late`: seconds past the window when its `reply_to` was too old."""

    msg_id: str | None = None
    event_id: str | None = None
    late: float | None = None


@dataclass(slots=True)
class _Seen:
    at: float  # time.time() it arrived
    chat: str


class ReplyWindow:
    """When each message arrived, each chat's newest message and event, and the sequence
    numbers of the replies sent to each message (the last few thousand of each)."""

    def __init__(self, max_replies: int) -> None:
        self.max_replies = max_replies
        self._messages: Recent[str, _Seen] = Recent(_REMEMBER)
        self._latest: Recent[str, tuple[str, float]] = Recent(_REMEMBER)
        self._events: Recent[str, tuple[str, float]] = Recent(_REMEMBER)
        self._replies: Recent[str, set[int]] = Recent(_REMEMBER)  # msg_id -> seqs sent

    def message(self, chat: str, msg_id: str, at: float | None = None) -> None:
        when = time.time() if at is None else at
        self._messages.put(msg_id, _Seen(when, chat))
        self._latest.put(chat, (msg_id, when))

    def event(self, chat: str, event_id: str, at: float | None = None) -> None:
        self._events.put(chat, (event_id, time.time() if at is None else at))

    def arrived(self, msg_id: str) -> float | None:
        seen = self._messages.get(msg_id)
        return seen.at if seen else None

    def replied(self, msg_id: str, seq: int) -> None:
        """The platform took a reply to `msg_id` numbered `seq`."""
        seqs = self._replies.get(msg_id) or set()
        seqs.add(seq)
        self._replies.put(msg_id, seqs)

    def room(self, msg_id: str, seqs: list[int]) -> int:
        """How many replies `msg_id` still takes, not counting `seqs` (the same row's parts,
        sent again: the platform takes them as duplicates)."""
        return self.max_replies - len((self._replies.get(msg_id) or set()) - set(seqs))

    def latest(self, chat: str, window: float) -> str | None:
        found = self._latest.get(chat)
        return found[0] if found and time.time() - found[1] <= window else None

    def latest_event(self, chat: str, window: float) -> str | None:
        found = self._events.get(chat)
        return found[0] if found and time.time() - found[1] <= window else None

    def answer(self, chat: str, reply_to: str | None, window: float) -> Answer:
        """What a message to `chat` answers (module docstring); a `reply_to` past the window
        answers nothing (`late` says by how long it came after its message)."""
        if reply_to:
            arrived = self.arrived(reply_to)
            if arrived is None or time.time() - arrived <= window:
                return Answer(reply_to)
            return Answer(late=time.time() - arrived)
        newest = self.latest(chat, window)
        if newest is not None:
            return Answer(newest)
        return Answer(event_id=self.latest_event(chat, window))


def fit_replies(
    parts: list[str], extras: list[T], room: int, limit: int, note: str
) -> tuple[list[str], list[T]]:
    """The text `parts` and `extras` (images) of one reply cut to the `room` replies left,
    at least one of them text when there was text: the last part kept ends with `note` (and
    fits `limit` with it)."""
    if len(parts) + len(extras) <= room:
        return parts, extras
    extras = extras[: room - 1] if parts else extras[:room]
    parts = parts[: room - len(extras)]
    if parts:
        parts[-1] = parts[-1][: limit - len(note)] + note
    return parts, extras
