"""The turn of a held call once it is decided (issue 40, function_calls/approvals.py): run in the
asking chat's order, like a message's turn, with the asking message's context (its sender, its
history row), and written the same way: its messages out, audit rows, usage, and the message's
fate decided again (answered, by the function, declined) in the turn's end write."""

from __future__ import annotations

import asyncio
from typing import Any

from loguru import logger

from chatfn.common.messages import OutgoingMessage
from chatfn.runtime.turn_writer import TurnWriter
from chatfn.storage.db import StorageError
from function_calls.approvals import Decision, Held


async def approved_turn(bot: Any, held: Held, decision: Decision) -> None:
    """Resume `held`'s turn with `decision` (FunctionCallRouter.resume_approval). `bot`: the
    runtime's Bot (not imported: it imports this module)."""
    msg = held.message()

    async def work() -> None:
        writer = TurnWriter(bot.storage, bot.delivery, msg.platform, msg.chat_id, None)

        async def deliver(out: OutgoingMessage) -> None:
            writer.stage(out, None)

        ctx = await bot.context(msg, deliver, stored_id=held.stored_id)
        ctx.turn.journal = writer
        fate = None
        try:
            await bot.models.ready()
            with bot.registry.pinned():
                await bot.router.resume_approval(ctx, held, decision)
            fate = bot.fate_row(ctx, held.stored_id)
        except Exception as exc:  # as a message's turn: the chat hears of it once
            ctx.logger.opt(exception=exc).error("the turn of approval {} failed", held.id)
            await ctx.reply(ctx.t("core.internal_error"), notice=True)
        finally:
            try:
                await asyncio.shield(writer.write(fate=fate))
            except StorageError as exc:
                logger.error("turn of approval {} not recorded: {}", held.id, exc)

    with logger.contextualize(chat_id=msg.chat_id, message_id=msg.message_id or "-"):
        await bot.run_in_chat_order(msg.platform, msg.chat_id, work)
