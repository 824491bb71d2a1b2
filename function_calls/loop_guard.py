"""The loop guard (issue 40 §3): two bots in a chat that answer each other would do so forever,
until a provider bans them. Per pair of senders in a chat (the sender and this bot), more than
`bot.loop_guard.messages` messages the bot would answer within `window` seconds stop the
exchange: the chat gets one notice and the sender is not answered there for `cooldown` seconds
(each message then ignored, its fate `ignored: loop_guard`). OpenClaw's reference is 20 in
60 s; the defaults are the same, with a 5-minute cool-down.

Kept in memory per process: a restart forgets a cool-down, which only lets an exchange run
another `messages` messages."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from chatfn.common.config import LoopGuardSettings

Verdict = Literal["pass", "trip", "cooling"]
# Pairs kept at most (the oldest forgotten first): a bounded memory however many senders write.
MAX_PAIRS = 10_000


@dataclass(slots=True)
class _Pair:
    times: deque[float] = field(default_factory=deque)
    until: float = 0.0  # cooling down until then


class LoopGuard:
    def __init__(self, settings: LoopGuardSettings) -> None:
        self.settings = settings
        self._pairs: dict[tuple[str, str, str], _Pair] = {}

    def check(self, platform: str, chat_id: str, sender_id: str, now: float) -> Verdict:
        """Count one message from `sender_id` the bot would answer: "pass", "trip" (the limit
        was just passed: tell the chat once) or "cooling" (not answered, nothing said)."""
        limit = self.settings.messages
        if limit <= 0:
            return "pass"
        key = (platform, chat_id, sender_id)
        pair = self._pairs.pop(key, None) or _Pair()
        self._pairs[key] = pair  # most recently seen last
        if len(self._pairs) > MAX_PAIRS:
            del self._pairs[next(iter(self._pairs))]
        if now < pair.until:
            return "cooling"
        times = pair.times
        times.append(now)
        while times and times[0] <= now - self.settings.window:
            times.popleft()
        if len(times) > limit:
            times.clear()
            pair.until = now + self.settings.cooldown
            return "trip"
        return "pass"
