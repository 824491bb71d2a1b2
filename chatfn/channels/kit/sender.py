"""The way out, the same on every platform: one ordered queue per chat, the chat's pace, every
platform call under the delivery policy, and what a message still owes when it stops half way.

A platform's sender subclasses `PlatformSender` and writes what is its own:

- `parse_chat(chat_id)`: the chat id back to where to post (ValueError naming the expected
  shape: the message is refused for good); a module's function will do:
  `parse_chat = staticmethod(parse_chat_id)`;
- `send_parts(ref, out, owed)`: the platform calls of one message, each through `call()`, with
  `owed.parts` the text parts and `owed.sent` counted up as they go out;
- `classify(exc, key)`: its SDK's exceptions as the kit's errors (errors.py), None to let one
  through unchanged. A platform that writes to the channel's own socket subclasses
  `SocketSender`: a socket error is the connection lost, tried again from the outbox.
- for a platform that fails a call without saying when to try again (a failure code, no
  answer in time), `failure(exc)` and `unsure(exc)`: its calls made through `retried()` are
  made again in place as the delivery policy says, refused (`refused`) after the last, and
  one that may have gone out is looked for (its `sent`) before it is made again.

Order: every send to a chat (a reply's parts, its images, a reminder meanwhile) runs in that
chat's queue, so a part that waits on a rate limit holds back the ones after it. Rate limits
and retries: the delivery policy (chatfn/runtime/delivery_policy.py), one object for every
platform. A message stopped half way raises NotDelivered with `rest`, the parts not sent:
the outbox sends only those later. Refused credentials are one error line until a call works
again; the messages wait in the outbox meanwhile.
"""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from loguru import logger

from chatfn.channels.outbound import OrderedRunner, RateLimiter
from chatfn.common.messages import (
    CredentialsRefused,
    DeliveryRefused,
    NotDelivered,
    OutgoingMessage,
    Unreachable,
)
from chatfn.runtime.channel_host import DeliveryPolicy

__all__ = [
    "ChatTarget",
    "Owed",
    "PlatformSender",
    "SharedStateSender",
    "SocketSender",
    "chat_kind",
]

T = TypeVar("T")


class ChatRef(Protocol):
    @property
    def key(self) -> str: ...


R = TypeVar("R", bound=ChatRef)
S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class ChatTarget:
    """Where a message goes on a platform whose chats are a group or a user, each one id
    (`group:<id>`, `private:<id>`): a sender's chat reference when it needs nothing more."""

    is_group: bool
    target: str

    @property
    def key(self) -> str:
        return f"{'group' if self.is_group else 'private'}:{self.target}"


def chat_kind(
    chat_id: str,
    what: str,
    expected: str,
    *,
    private: re.Pattern[str] | None = None,
    group: re.Pattern[str] | None = None,
) -> tuple[bool, str]:
    """A chat id `private:<id>` or `group:<id>` as (whether a group, the id), its id matching
    that kind's pattern (None: the platform has no such chats); else ValueError naming
    `what` it is not ("a X chat id") and the shapes `expected`."""
    kind, _, target = chat_id.partition(":")
    pattern = {"private": private, "group": group}.get(kind)
    if pattern is None or not pattern.match(target):
        raise ValueError(f"not {what}: {chat_id!r} (expected {expected})")
    return kind == "group", target


class Owed:
    """The text parts of one message and how many went out: what it still owes."""

    __slots__ = ("parts", "sent")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.sent = 0

    def rest(self) -> str | None:
        """The parts not sent yet (None: nothing went out, the message is owed whole)."""
        return "\n\n".join(self.parts[self.sent :]) if self.sent else None


