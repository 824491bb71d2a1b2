"""Turns a chat's stored history into the messages a model sees.

Shared by the tool loop and the chat fallback so both present the same conversation.

The order is chosen for prompt caching: providers bill a repeated request prefix at a fraction
of the price, but only a byte-identical one. So what changes least comes first: the system
prompt (persona and place, the same for every request of a chat), then the older history, then
the newest message, which alone carries what changes per turn (the current time, who speaks).
The history window is cut in blocks at fixed positions of the chat, not slid by one turn per
request, so the part already sent stays the prefix of the next requests.

Ambient context (issue 40 §4): in a group that answers mentions only, what members said without
addressing the bot is not part of the conversation; the newest of it (the chat's `ambient`
key: a count and a token budget) goes into the newest message, marked as background chatter
with each speaker named, so the history before it, and so the cached prefix, is the same with
or without it (bench/bench_ambient.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from zoneinfo import ZoneInfo

from chatfn.common.chat_keys import AMBIENT, AmbientChat
from chatfn.common.messages import SPOKEN_MARK
from chatfn.storage.chat_state import Summary
from chatfn.storage.db import StoredMessage
from function_calls.commands import split_command
from function_calls.context import MessageContext
from function_calls.spec import FunctionSpec
from providers.base import prompt_cache_key
from providers.types import Message

# Without a tokenizer, tokens are estimated from UTF-8 bytes. English runs about 4 bytes per
# token and CJK text about 3 bytes (one character) per token on current tokenizers; 3 errs on
# the side of sending less. Each message also costs a few tokens of framing.
BYTES_PER_TOKEN = 3
MESSAGE_OVERHEAD_TOKENS = 4
# Room kept for the model's answer when the model config sets no `max_tokens`.
ANSWER_RESERVE_TOKENS = 1024
TIME_HINT = (
    "The newest message opens with a <context> line: the current time and who sent it. "
    "It is for you; never repeat it."
)


def estimate_tokens(text: str | None) -> int:
    """A local, conservative token count (no network call, no tokenizer download)."""
    return len((text or "").encode()) // BYTES_PER_TOKEN + MESSAGE_OVERHEAD_TOKENS


def system_prompt(ctx: MessageContext, extra: str = "", summary: Summary | None = None) -> str:
    """The chat's static instructions: the same bytes for every request of this chat (no time,
    no speaker), so it stays in the cached prefix. A compacted history's summary comes last:
    it changes only at a compaction, so the prefix stays the same between two."""
    bot = ctx.config.bot
    place = (
        f"a group chat ({ctx.message.chat_name or ctx.message.chat_id})"
        if ctx.message.is_group
        else "a private chat"
    )
    # The chat's persona or system prompt (`chats:` rules, `/persona`), else `bot:`'s.
    base = ctx.chat.system_prompt.replace("{bot_name}", bot.name)
    lines = [base, f"You are in {place}. {TIME_HINT}"]
    if extra:
        lines.append(extra)
    if summary is not None:
        lines.append(summary_block(summary))
    return "\n".join(lines)


def summary_block(summary: Summary) -> str:
    """How the model sees a compacted history: after the instructions, before the turns kept."""
    return (
        f"\nSummary of the earlier conversation ({summary.messages} messages before the ones "
        f"below, written {summary.created_at:%Y-%m-%d %H:%M} UTC):\n{summary.text}"
    )


def now(ctx: MessageContext) -> datetime:
    """The bot's clock in the zone users and functions think in (`bot.timezone`), so times
    the model works out ("in 2 hours" -> 15:30) match what reminder_set reads; else the
    machine's zone."""
    zone = ctx.config.bot.timezone
    instant = ctx.turn.clock()
    return (
        datetime.fromtimestamp(instant, ZoneInfo(zone))
        if zone
        else datetime.fromtimestamp(instant).astimezone()
    )


