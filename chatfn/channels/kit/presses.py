"""A button pressed under one of the bot's messages (OutgoingMessage.buttons: an approval
request's Approve / Deny), the same on every platform that has buttons.

A press is the presser's own message in that chat, addressed to the bot, whose text is the
button's ("/approve K3F9QX"): it answers exactly as the command would, with the same checks
(`press_message`). What is the platform's own: how a press arrives, how it is acknowledged,
who the presser is (name, roles) and where the button's text is kept.

Some platforms want an answer to the press itself, shown to the presser alone and within a
few seconds (a toast, an ephemeral reply), and send the press again when it does not come in
time. `AnsweredOnce` gives a press sent again the first one's answer (the command runs once);
`PressReplies` keeps what the command says while the platform waits for it, and sends what
comes later to the chat. For an approval's buttons (`approval_of`), whether that answer
decided the request (`decided`) or found it expired (`expired`) tells the platform whether to
show the message again without its buttons: both are read from the bot's own sentences, in
any language of its catalogues (chatfn/common/i18n.py). `answer_press` puts those together:
the press queued as the presser's message, and what it came to by the time the platform
wants its answer (`Pressed`), for the platform to show in its own way.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

from chatfn.channels.kit.recent import Recent
from chatfn.common import i18n
from chatfn.common.messages import IncomingMessage, OutgoingMessage

__all__ = [
    "AnsweredOnce",
    "PressReplies",
    "Pressed",
    "answer_press",
    "approval_of",
    "decided",
    "expired",
    "press_message",
]

T = TypeVar("T")
Deliver = Callable[[OutgoingMessage], Awaitable[None]]

# The text of a press that answers an approval request, and the request's id.
_ANSWERING = re.compile(r"^/(?:approve|deny)\s+([A-Za-z0-9]{1,32})(?:\s|$)")


class _Channel(Protocol):
    def incoming(
        self, chat_id: str, sender_id: str, text: str, **fields: Any
    ) -> IncomingMessage | None: ...


class _Pressing(Protocol):
    """What `answer_press` reads of its channel (a `PlatformChannel`)."""

    platform: str
    host: Any
    inbound: Any  # its Inbound (kit/inbound.py)

    async def deliver(self, message: OutgoingMessage) -> None: ...


def press_message(
    channel: _Channel,
    chat_id: str,
    is_group: bool,
    user: str,
    text: str,
    ident: str,
    name: str = "",
    roles: list[str] | None = None,
    **fields: Any,
) -> IncomingMessage | None:
    """The press of `user` (shown as `name`, with `roles` in a group) in `chat_id` as their
    own message `text`, addressed to the bot, with the platform's id `ident` of the press;
    `fields` are IncomingMessage's (chat_name, ...)."""
    return channel.incoming(
        chat_id,
        user,
        text,
        is_group=is_group,
        sender_name=name,
        is_at_bot=True,
        message_id=ident,
        sender_roles=(roles or []) if is_group else [],
        **fields,
    )


def approval_of(text: str) -> str | None:
    """The request id a press's text answers ("/approve k3f9qx" -> "K3F9QX"), or None when
    it is not an approval's button."""
    found = _ANSWERING.match(text)
    return found.group(1).upper() if found else None


def expired(said: str, approval: str) -> bool:
    """Whether `said` is some language's "request ... has expired" for `approval`."""
    return any(
        said == texts["core.approval.stale.expired"].format(id=approval)
        for texts in i18n.CATALOGUES.values()
        if "core.approval.stale.expired" in texts
    )


def decided(said: str, approval: str) -> bool:
    """Whether the answer to `/approve ID` or `/deny ID` decided the request: it is the
    approved or denied sentence of some language's catalogue (core.approval.approved /
    denied), whatever the function's name; a refusal is any other sentence."""
    for texts in i18n.CATALOGUES.values():
        for key in ("core.approval.approved", "core.approval.denied"):
            template = texts.get(key, "")
            head, found, tail = template.partition("{function}")
            if not found:
                continue
            try:
                head, tail = head.format(id=approval), tail.format(id=approval)
            except (KeyError, IndexError, ValueError):
                continue
            if said.startswith(head) and said.endswith(tail) and len(said) > len(head + tail):
                return True
    return False