class PlatformSender(ABC, Generic[R]):
    """The way out of one platform (module docstring)."""

    platform: ClassVar[str] = ""
    label: ClassVar[str] = ""
    #: What a message refused for good is raised as: a platform's own DeliveryRefused where
    #: its callers catch it by name.
    refused: ClassVar[type[DeliveryRefused]] = DeliveryRefused

    def __init_subclass__(cls, platform: str = "", label: str = "", **kw: Any) -> None:
        """`class XSender(PlatformSender[Ref], platform="x", label="X")`."""
        super().__init_subclass__(**kw)
        cls.platform, cls.label = platform or cls.platform, label or cls.label

    def __init__(self, client: Any, settings: Any, policy: DeliveryPolicy | None = None) -> None:
        """`client`: the platform's SDK client or API (`self.client`)."""
        self.client = client
        self.cfg = settings
        self.runner = OrderedRunner()
        # A platform whose SDK paces its sends itself has no `send_rate`: not paced here.
        pace = getattr(settings, "send_rate", 0.0), getattr(settings, "send_burst", 1)
        self.limiter = RateLimiter(*pace)
        own = getattr(settings, "max_retry_after", None)
        self.policy = (policy or DeliveryPolicy()).override(self.platform, own)
        self._told_refused = False
        self.log = logger.patch(lambda r: r.update({"name": type(self).__module__}))

    @abstractmethod
    def parse_chat(self, chat_id: str) -> R: ...

    @abstractmethod
    async def send_parts(self, ref: R, out: OutgoingMessage, owed: Owed) -> Any: ...

    def classify(self, exc: Exception, key: str) -> Exception | None:
        """`exc` (the platform's) as the kit's error; None: raised as it is."""
        return None

    async def deliver(self, out: OutgoingMessage) -> Any:
        """Send `out` in order with everything else sent to its chat."""
        try:
            ref = self.parse_chat(out.chat_id)
        except ValueError as exc:
            raise self.refused(str(exc)) from None
        return await self.runner.submit(ref.key, lambda: self._deliver(ref, out))

    async def _deliver(self, ref: R, out: OutgoingMessage) -> Any:
        owed = Owed()
        try:
            return await self.send_parts(ref, out, owed)
        except NotDelivered as exc:
            if exc.rest is None:
                exc.rest = owed.rest()
            raise

    async def call(self, key: str, call: Callable[[], Awaitable[T]]) -> T:
        """One platform call for the chat `key`: paced, its failure classified, a rate limit
        waited out in place within the policy's limit (longer: raised, the message waits)."""

        async def once() -> T:
            try:
                return await call()
            except (NotDelivered, DeliveryRefused):
                raise
            except Exception as exc:
                mapped = self.classify(exc, key)
                if mapped is None:
                    raise
                raise mapped from None

        try:
            result = await self.policy.call(
                self.platform, key, once, pace=self.limiter.acquire, label=self.label
            )
        except CredentialsRefused as exc:
            if not self._told_refused:
                self.log.error("{}: messages wait in the outbox until they work", exc)
            self._told_refused = True
            raise
        self._told_refused = False
        return result

    def failure(self, exc: Exception) -> str | None:
        """Why the platform failed a call without saying when to try again (a failure code, no
        answer in time), as the log shows it: the call is made again in place (`retried`);
        None: `exc` is not such a failure, raised as it is."""
        return None

    def unsure(self, exc: Exception) -> bool:
        """Whether the failed call may have been carried out all the same (no answer in time,
        the connection lost after it was written): looked for before it is made again."""
        return False

    async def retried(
        self,
        where: str,
        call: Callable[[], Awaitable[T]],
        *,
        what: str,
        about: str = "",
        sent: Callable[[datetime], Awaitable[bool]] | None = None,
    ) -> T | None:
        """`call` (`what`, for the chat `where`, of the message beginning `about`) made again
        in place while the platform fails it (`failure`): after the policy's `pause`s, its
        `retries` times, each failure a warning; failed every time, an error line with every
        failure and `refused` raised. A call that may have gone out (`unsure`) is first looked
        for, `sent(since)` (None: never): found, it is not made again (None). One lost with
        its connection (`unsure`, no `failure`) and not found is made again once at once; lost
        again, or any other error, is raised as it is (the message waits in the outbox)."""
        started = datetime.now(UTC)
        whys: list[str] = []
        resent = False
        while True:
            try:
                return await call()
            except Exception as exc:
                unsure = self.unsure(exc)
                if unsure and sent is not None and await sent(started):
                    self.log.info(
                        "message to {} was sent before the connection dropped: not resent", where
                    )
                    return None
                why = self.failure(exc)
                if why is None:
                    if not unsure or resent:
                        raise
                    resent = True
                    self.log.warning(
                        "{} to {}: connection dropped before the answer; resending", what, where
                    )
                    continue
                whys.append(why)
                if len(whys) > self.policy.retries:
                    self.log.error(
                        "message to {} not delivered: {} {}: {!r}",
                        where,
                        what,
                        " then ".join(whys),
                        about[:80],
                    )
                    raise self.refused(str(exc)) from exc
            pause = self.policy.pause(len(whys) - 1)
            self.log.warning(
                "{} to {} failed ({}): trying again in {:.1f} s", what, where, whys[-1], pause
            )
            await asyncio.sleep(pause)


class SocketSender(PlatformSender[R]):
    """A platform's way out over the channel's own connection (a socket it holds): a socket
    error while sending is the connection lost, the message unreachable for now."""

    def classify(self, exc: Exception, key: str) -> Exception | None:
        if isinstance(exc, ConnectionError | OSError | TimeoutError):
            return Unreachable(f"{self.label} connection lost while sending to {key} ({exc})")
        return None


class SharedStateSender(PlatformSender[R], Generic[R, S]):
    """A way out that reads what the channel's way in keeps (a reply window, an open stream, a
    passive reply's slot, a session's webhook): the channel makes that object and hands it
    over as `shared`, the one both sides use."""

    def __init__(self, client: Any, settings: Any, policy: Any, shared: S) -> None:
        super().__init__(client, settings, policy)
        self.shared = shared
