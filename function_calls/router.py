"""FunctionCallRouter: decides what happens to one message.

1. A slash command runs its function directly (no model call).
2. Otherwise the functions this context may see go to the tool loop.
3. Whatever the loop did not answer falls back to plain chat.

This is the one boundary where provider failures become a short user-facing sentence; the
history already holds the user's message, so nothing is lost.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from chatfn.common.chat_keys import ANSWER_BOTS
from chatfn.common.config import CoreSettings
from chatfn.common.i18n import translate
from chatfn.common.messages import IncomingMessage
from function_calls import limits
from function_calls.approvals import Approvals, Decision, Held, load_turn
from function_calls.chat import run_chat_fallback
from function_calls.chat_settings import ChatSettings
from function_calls.commands import CommandSyntaxError, parse_arguments, split_command, usage
from function_calls.compaction import conversation
from function_calls.context import MessageContext
from function_calls.conversation import tools_tokens
from function_calls.executor import Execution, FunctionExecutor
from function_calls.fates import Fate
from function_calls.images import MAX_BYTES, ImageError, describe_images, fetch_images
from function_calls.journal import TurnJournal
from function_calls.llm import FunctionCallLLM
from function_calls.loop_guard import LoopGuard
from function_calls.permissions import refusal_reason, visible_functions
from function_calls.registry import Registry
from function_calls.voice import hear
from providers.base import ChatModel
from providers.errors import (
    ContextLengthExceeded,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
)
from providers.types import Message


def user_message_for(exc: ProviderError, language: str = "en") -> str:
    if isinstance(exc, ContextLengthExceeded):
        # Retrying later will not help: say so, and what will.
        return translate(language, "core.too_long")
    if isinstance(exc, ProviderTimeout):
        why = "timeout"
    elif isinstance(exc, ProviderRateLimited):
        why = "rate_limited"
    elif isinstance(exc, ProviderAuthError):
        why = "auth"
    elif isinstance(exc, ProviderBadRequest):
        why = "bad_request"
    else:
        why = "unavailable"
    return translate(language, "core.outage", why=translate(language, f"core.outage.{why}"))


def should_answer(msg: IncomingMessage, rule: str) -> bool:
    """Group messages that do not address the bot are stored but not answered, unless config
    (`respond_in_groups`, the chat's `rule`) says otherwise; slash commands count as
    addressing the bot."""
    if not msg.is_group:
        return True
    if split_command(msg.text) is not None and rule != "never":
        return True
    if rule == "always":
        return True
    return rule == "at" and msg.is_at_bot


#: Where a message goes, decided before anything runs (`path_of`): not addressed (a group
#: message without a mention: kept as context), ignored by `respond_in_groups: never`, a slash
#: command, declined for want of a model, or to the model.
Path = Literal["not_addressed", "ignored", "command", "no_model", "model"]


def path_of(msg: IncomingMessage, chat: ChatSettings, has_model: bool) -> Path:
    """The one decision "does this message reach a model", read by the router's dispatch (which
    acts on it) and by the runtime's turn plan (which counts a message that reaches a model
    against the limits and reads its history window in the transaction that stores it): the
    two cannot disagree. Pure: no statement, no await (the plan runs on the storage thread)."""
    if not should_answer(msg, chat.respond_in_groups):
        never = msg.is_group and chat.respond_in_groups == "never"
        return "ignored" if never else "not_addressed"
    if split_command(msg.text) is not None:
        return "command"
    return "model" if has_model else "no_model"


class FunctionCallRouter:
    """Routes messages. The model is each message's own (`ctx.model`: the chat's, from the
    `chats:` rules and `/model`); `model` here is only the bot's default, for callers that
    ask which one that is."""

    def __init__(
        self, registry: Registry, settings: CoreSettings, model: ChatModel | None = None
    ) -> None:
        self.registry = registry
        self.settings = settings
        self.model = model
        self.executor = FunctionExecutor(
            registry, default_timeout=settings.function_calls.call_timeout
        )
        self.llm = FunctionCallLLM(None, self.executor, settings.function_calls)
        self.loop_guard = LoopGuard(settings.bot.loop_guard)

    async def dispatch(self, ctx: MessageContext) -> bool:
        """Handle one message; returns whether the bot answered it. The usage rows and limit
        counts of its model requests are written with the turn's next tool-call row, or in one
        write when it ends (function_calls/journal.py): not one transaction per request. A
        runtime that ends the turn with its own write (`ctx.turn.journal` set) writes them
        there."""
        own = ctx.turn.journal is None
        if own:
            ctx.turn.journal = TurnJournal(
                ctx.turn.storage, ctx.message.platform, ctx.message.chat_id
            )
        try:
            return await self._dispatch(ctx)
        finally:
            if ctx.sent:  # its sender's next message is the exchange's next round
                self.loop_guard.answered(ctx.message)
            if own:
                journal, ctx.turn.journal = ctx.turn.journal, None
                try:
                    await journal.write()  # type: ignore[union-attr]
                except Exception as exc:  # the record must never take the reply down with it
                    ctx.logger.error("the turn's last rows were not written: {}", exc)

    @staticmethod
    def reaches_model(msg: IncomingMessage, chat: ChatSettings, has_model: bool) -> bool:
        """Whether `dispatch` will count this message against the limits and ask a model
        (what `_dispatch` decides before `limits.admit`): the runtime counts it in the
        transaction that stores the message."""
        return path_of(msg, chat, has_model) == "model"

    async def _dispatch(self, ctx: MessageContext) -> bool:
        """Each path sets the message's fate (`ctx.turn.fate`, function_calls/fates.py)."""
        path = path_of(ctx.message, ctx.chat, ctx.model is not None)
        if path == "ignored":
            ctx.turn.fate = Fate("ignored", "respond_in_groups")
            return False
        if path == "not_addressed":
            ctx.turn.fate = Fate("not_addressed")
            return False
        if not await self._screen(ctx):
            return False
        if path == "command":
            command = split_command(ctx.message.text)
            assert command is not None  # what path_of read
            return await self._run_command(ctx, command.name, command.rest)
        if path == "no_model" or ctx.model is None:
            await ctx.reply(ctx.no_model_reply(), notice=True)
            ctx.turn.fate = Fate("declined", "no_model", told=True)
            return True
        if not await self._admit(ctx):
            return True
        # A voice message's transcript becomes its text (function_calls/voice.py).
        if (ctx.message.audio or ctx.message.transcript) and not await hear(ctx):
            ctx.turn.fate = Fate("declined", "voice", told=bool(ctx.sent))
            return True
        if ctx.message.images and not await self._take_images(ctx):
            ctx.turn.fate = Fate("declined", "image", told=True)
            return True
        # One deadline for the whole turn: the tool loop and the plain-chat fallback after it.
        deadline = asyncio.get_running_loop().time() + self.settings.function_calls.total_timeout
        try:
            visible = visible_functions(self.registry.all(), ctx)
            if visible:
                result = await self.llm.run(ctx, visible, deadline=deadline)
                if result.held is not None:  # a call waits for an approver's answer
                    ctx.turn.fate = Fate("held", f"approval {result.held}", told=True)
                    return True
                if result.text:
                    await ctx.reply(
                        result.text, thinking=result.take_thinking(), notice=result.notice
                    )
                if result.handled:
                    ctx.turn.fate = Fate("answered", ctx.model.name)
                    return True
            async with asyncio.timeout_at(deadline):
                answered = await run_chat_fallback(ctx)
            ctx.turn.fate = (
                Fate("answered", ctx.model.name)
                if answered or ctx.sent
                else Fate("ignored", "no_answer")
            )
            return answered
        except TimeoutError:
            ctx.logger.warning(
                "turn deadline of {} s reached", self.settings.function_calls.total_timeout
            )
            await ctx.reply(ctx.t("core.stop.deadline"), notice=True)
            ctx.turn.fate = Fate("failed", "TimeoutError", told=True)
            return True
        except ProviderError as exc:
            ctx.logger.error(
                "model {} failed: {}: {}",
                ctx.model.name,
                type(exc).__name__,
                exc,
            )
            await ctx.reply(user_message_for(exc, ctx.language), notice=True)
            ctx.turn.fate = Fate("failed", type(exc).__name__, told=True)
            return True

    async def _screen(self, ctx: MessageContext) -> bool:
        """Whether a message addressed to the bot may be answered: not a bot's unless the chat's
        `answer_bots` allows it, and not past the loop guard (function_calls/loop_guard.py)."""
        msg = ctx.message
        if msg.sender_is_bot and not ctx.chat.get(ANSWER_BOTS):
            ctx.turn.fate = Fate("ignored", "bot_sender")
            return False
        verdict = self.loop_guard.check(msg, ctx.turn.clock())
        if verdict == "pass":
            return True
        if verdict == "trip":
            guard = self.loop_guard.settings
            ctx.logger.warning(
                "loop guard: {} messages from {} in {} s; not answered for {} s",
                guard.messages + 1,
                msg.sender_id,
                guard.window,
                guard.cooldown,
            )
            text = ctx.t(
                "core.loop_guard",
                name=msg.display_name,
                minutes=f"{guard.cooldown / 60:g}",
                count=guard.messages + 1,
                window=f"{guard.window:g}",
            )
            await ctx.reply(text, notice=True)
        ctx.turn.fate = Fate("ignored", "loop_guard", told=verdict == "trip")
        return False

    async def _admit(self, ctx: MessageContext) -> bool:
        """The limits (limits.py): over one the message is declined (False), or a budget's
        downgrade swaps the turn's model."""
        refusal = await limits.admit(ctx)
        if isinstance(refusal, limits.Downgrade):
            await self._downgrade(ctx, refusal)
        elif refusal is not None:
            ctx.logger.info("limit {} reached", refusal.limit)
            if ctx.turn.metrics is not None:
                ctx.turn.metrics.limit_refusals.labels(refusal.limit).inc()
            if refusal.notify:
                await ctx.reply(refusal.text, notice=True)
            budget = refusal.limit.rpartition(".")[2] in limits.BUDGETS
            word = "over_budget" if budget else "limit"
            ctx.turn.fate = Fate("declined", f"{word} {refusal.limit}", told=refusal.notify)
            return False
        return True

    async def _downgrade(self, ctx: MessageContext, downgrade: limits.Downgrade) -> None:
        """Over a budget with `on_exceed: {downgrade_to}`: the turn goes on with the cheaper
        model; the chat hears it once per window."""
        model = ctx.turn.model_named(downgrade.model)
        if model is None:  # checked at start; a model removed since is a config change
            ctx.logger.error("downgrade model {!r} is not configured", downgrade.model)
            return
        ctx.logger.info(
            "limit {} reached: {} stands in for {}",
            downgrade.limit,
            model.name,
            ctx.model.name if ctx.model else None,
        )
        if ctx.turn.metrics is not None:
            ctx.turn.metrics.limit_downgrades.labels(downgrade.limit).inc()
        ctx.model = model
        if downgrade.notify:
            await ctx.reply(downgrade.text, notice=True)

    async def _take_images(self, ctx: MessageContext) -> bool:
        """Fetch the message's images for a model that sees them, or for `bot.vision_model` to
        describe them to one that does not; False when one was refused (the user was told).
        With neither, nothing is downloaded: the model gets a short "[image]" note."""
        sees = ctx.model is not None and ctx.model.capabilities.vision
        describer = None if sees else ctx.turn.vision_model
        if not sees and describer is None:
            return True
        try:
            images = await fetch_images(ctx.message.images, allow=ctx.config.bot.fetch)
        except ImageError as exc:
            ctx.logger.warning("image refused: {}", exc)
            await ctx.reply(ctx.t(exc.key, limit=MAX_BYTES // (1024 * 1024)), notice=True)
            return False
        if describer is None:
            ctx.turn.images = images
        else:
            ctx.turn.image_descriptions = await describe_images(ctx, describer, images)
        return True

    async def _run_command(self, ctx: MessageContext, name: str, rest: str) -> bool:
        spec = self.registry.get(name)
        if spec is None:
            await ctx.reply(ctx.t("core.unknown_command", name=name))
            ctx.turn.fate = Fate("declined", f"unknown_command /{name}", told=True)
            return True
        try:
            args = parse_arguments(spec, rest, ctx.language)
        except CommandSyntaxError as exc:
            await ctx.reply(str(exc))
            ctx.turn.fate = Fate("declined", f"invalid /{name}", told=True)
            return True
        ex = await self.executor.execute(ctx, name, args, source="command")
        if ex.outcome == "held":  # a member's command of an `approval` function
            approvals = ctx.service(Approvals)
            assert approvals is not None  # the executor holds a call only when there is one
            held = await approvals.request(ctx, spec, ex.arguments or {}, source="command")
            ctx.turn.fate = Fate("held", f"approval {held.id}", told=True)
            return True
        ctx.turn.fate = _command_fate(ctx, spec, ex)
        await self._command_reply(ctx, spec, ex)
        return True

    async def _command_reply(self, ctx: MessageContext, spec: Any, ex: Execution) -> None:
        """What a slash command's caller is told of its call (now, or once it was approved)."""
        name = spec.name
        if ex.outcome == "invalid":
            await ctx.reply(f"{ex.reason}\n{usage(spec, ctx.language)}")
        elif ex.outcome == "refused":
            if ex.reason:  # empty: a limit's notice already given in this window
                await ctx.reply(ex.reason)
        elif not ex.ok or ex.result is None:
            # A result the function itself marked as an error says what went wrong.
            await ctx.reply(ex.reason or ctx.t("core.command_failed", name=name))
        elif ex.result.messages or ex.result.images:
            for line, images in ex.result.replies():
                await ctx.reply(line, at=ex.result.at, images=images)
        elif ex.result.llm_content:
            await ctx.reply(ex.result.llm_content)
        else:
            await ctx.reply(ctx.t("core.command_done", name=name))

    async def resume_approval(self, ctx: MessageContext, held: Held, decision: Decision) -> None:
        """The turn of a held call, once it is decided (function_calls/approvals.py): run with
        its stored arguments, or refused with the reason; its result goes where it would have
        gone: the command's reply, or the model's loop, which goes on from where it stopped."""
        spec = self.registry.get(held.function)
        if decision == "approved" and spec is not None:
            ex = await self.executor.execute(
                ctx, held.function, held.arguments, source=held.source, approved=True
            )
        else:
            why = _refusal(ctx, held, decision, spec is None)
            ex = Execution(
                held.function,
                "refused",
                None,
                f"Refused: {why[0]}. Do not retry; tell the user.",
                reason=why[1],
            )
        if held.source == "command":
            if spec is None or ex.outcome == "refused":
                await ctx.reply(ex.reason)
                word = "gone" if spec is None else decision
                ctx.turn.fate = Fate("declined", f"approval {word} /{held.function}", told=True)
                return
            ctx.turn.fate = _command_fate(ctx, spec, ex)
            await self._command_reply(ctx, spec, ex)
            return
        await self._resume_loop(ctx, held, ex)

    async def _resume_loop(self, ctx: MessageContext, held: Held, ex: Execution) -> None:
        """The model's loop again: the history up to the asking message, what the loop had
        added then, and the held call's result (its messages sent to the chat, as the loop
        does); the model writes the answer unless the function's messages end the turn."""
        if ctx.model is None:
            ctx.turn.fate = Fate("declined", "no_model", told=False)
            return
        if ex.ok and ex.result is not None:
            for line, images in ex.result.replies():
                await ctx.reply(line, at=ex.result.at, images=images)
            if ex.result.ends_turn:
                ctx.turn.fate = Fate("function", held.function)
                return
        visible = visible_functions(self.registry.all(), ctx)
        messages = await conversation(ctx, reserve_tokens=tools_tokens(visible))
        messages += load_turn(held.turn)
        cap = self.settings.function_calls.max_result_chars
        messages.append(
            Message(
                role="tool",
                tool_call_id=held.call_id,
                name=held.function,
                content=ex.model_text[:cap],
                is_error=not ex.ok,
            )
        )
        try:
            result = await self.llm.run(ctx, visible, messages)
        except ProviderError as exc:
            ctx.logger.error("model {} failed: {}", ctx.model.name, exc)
            await ctx.reply(user_message_for(exc, ctx.language), notice=True)
            ctx.turn.fate = Fate("failed", type(exc).__name__, told=True)
            return
        if result.held is not None:
            ctx.turn.fate = Fate("held", f"approval {result.held}", told=True)
            return
        if result.text:
            await ctx.reply(result.text, thinking=result.take_thinking(), notice=result.notice)
        ctx.turn.fate = Fate("answered", ctx.model.name)


def _refusal(ctx: MessageContext, held: Held, decision: str, gone: bool) -> tuple[str, str]:
    """(for the model in English, for the chat in its language) why a held call did not run."""
    if gone:
        return (
            f"{held.function} is no longer available",
            ctx.t("core.approval.gone", function=held.function),
        )
    if decision == "expired":
        return (
            f"nobody approved {held.function} in time (approval {held.id} expired)",
            ctx.t("core.approval.expired", id=held.id, function=held.function),
        )
    why = f": {held.reason}" if held.reason else ""
    return (
        f"an approver denied {held.function} (approval {held.id}){why}",
        ctx.t("core.approval.denied_told", id=held.id, function=held.function, reason=why),
    )


def _command_fate(ctx: MessageContext, spec: Any, ex: Any) -> Fate:
    """A slash command's fate: answered by its function, or declined or failed, and why."""
    name = spec.name
    if ex.outcome == "invalid":
        return Fate("declined", f"invalid /{name}", told=True)
    if ex.outcome == "refused":
        if not ctx.chat.function_allowed(name):
            word = "disabled"
        elif refusal_reason(spec, ctx, via_command=True) is not None:
            word = "not_allowed"
        else:  # the function asked a model over a limit
            word = "limit"
        return Fate("declined", f"{word} /{name}", told=bool(ex.reason))
    if not ex.ok or ex.result is None:
        return Fate("failed", f"/{name}: {ex.outcome}", told=True)
    return Fate("function", name)
