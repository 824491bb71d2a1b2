"""Replies a platform takes only as answers: each names the message (or event) it answers, goes
out within a window after it arrived, and a message takes only so many of them. What a reply
answers, how many it still may send, and a reply cut to that room are the same wherever a
platform has such rules; its wire format (which fields carry the ids) is the platform's.

A message without `reply_to` (a reminder, a welcome) answers the chat's newest message, else
its newest event, still inside the window. A reply's parts are counted by their sequence
numbers (kit/keys.py's `part_seq`), so a row sent again counts once against a
message's replies. Memory only: after a restart a reply
tries its `reply_to`.

The way out of such a platform (`AnswerSender`) says when a reply goes as an active message
(its message too old, or nothing to answer), cuts a reply to the room its message has left
(none left: given up, counted), and sends each call as an answer, once more as an active
message when the platform says the window passed (`WindowPassed`), and once more with its
links replaced when the platform refused one (`LinkRefused`: told once, naming the fix); a
reply the platform refuses as one it has (its sequence number seen: a row sent again) is
delivered.
"""

from __future__ import annotations

import re
import time
from abc import abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from chatfn.channels.kit.keys import part_seq
from chatfn.channels.kit.recent import Recent
from chatfn.channels.kit.sender import R, SharedStateSender
from chatfn.common.messages import DeliveryRefused

__all__ = [
    "Answer",
    "AnswerSender",
    "LinkRefused",
    "ReplyWindow",
    "WindowPassed",
    "fit_replies",
    "unlinked",
]

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


class WindowPassed(Exception):
    """The platform said the message (or event) a reply answers is too old to answer."""


class LinkRefused(Exception):
    """The platform refused a link in a message (its domain not registered with it)."""


Send = Callable[[Answer], Awaitable[Any]]


