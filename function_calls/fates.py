"""Every incoming message's fate (issue 40): what became of it, recorded when its turn ends and
told by `/why` and `GET /v1/messages/{id}/fate`.

    answered       the model answered it (detail: the model)
    function       a function answered it without the model (detail: the function)
    declined       refused, with the reason the sender was told: limit, over_budget,
                   not_allowed, disabled, no_model, invalid, unknown_command, image, voice
    not_addressed  a group message without a mention: kept as context, not answered
    ignored        a rule said not to answer (detail: respond_in_groups, loop_guard,
                   bot_sender, no_answer)
    held           stored, its turn not ended yet (waiting for a model or a channel): since when;
                   or recorded held with detail "approval ID": a call of its turn waits for
                   an approver (function_calls/approvals.py), decided again when answered
    failed         the turn failed (detail: the error's class); `told`: the sender was told
    expired        stored and never handled within `bot.resume_window` (a crash, a stop)

The router sets `ctx.turn.fate` on each of its paths; the runtime records it with the message's
history row (`chatfn/storage/fates.py`), so no path leaves a message without one: held and
expired are what a stored message without a recorded fate is. `MessageFates` is the service
the runtime provides for reading them (`ctx.service(MessageFates)`: the `/why` built-in)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from chatfn.common.i18n import translate
from chatfn.storage import fates as stored

if TYPE_CHECKING:
    from chatfn.storage.db import Storage

FateKind = Literal[
    "answered",
    "function",
    "declined",
    "not_addressed",
    "ignored",
    "held",
    "failed",
    "expired",
]
FATES: tuple[FateKind, ...] = (
    "answered",
    "function",
    "declined",
    "not_addressed",
    "ignored",
    "held",
    "failed",
    "expired",
)


@dataclass(frozen=True, slots=True)
class Fate:
    """What a turn decided for its message: `kind`, which (`detail`), and whether the sender
    was told (a decline's notice, a failure's apology)."""

    kind: FateKind
    detail: str = ""
    told: bool = False


@dataclass(frozen=True, slots=True)
class MessageFate:
    """A stored message's fate as `/why` and the HTTP API tell it."""

    message: int
    platform: str
    chat_id: str
    sender_id: str
    text: str
    sent_at: datetime
    fate: FateKind
    detail: str
    told: bool
    # When it was decided; for held and expired, when the message came in.
    since: datetime

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.message,
            "platform": self.platform,
            "chat_id": self.chat_id,
            "sender_id": self.sender_id,
            "fate": self.fate,
            "detail": self.detail,
            "told": self.told,
            "sent_at": _iso(self.sent_at),
            "since": _iso(self.since),
        }

    def line(self, language: str) -> str:
        """One line in `language`: "Your message of 12:03 UTC: declined: a limit ..."."""
        what = translate(language, f"fate.{self.fate}", detail=self._detail(language))
        if self.fate in ("declined", "failed"):
            what += translate(language, "fate.told" if self.told else "fate.not_told")
        if self.fate == "held" and self.detail.startswith("approval "):
            what = translate(language, "fate.held_approval", detail=self.detail.split()[-1])
        elif self.fate == "held":
            what = translate(language, "fate.held", detail=self.since.strftime("%H:%M:%S UTC"))
        when = self.sent_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        return translate(language, "fate.line", when=when, what=what)

    def _detail(self, language: str) -> str:
        word, _, rest = self.detail.partition(" ")
        try:
            said = translate(language, f"fate.reason.{word}")
        except KeyError:  # a model's, a function's or an error's name: as it is
            return self.detail
        return f"{said} ({rest})" if rest else said


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


class MessageFates:
    """The bot's record of its messages' fates (a service: `ctx.service(MessageFates)`)."""

    def __init__(
        self, storage: Storage, resume_window: float, clock: Callable[[], float] = time.time
    ) -> None:
        self.storage = storage
        self.resume_window = resume_window
        self.clock = clock

    async def of(self, message: int, platform: str | None = None) -> MessageFate | None:
        """History row `message`'s fate (None: no such user message, on `platform`)."""
        row = await self.storage.run_aside(stored.read, self.storage.engine, message, platform)
        return None if row is None else self._fate(row)

    async def find(
        self,
        platform: str,
        chat_id: str,
        *,
        before: int | None,
        sender_id: str | None = None,
        quoted: str | None = None,
    ) -> MessageFate | None:
        """The latest message of a chat before row `before`: the sender's, or the quoted one."""
        row = await self.storage.run_aside(
            stored.find,
            self.storage.engine,
            platform,
            chat_id,
            before=before,
            sender_id=sender_id,
            quoted=quoted,
        )
        return None if row is None else self._fate(row)

    async def record(
        self, message: int, platform: str, chat_id: str, sender_id: str, fate: Fate
    ) -> None:
        await self.storage.run(
            stored.record,
            self.storage.engine,
            message,
            platform,
            chat_id,
            sender_id,
            fate.kind,
            fate.detail,
            fate.told,
        )

    def _fate(self, row: stored.FateRow) -> MessageFate:
        kind: FateKind
        if row.fate is None or row.decided_at is None:
            age = self.clock() - row.created_at.timestamp()
            kind = "held" if self.resume_window <= 0 or age <= self.resume_window else "expired"
            since = row.created_at
        else:
            kind = row.fate if row.fate in FATES else "failed"
            since = row.decided_at
        return MessageFate(
            message=row.message,
            platform=row.platform,
            chat_id=row.chat_id,
            sender_id=row.sender_id,
            text=row.text,
            sent_at=row.created_at,
            fate=kind,
            detail=row.detail,
            told=row.told,
            since=since,
        )