def turn_note(ctx: MessageContext) -> str:
    """What changes every turn, put before the newest message only (the earlier turns, and so
    the cached prefix, never carry it). A tagged line ahead of the user's words: a note after
    them, in brackets, was the last thing small models read and they copied it into their
    answers; what still comes back is cut by note_echo.py."""
    t = now(ctx)
    return (
        f"<context>Current time: {t:%Y-%m-%d %H:%M} ({t:%A}), time zone {t.tzname()} "
        f"(UTC{t:%z}). From: {ctx.message.display_name}.</context>"
    )


def _as_message(row: StoredMessage) -> Message:
    if row.role == "assistant":
        return Message(role="assistant", content=row.text)
    # A transcribed voice message: the model is shown the user's words, not the mark.
    text = row.text.removeprefix(SPOKEN_MARK)
    content = f"{row.sender_name or row.sender_id}: {text}" if row.is_group else text
    return Message(role="user", content=content, name=row.sender_name or None)


def history_messages(
    rows: list[StoredMessage], skip: frozenset[int] = frozenset()
) -> list[Message]:
    """Stored rows to model messages, starting at a user turn: a window that opens on the bot's
    own reply would show an answer without its question. The bot's own notices (outages) are
    not the model's words and are left out, as are the rows in `skip` (a group's chatter)."""
    kept = [r for r in rows if r.role != "notice" and r.id not in skip]
    return [_as_message(r) for r in _from_user_turn(kept)]


# ------------------------------------------------------------------------ ambient context


def is_chatter(row: StoredMessage) -> bool:
    """A group member's message that did not address the bot (no mention, no command)."""
    return (
        row.role == "user"
        and row.is_group
        and row.is_at_bot is False
        and split_command(row.text) is None
    )


def splits_chatter(ctx: MessageContext) -> bool:
    """Whether this chat's history has chatter to set apart: a group answering mentions only
    (with `always` every message addressed the bot; with `never` no model is asked)."""
    return ctx.message.is_group and ctx.chat.respond_in_groups == "at"


def ambient_block(ctx: MessageContext, chatter: list[StoredMessage], settings: AmbientChat) -> str:
    """The newest chatter (oldest first) within the chat's count and token budget, as one
    marked block: the time and the speaker of each line. "" when there is none."""
    zone = ctx.config.bot.timezone
    lines: list[str] = []
    used = estimate_tokens(AMBIENT_OPEN + AMBIENT_CLOSE)
    for row in reversed(chatter[-settings.messages :]):
        when = row.created_at.astimezone(ZoneInfo(zone)) if zone else row.created_at.astimezone()
        text = row.text.removeprefix(SPOKEN_MARK).replace("\n", " ")
        line = f"[{when:%H:%M}] {row.sender_name or row.sender_id}: {text}"
        cost = estimate_tokens(line)
        if used + cost > settings.tokens:
            if not lines:  # one long message: its start rather than nothing
                room = max(0, settings.tokens - used) * BYTES_PER_TOKEN
                lines.append(line.encode()[:room].decode(errors="ignore") + " [...]")
            break
        lines.append(line)
        used += cost
    if not lines:
        return ""
    return "\n".join([AMBIENT_OPEN, *reversed(lines), AMBIENT_CLOSE])


AMBIENT_OPEN = (
    "<background>Background chatter in this group: members talking among themselves, not to "
    "you, oldest first. Context only; answer the message after it."
)
AMBIENT_CLOSE = "</background>"


def _from_user_turn(rows: list[StoredMessage]) -> list[StoredMessage]:
    start = 0
    while start < len(rows) and rows[start].role != "user":
        start += 1
    return rows[start:]


def _image_notes(ctx: MessageContext) -> list[str]:
    """Per image: what `bot.vision_model` saw in it, else the short "[image]" note."""
    described = ctx.turn.image_descriptions
    return [
        ctx.t("image.described", description=described[i])
        if i < len(described) and described[i]
        else ctx.t("image.note")
        for i in range(len(ctx.message.images))
    ]


