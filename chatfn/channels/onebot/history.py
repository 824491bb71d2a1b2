"""Was it sent already? The bot's own recent messages in a OneBot chat, read back from the
implementation, so a message whose send may have happened is not sent twice.

OneBot gives no delivery receipt the bot could keep: a send can reach QQ while the bot dies
before it writes down that it did (the outbox row stays pending), or the socket can drop after
the action went out and before its answer came back. Sending again would be at least once; the
implementations (NapCat, go-cqhttp, Lagrange, LLOneBot) can say what the account itself sent:

    get_group_msg_history  {"group_id", "count"}  -> {"messages": [message, ...]}   oldest first
    get_friend_msg_history {"user_id", "count"}   -> the same (go-cqhttp, NapCat)

each message shaped like `get_msg` (`message_id`, `time`, `user_id`, `sender`, `message`,
`raw_message`; the account's own carry its `user_id` and, in NapCat, `post_type:
"message_sent"`). A message owed since `created` counts as sent when the account's own messages
after that time (less CLOCK_SLACK: the implementation's clock is not the bot's) hold its parts,
in order, with the same text; each own message proves one part of one message only.

An implementation without the action (retcode 1404, or any failure) gets the message sent
again, as before (at least once), and that is logged once per account and action.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from loguru import logger

from chatfn.channels.kit import sent as kit_sent
from chatfn.channels.kit.sent import Owed
from chatfn.channels.onebot.link import ActionError, NotConnected, _int
from chatfn.channels.onebot.message import normalize

HISTORY_COUNT = 50  # the latest messages of a chat read back (one action per chat)


def history_request(chat_id: str) -> tuple[str, dict[str, Any]] | None:
    """The action and params that read a chat's latest messages back (`group:<id>` or
    `private:<id>`), or None for a chat id of another kind."""
    kind, _, target = chat_id.partition(":")
    if kind == "group":
        return "get_group_msg_history", {"group_id": _int(target), "count": HISTORY_COUNT}
    if kind == "private":
        return "get_friend_msg_history", {"user_id": _int(target), "count": HISTORY_COUNT}
    return None


CLOCK_SLACK = 10.0  # seconds the implementation's clock may be behind the bot's

CallAction = Callable[..., Awaitable[dict[str, Any]]]


def plain_words(text: str) -> str:
    """`text` as the history shows it to compare: runs of whitespace as one space."""
    return " ".join(text.split())


def is_own(message: Any, self_id: str) -> bool:
    """Whether a message of a history answer is the account's own send. NapCat marks it
    `message_sent`; the sender (`user_id`, or `sender.user_id`) is the account either way."""
    if not isinstance(message, dict):
        return False
    sender = message.get("sender")
    sender_id = sender.get("user_id") if isinstance(sender, dict) else None
    return (
        message.get("post_type") == "message_sent"
        or str(message.get("user_id", "")) == self_id
        or str(sender_id) == self_id
    )


def own_texts(messages: Any, self_id: str) -> list[tuple[float, str]]:
    """(time, plain text) of the account's own messages in a history answer, oldest first;
    entries that are not usable messages are skipped."""
    out: list[tuple[float, str]] = []
    for item in messages if isinstance(messages, list) else []:
        if not is_own(item, self_id):
            continue
        try:
            when = float(item.get("time") or 0)
            segments = normalize(item.get("message", item.get("raw_message", "")))
        except (TypeError, ValueError, KeyError, AttributeError):
            continue
        text = "".join(str(s["data"].get("text", "")) for s in segments if s.get("type") == "text")
        out.append((when, plain_words(text)))
    out.sort(key=lambda m: m[0])
    return out


def match_sent(owed: Sequence[Owed], own: Sequence[tuple[float, str]]) -> set[int]:
    """The keys of the `owed` messages found among the account's own messages `own`
    (chatfn/channels/kit/sent.py), their texts compared as QQ shows them (runs of whitespace
    as one space), the implementation's clock up to CLOCK_SLACK behind."""
    plain = [Owed(o.key, [plain_words(p) for p in o.parts], o.created) for o in owed]
    return kit_sent.match_sent(plain, own, CLOCK_SLACK)


class HistoryReader:
    """Reads a chat's latest messages back through `call_action` (the catch-up's), or the
    account's own among them (what `match_sent` looks in); an account whose implementation
    lacks the action (1404) is not asked again."""

    def __init__(self, call_action: CallAction) -> None:
        self._call = call_action
        self.unsupported: set[tuple[str, str]] = set()  # (account, action) answered 1404
        self.calls = 0  # actions made (for tests and the soak's figures)

    async def messages(self, self_id: str, chat_id: str) -> list[Any] | None:
        """The latest messages of `chat_id` (oldest first); None for a chat id of another
        kind or an action the account lacks. Raises NotConnected, and ActionError (a 1404 is
        remembered)."""
        request = history_request(chat_id)
        if request is None or (self_id, request[0]) in self.unsupported:
            return None
        self.calls += 1
        try:
            data = await self._call(self_id, *request, wait=0)
        except NotConnected:
            raise
        except ActionError as exc:
            if exc.retcode == 1404:  # API_NOT_FOUND: not asked again
                self.unsupported.add((self_id, request[0]))
            raise
        messages = data.get("messages")
        return messages if isinstance(messages, list) else []

    async def own_messages(self, self_id: str, chat_id: str) -> list[tuple[float, str]] | None:
        """The account's recent own messages in `chat_id`, or None when the implementation
        cannot tell (the action is missing or failed). Raises NotConnected."""
        try:
            messages = await self.messages(self_id, chat_id)
        except NotConnected:
            raise
        except ActionError as exc:
            logger.warning(
                "OneBot account {}: {} failed ({}): messages that may have been sent before "
                "are sent again (at least once)",
                self_id,
                exc.action,
                exc,
            )
            return None
        return None if messages is None else own_texts(messages, self_id)