class AnswerSender(SharedStateSender[R, ReplyWindow]):
    """The way out of a platform whose replies answer a message within a window (module
    docstring); `shared` is the channel's `ReplyWindow`. Its `classify` turns the platform's
    refusals of an expired answer and of a link into `WindowPassed` and `LinkRefused`."""

    #: Why a link was refused and where the operator registers its domain.
    link_fix: ClassVar[str] = ""
    #: Said after "sending it as an active message" where `counted` (it will be refused).
    active_note: ClassVar[str] = ""
    #: The end of the last part of a reply cut to its message's room.
    cut_note: ClassVar[str] = ""
    #: What the platform calls a reply's sequence number.
    seq_name: ClassVar[str] = "sequence number"

    def __init__(self, client: Any, settings: Any, policy: Any, shared: ReplyWindow) -> None:
        super().__init__(client, settings, policy, shared)
        self.dropped: Callable[[str], None] = lambda reason: None  # a reply given up, by reason
        self._told_links = False

    @abstractmethod
    def window(self, ref: R) -> float:
        """Seconds after a message that a reply in `ref`'s chat may answer it."""

    def counted(self, ref: R) -> bool:
        """`ref`'s chat counts the replies to a message and refuses active messages."""
        return True

    def _note(self, ref: R) -> str:
        return self.active_note if self.counted(ref) else ""

    def answer(self, ref: R, reply_to: str | None) -> Answer:
        """What a message to `ref` answers (`ReplyWindow.answer`); an active one said."""
        window = self.window(ref)
        answer = self.shared.answer(ref.key, reply_to, window)
        if answer.late is not None:
            self.log.warning(
                "{}: the reply to message {} in {} comes {:.0f} s after it, past the passive "
                "reply window ({:.0f} s): sending it as an active message{}",
                self.label,
                reply_to,
                ref.key,
                answer.late,
                window,
                self._note(ref),
            )
        elif not (answer.msg_id or answer.event_id):
            self.log.info(
                "{}: nothing in {} to answer within the passive reply window: sending an "
                "active message{}",
                self.label,
                ref.key,
                self._note(ref),
            )
        return answer

    def duplicate(self, exc: Exception) -> bool:
        """`exc` is the platform refusing a reply whose sequence number it has (a row sent
        again): it has the reply. None is by default."""
        return False

    async def post(self, ref: R, call: Callable[[], Awaitable[Any]]) -> Any:
        """One call for the chat (`call`: paced, under the delivery policy); one the platform
        refuses as a `duplicate` is delivered (None)."""

        async def once() -> Any:
            try:
                return await call()
            except Exception as exc:
                if not self.duplicate(exc):
                    raise
                self.log.info(
                    "{} already has this message to {} (duplicate {}): delivered",
                    self.label,
                    ref.key,
                    self.seq_name,
                )
                return None

        return await self.call(ref.key, once)

    def has_room(self, ref: R, answer: Answer, seq: int, what: str) -> bool:
        """Whether the reply `seq` answering `answer`'s message fits in what it still takes
        (a warning naming `what` it is for when not)."""
        if not answer.msg_id or self.shared.room(answer.msg_id, [seq]) > 0:
            return True
        msg = "{}: no reply left to {} in {} for {}"
        self.log.warning(msg, self.label, answer.msg_id, ref.key, what)
        return False

    def took(self, ref: R, answer: Answer, seq: int) -> None:
        """The platform took the reply `seq` answering `answer`'s message: counted."""
        if answer.msg_id and self.counted(ref):
            self.shared.replied(answer.msg_id, seq)

    def within(
        self, ref: R, msg_id: str, row: int, parts: list[str], extras: list[T], limit: int
    ) -> tuple[list[str], list[T]]:
        """The parts and extras (images) of the outbox row `row` that fit in the replies
        `msg_id` still takes (`fit_replies`, said); none left: given up (DeliveryRefused),
        counted as dropped."""
        needed = len(parts) + len(extras)
        room = self.shared.room(msg_id, [part_seq(row, i) for i in range(needed)])
        if needed <= room:
            return parts, extras
        if room <= 0:
            self.dropped("reply_limit")
            raise DeliveryRefused(
                f"{self.label}: message {msg_id} in {ref.key} already has the "
                f"{self.shared.max_replies} replies {self.label} takes, and {self.label} "
                "refuses active messages here: this reply is dropped"
            )
        self.log.warning(
            "{}: the reply to {} in {} needs {} messages; {} takes {} more replies to that "
            "message: the rest is cut",
            self.label,
            msg_id,
            ref.key,
            needed,
            self.label,
            room,
        )
        return fit_replies(parts, extras, room, limit, self.cut_note)

    async def answering(
        self, ref: R, answer: Answer, send: Send, unlinked: Send | None = None
    ) -> None:
        """`send(answer)`; when the window passed, once more as an active message; a link
        refused, once more through `unlinked` (None: the message is refused)."""
        try:
            await self._linking(ref, answer, send, unlinked)
        except WindowPassed:
            self.log.warning(
                "{}: the passive reply window of {} in {} has passed ({} said so): sending it "
                "as an active message{}",
                self.label,
                answer.msg_id or answer.event_id,
                ref.key,
                self.label,
                self._note(ref),
            )
            try:
                await self._linking(ref, Answer(), send, unlinked)
            except WindowPassed:
                raise DeliveryRefused(
                    f"{self.label} refused an active message to {ref.key}"
                ) from None

    async def _linking(self, ref: R, answer: Answer, send: Send, unlinked: Send | None) -> None:
        try:
            await send(answer)
        except LinkRefused:
            if unlinked is None:
                raise DeliveryRefused(
                    f"{self.label} refused a URL in the message to {ref.key}"
                ) from None
            if not self._told_links:
                self.log.warning(
                    "{} refused a link in a message to {} ({}): sent with the links replaced "
                    "by [link]",
                    self.label,
                    ref.key,
                    self.link_fix,
                )
                self._told_links = True
            await unlinked(answer)
