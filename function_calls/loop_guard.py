"""The loop guard (issue 40 §3): two bots in a chat that answer each other would do so forever,
until a provider bans them. The guard watches each PAIR in a chat: this bot and one other
account. What it counts is the exchange, not the other account's pace: a message from X counts
as a round when it came in after the bot had answered X (or opens the exchange). More than
`bot.loop_guard.messages` rounds within `window` seconds stop the exchange: the chat gets one
notice and X is not answered there for `cooldown` seconds (each message then ignored, its fate
`ignored: loop_guard`). OpenClaw's reference is 20 in 60 s; the defaults are the same, with a
5-minute cool-down.

Why arrival, not processing: a chat's turns run one after another, so a fast human's burst
(five lines typed while the first is being answered) is processed as message, answer, message,
answer... and would look like an exchange. The runtime tells the guard when a message comes in
(`arrived`, before it waits for its chat's turn); a message that arrived while the bot had not
yet answered X's previous one is part of a burst and is not a round. Two bots answering each
other alternate strictly: every message is a round.

Kept in memory per process: a restart forgets a cool-down, which only lets an exchange run
another `messages` rounds."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from chatfn.common.config import LoopGuardSettings
from chatfn.common.messages import IncomingMessage

Verdict = Literal["pass", "trip", "cooling"]
# Pairs kept at most (the oldest forgotten first): a bounded memory however many senders write.
MAX_PAIRS = 10_000
# Arrivals remembered until their turn screens them (a turn that never does is forgotten).
MAX_PENDING = 10_000

Key = tuple[str, str, str]  # (platform, chat_id, the other account)


@dataclass(slots=True)
class _Pair:
    times: deque[float] = field(default_factory=deque)  # rounds of the exchange
    until: float = 0.0  # cooling down until then
    answered: bool = False  # the bot answered X since X's last arrival


def _key(msg: IncomingMessage) -> Key:
    return (msg.platform, msg.chat_id, msg.sender_id)


class LoopGuard:
    def __init__(self, settings: LoopGuardSettings) -> None:
        self.settings = settings
        self._pairs: dict[Key, _Pair] = {}
        # id(message) -> whether it arrived as a round of an exchange
        self._rounds: dict[int, bool] = {}

    def _pair(self, key: Key) -> _Pair:
        pair = self._pairs.pop(key, None) or _Pair()
        self._pairs[key] = pair  # most recently seen last
        if len(self._pairs) > MAX_PAIRS:
            del self._pairs[next(iter(self._pairs))]
        return pair

    def arrived(self, msg: IncomingMessage) -> None:
        """A message addressed to the bot came in (before it waits for its chat's turn): it is
        a round when the bot answered its sender since the sender's previous message."""
        if self.settings.messages <= 0:
            return
        pair = self._pair(_key(msg))
        self._rounds[id(msg)] = pair.answered
        pair.answered = False
        if len(self._rounds) > MAX_PENDING:
            del self._rounds[next(iter(self._rounds))]

    def forget(self, msg: IncomingMessage) -> None:
        """The message's turn is over (screened or not): its arrival is not kept."""
        self._rounds.pop(id(msg), None)

    def answered(self, msg: IncomingMessage) -> None:
        """The bot said something to `msg`'s sender in its chat: the sender's next message is
        the exchange's next round."""
        if self.settings.messages > 0:
            self._pair(_key(msg)).answered = True

    def check(self, msg: IncomingMessage, now: float) -> Verdict:
        """Screen a message the bot would answer: "pass", "trip" (the limit was just passed:
        tell the chat once) or "cooling" (not answered, nothing said). A message the runtime
        did not announce (`arrived`) is judged by the pair's state now."""
        limit = self.settings.messages
        if limit <= 0:
            return "pass"
        pair = self._pair(_key(msg))
        known = self._rounds.pop(id(msg), None)
        if known is None:
            known, pair.answered = pair.answered, False
        if now < pair.until:
            return "cooling"
        times = pair.times
        while times and times[0] <= now - self.settings.window:
            times.popleft()
        if known or not times:  # a round, or the message that opens an exchange
            times.append(now)
        if len(times) > limit:
            times.clear()
            pair.until = now + self.settings.cooldown
            return "trip"
        return "pass"