def current_message(ctx: MessageContext, note: bool = True, ambient: str = "") -> Message:
    """The newest message: the turn note, the group's background chatter (`ambient`), then
    the sender's words: all that changes per turn, after the cached prefix."""
    msg = ctx.message
    text = msg.text
    if msg.quoted_text:
        text = f"(quoting: {msg.quoted_text[:500]})\n{text}"
    if msg.images and not ctx.turn.images:  # a model without vision: it learns an image was there
        notes = " ".join(_image_notes(ctx))
        text = f"{text}\n{notes}" if text else notes
    if msg.audio and not msg.spoken:  # not transcribed: it learns a voice message came
        unheard = ctx.t("voice.note")
        text = f"{text}\n{unheard}" if text else unheard
    if msg.is_group:
        text = f"{msg.display_name}: {text}"
    if ambient:
        text = f"{ambient}\n{text}"
    if note:
        text = f"{turn_note(ctx)}\n{text}"
    return Message(role="user", content=text, name=msg.sender_name or None, images=ctx.turn.images)


# ------------------------------------------------------------------------ the history window


def block_window(rows: list[StoredMessage], total: int, limit: int) -> list[StoredMessage]:
    """The rows to send of the chat's last `limit` (`rows`, oldest first), of `total` before
    this message.

    Cut at absolute positions that are multiples of half the limit, so the window's start only
    moves every `limit // 2` messages and the model always sees more than half the configured
    history: with `limit` 20 it sees 11 to 20 messages, and the first 11 stay the same for 10
    messages in a row.
    """
    if total <= limit or len(rows) < limit:
        return rows
    block = max(1, limit // 2)
    start = -(-(total - limit) // block) * block  # the first multiple of block >= total - limit
    keep = total - start
    return rows[len(rows) - keep :]


@dataclass(slots=True)
class _Turn:
    """A user message and the bot's replies to it: history is only ever cut between these."""

    position: int  # absolute position of its first row in the chat
    rows: list[StoredMessage]
    tokens: int


def _turns(
    rows: list[StoredMessage], first_position: int, skip: frozenset[int] = frozenset()
) -> list[_Turn]:
    turns: list[_Turn] = []
    for offset, row in enumerate(rows):
        if row.role == "notice" or row.id in skip:
            continue
        cost = estimate_tokens(_as_message(row).content)
        if row.role == "user" or not turns:
            turns.append(_Turn(first_position + offset, [row], cost))
        else:
            turns[-1].rows.append(row)
            turns[-1].tokens += cost
    return turns


def fit_tokens(
    rows: list[StoredMessage],
    first_position: int,
    budget: int,
    step: int,
    skip: frozenset[int] = frozenset(),
) -> list[StoredMessage]:
    """The newest turns of `rows` that fit in `budget` tokens, cut at a user turn.

    Like the count window, the cut is taken at fixed positions (every `step` messages of the
    chat) when one fits, so a chat bounded by tokens does not slide by one turn per request;
    only when no such cut fits are turns dropped one by one, newest kept.
    """
    turns = _turns(rows, first_position, skip)
    suffix = [0] * (len(turns) + 1)
    for i in range(len(turns) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + turns[i].tokens
    if suffix[0] <= budget:
        return [r for t in turns for r in t.rows]
    step = max(1, step)
    for i, turn in enumerate(turns):
        # First turn at or after a step boundary whose tail fits.
        previous = turns[i - 1].position if i else first_position - 1
        if turn.position // step > previous // step and suffix[i] <= budget:
            return [r for t in turns[i:] for r in t.rows]
    for i in range(len(turns)):
        if suffix[i] <= budget:
            return [r for t in turns[i:] for r in t.rows]
    return []


async def build_messages(
    ctx: MessageContext,
    *,
    extra_system: str = "",
    history_limit: int | None = None,
    reserve_tokens: int = 0,
    summary: Summary | None = None,
) -> list[Message]:
    """System prompt, the history window, the newest message (with the turn note).

    `reserve_tokens`: what the request carries besides the messages (the tool list); the
    messages get the model's `context_tokens` minus that and the room for the answer. Also
    names the chat as this turn's prompt cache key (`providers.base.prompt_cache_key`).
    `summary`: the chat's compacted history (function_calls/compaction.py), shown at the end
    of the system prompt; the history window then starts after the messages it covers.
    """
    window = await plan_window(
        ctx,
        extra_system=extra_system,
        history_limit=history_limit,
        reserve_tokens=reserve_tokens,
        summary=summary,
    )
    return window.messages(window.fitted())


@dataclass(slots=True)
class Window:
    """What one request would send, before the history is cut to fit its token budget."""

    system: Message
    current: Message
    rows: list[StoredMessage]  # the count window (history_size), oldest first
    total: int  # messages of the chat before this one (after /reset and the summary)
    budget: int  # tokens the history rows may take
    limit: int
    # Rows of the window that are the group's chatter, not the conversation (shown, within
    # the chat's `ambient` bounds, in `current` instead).
    chatter: frozenset[int] = frozenset()

    def turns(self) -> list[_Turn]:
        return _turns(self.rows, self.total - len(self.rows), self.chatter)

    def overflows(self) -> bool:
        """Whether the history window holds more tokens than the budget: turns would be left
        out (or, with compaction, summarised)."""
        return sum(t.tokens for t in self.turns()) > self.budget

    def fitted(self) -> list[StoredMessage]:
        """The newest turns of the window that fit the budget (older ones left out)."""
        return fit_tokens(
            self.rows,
            self.total - len(self.rows),
            self.budget,
            max(2, self.limit // 4),
            self.chatter,
        )

    def messages(self, rows: list[StoredMessage]) -> list[Message]:
        if self.budget < 0:  # the newest message alone does not fit: cut, history dropped
            return [
                self.system,
                _truncate(self.current, self.budget + estimate_tokens(self.current.content)),
            ]
        return [self.system, *history_messages(rows, self.chatter), self.current]


async def plan_window(
    ctx: MessageContext,
    *,
    extra_system: str = "",
    history_limit: int | None = None,
    reserve_tokens: int = 0,
    summary: Summary | None = None,
) -> Window:
    """The parts of a request and the history window it may draw from (`build_messages`)."""
    prompt_cache_key.set(cache_key(ctx))
    limit = ctx.chat.history_size if history_limit is None else history_limit
    system = Message(role="system", content=system_prompt(ctx, extra_system, summary))
    current = current_message(ctx)
    budget = _message_budget(ctx, reserve_tokens) - estimate_tokens(system.content)
    budget -= estimate_tokens(current.content)
    after = summary.upto_id if summary is not None else None
    rows = await ctx.history(limit, after_id=after) if limit and budget >= 0 else []
    if not rows:
        return Window(system, current, [], 0, budget, limit)
    total = await ctx.history_count(after_id=after) if len(rows) >= limit else len(rows)
    rows = block_window(rows, total, limit)
    chatter: frozenset[int] = frozenset()
    if splits_chatter(ctx):
        said = [r for r in rows if is_chatter(r)]
        chatter = frozenset(r.id for r in said)
        ambient = ctx.chat.get(AMBIENT)
        block = ambient_block(ctx, said, ambient) if ambient.enabled else ""
        if block:
            with_block = current_message(ctx, ambient=block)
            cost = estimate_tokens(with_block.content) - estimate_tokens(current.content)
            if cost <= budget:  # the conversation's room first gives way to it
                current, budget = with_block, budget - cost
    return Window(system, current, rows, total, budget, limit, chatter)


def cache_key(ctx: MessageContext) -> str:
    """The chat, hashed: requests of one chat share their prefix; the id itself stays here."""
    chat = f"{ctx.message.platform}\x00{ctx.message.chat_id}".encode()
    return "chat-" + hashlib.sha256(chat).hexdigest()[:32]


def _message_budget(ctx: MessageContext, reserve_tokens: int) -> int:
    caps = ctx.model.capabilities if ctx.model is not None else None
    context = caps.context_tokens if caps is not None else 16000
    answer = getattr(getattr(ctx.model, "cfg", None), "max_tokens", None) or ANSWER_RESERVE_TOKENS
    return context - reserve_tokens - answer


_tool_tokens: dict[int, tuple[FunctionSpec, int]] = {}


def tools_tokens(specs: Sequence[FunctionSpec]) -> int:
    """Estimate of a tool list's tokens (name, description, schema), for `reserve_tokens`;
    once per spec (specs live as long as the bot), not per request."""
    total = 0
    for spec in specs:
        hit = _tool_tokens.get(id(spec))
        if hit is None or hit[0] is not spec:
            if len(_tool_tokens) >= 4096:  # specs made on the fly (tests): stay bounded
                _tool_tokens.clear()
            text = json.dumps([spec.name, spec.description, spec.parameters_schema])
            hit = _tool_tokens[id(spec)] = (spec, estimate_tokens(text))
        total += hit[1]
    return total


# ---------------------------------------------------------------------- fitting a context window

# Per image: a rough share of the window; then the "[truncated: ...]" note itself.
_IMAGE_TOKENS = 800
_NOTE_TOKENS = 30


def estimate_message_tokens(messages: list[Message]) -> int:
    """`estimate_tokens` over whole messages: their text, their tool calls and their images."""
    total = 0
    for m in messages:
        calls = "".join(c.name + (c.arguments or "") for c in m.tool_calls)
        total += estimate_tokens((m.content or "") + calls) + _IMAGE_TOKENS * len(m.images)
    return total


def _truncate(message: Message, tokens: int) -> Message:
    """`message` cut to about `tokens` tokens, with a note saying how much was left out;
    unchanged when it fits."""
    text = message.content or ""
    keep = max(0, tokens - _NOTE_TOKENS) * BYTES_PER_TOKEN
    data = text.encode()
    if len(data) <= keep:
        return message
    kept = data[:keep].decode(errors="ignore")
    note = (
        f"\n[truncated: {len(text) - len(kept)} more characters did not fit the model's "
        "context window]"
    )
    return replace(message, content=kept + note)


def fit_messages(messages: list[Message], budget: int) -> list[Message]:
    """`messages` cut to about `budget` tokens for a retry after a context-length error: the
    oldest history goes first, a whole user turn at a time (a reply never loses its question);
    then the largest remaining messages are truncated with a note. The system prompt and the
    current turn (the last user message and the tool rounds after it) stay."""
    if estimate_message_tokens(messages) <= budget:
        return list(messages)
    head = messages[:1] if messages and messages[0].role == "system" else []
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=len(head))
    middle, tail = list(messages[len(head) : last_user]), list(messages[last_user:])
    while middle and estimate_message_tokens(head + middle + tail) > budget:
        # Drop the oldest turn: its user message and everything up to the next one.
        cut = next((i for i, m in enumerate(middle) if i and m.role == "user"), len(middle))
        middle = middle[cut:]
    out = head + middle + tail
    over = estimate_message_tokens(out) - budget
    # Largest first: one oversized message (the usual cause) takes the whole cut.
    for index in sorted(range(len(out)), key=lambda i: -len(out[i].content or "")):
        if over <= 0:
            break
        message = out[index]
        size = estimate_message_tokens([message])
        # Keep at least a little of every message, so the model still sees what it was.
        room = max(size - over, min(size, 200))
        out[index] = _truncate(message, room - MESSAGE_OVERHEAD_TOKENS)
        over -= size - estimate_message_tokens([out[index]])
    return out