class AnsweredOnce(Generic[T]):
    """The answers to presses the platform may send again (the same id), remembering the
    last `remember`: a press sent again gets the first one's answer, waiting for it at most
    `wait` seconds (`empty` past that: the first one gives it)."""

    def __init__(self, empty: T, remember: int = 1000) -> None:
        self.empty = empty
        self._answers: Recent[str, asyncio.Future[T]] = Recent(remember)

    async def answer(self, key: str, make: Callable[[], Awaitable[T]], wait: float) -> T:
        """The answer to the press `key` ("" : one the platform gives no id, never a repeat):
        `make()` the first time."""
        if key and (first := self._answers.get(key)) is not None:
            try:
                async with asyncio.timeout(wait):
                    return await asyncio.shield(first)
            except TimeoutError:
                return self.empty
        answer: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        if key:
            self._answers.put(key, answer)
        try:
            result = await make()
        except BaseException:
            answer.set_result(self.empty)  # a repeat waiting for it gets no answer, not an error
            raise
        answer.set_result(result)
        return result


class PressReplies:
    """Where the command's answers to one press go (a `sink` of `Inbound.message`): while
    `inline`, kept in `replies` (the answer to the press itself); afterwards, and when the
    press wants no answer of its own, to the chat (`deliver`), each then handed to `later`
    (a message shown again when the decision comes after the press was answered)."""

    def __init__(
        self,
        deliver: Deliver,
        inline: bool,
        later: Callable[[OutgoingMessage], Awaitable[None]] | None = None,
    ) -> None:
        self.deliver = deliver
        self.inline = inline
        self.later = later
        self.replies: list[OutgoingMessage] = []

    async def sink(self, out: OutgoingMessage) -> None:
        if self.inline:
            self.replies.append(out)
            return
        await self.deliver(out)
        if self.later is not None:
            await self.later(out)

    async def said(self, job: asyncio.Future[None], wait: float) -> str | None:
        """What the command said (its replies' text) once `job` ended within `wait` seconds;
        None when it did not and said nothing yet: the rest goes to the chat."""
        try:
            async with asyncio.timeout(wait):
                await asyncio.shield(job)
        except TimeoutError:
            if not self.replies:
                self.inline = False
                return None
        self.inline = False
        return "\n".join(r.text for r in self.replies if r.text).strip()


@dataclass(frozen=True, slots=True)
class Pressed:
    """What the press of an approval's button came to when its answer was due: `kind`
    "pending" (not ready: `said` is the sentence saying the answer follows in the chat),
    "refused" (the presser may not answer it: the message stays as it was), "expired" or
    "decided" (the message is shown again without its buttons, with `said`)."""

    kind: Literal["pending", "refused", "expired", "decided"]
    said: str


async def answer_press(
    channel: _Pressing,
    chat: str,
    ident: str,
    text: str,
    read: Callable[[], Awaitable[IncomingMessage | None]],
    wait: float,
    redraw: Callable[[str], Awaitable[None]] | None = None,
) -> Pressed | None:
    """The press `text` (platform id `ident`) queued in `chat` as the presser's message
    (`read()`: `press_message`); for an approval's button, what it came to within `wait`
    seconds (`Pressed`); None for another button (its answer is a message in the chat, as a
    command's) or when the command said nothing. `redraw(said)` shows the message again when
    the decision comes after the press was answered (once, a decision only)."""
    approval = approval_of(text)
    later = None
    if approval is not None and redraw is not None:
        pending = [redraw]

        async def later(out: OutgoingMessage) -> None:
            if pending and decided(out.text, approval):
                await pending.pop()(out.text)

    replies = PressReplies(channel.deliver, approval is not None, later)
    job = channel.inbound.message(chat, ident, read, sink=replies.sink)
    if approval is None:
        return None
    said = await replies.said(job, wait)
    if said is None:  # not ready: the answer follows in the chat
        language = i18n.language_of(channel.host.settings, channel.platform, chat)
        return Pressed(
            "pending", i18n.translate(language, "core.approval.press_pending", id=approval)
        )
    if not said:
        return None
    if expired(said, approval):
        return Pressed("expired", said)
    return Pressed("decided" if decided(said, approval) else "refused", said)
