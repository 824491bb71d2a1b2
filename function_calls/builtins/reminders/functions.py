"""Built-in reminder functions: `reminder_set`, `reminder_list`, `reminder_delete`.

Written with the public plugin API only; the scheduling lives in `service.py`. Every
confirmation comes from these functions' own results, so the model cannot claim a reminder
exists without having called `reminder_set`. Refusals are returned as content for the model
(not as an error), so it can fix the arguments or ask.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from function_calls import FunctionResult, MessageContext, tool_function
from function_calls.builtins.reminders.service import (
    Creator,
    ReminderError,
    ReminderService,
    describe,
)
from function_calls.builtins.reminders.times import ReminderTimeError, split_leading_time

_DAILY = re.compile(
    r"^(?:daily|every\s+day)\s+(?:at\s+)?(\d{1,2}(?::\d{2}){0,2}\s*(?:am|pm)?)"
    r"\s+(.+)$",
    re.I | re.S,
)
_WEEKLY = re.compile(
    r"^(?:weekly\s+(?:on\s+)?|every\s+)([a-z]+(?:[,-][a-z]+)*)\s+(?:at\s+)?"
    r"(\d{1,2}(?::\d{2}){0,2}\s*(?:am|pm)?)\s+(.+)$",
    re.I | re.S,
)


class ReminderSetArgs(BaseModel):
    text: str = Field(
        min_length=1,
        max_length=1000,
        description="What to remind about, worded for the person reminded.",
    )
    at: str | None = Field(
        default=None,
        description="When. kind=once: 'YYYY-MM-DD HH:MM' in the bot's time zone (or ISO 8601 "
        "with an offset), 'in 10m', 'tomorrow 9:00'. kind=daily/weekly: 'HH:MM'. "
        "Not used for kind=cron.",
    )
    kind: Literal["once", "daily", "weekly", "cron"] = Field(
        default="once", description="once, daily, weekly, or cron for anything else."
    )
    weekday: str | None = Field(
        default=None, description="kind=weekly only: mon..sun; several as 'mon,wed' or 'mon-fri'."
    )
    cron: str | None = Field(
        default=None,
        description="kind=cron only: 'MIN HOUR DAY MONTH WEEKDAY', e.g. "
        "'0 9 * * 1-5' for 09:00 on weekdays.",
    )


class ReminderDeleteArgs(BaseModel):
    id: str = Field(
        min_length=1,
        max_length=64,
        description="The reminder id from reminder_list; a unique prefix is enough.",
    )


def _service(ctx: MessageContext) -> ReminderService | None:
    return ctx.service(ReminderService)


def _not_running() -> FunctionResult:
    text = "Reminders are not running on this bot (reminders.enabled is off or it has not started)."
    return FunctionResult(handled=False, llm_content=text, metadata={"refused": True})


def _refuse(text: str) -> FunctionResult:
    """Content only: the tool loop goes back to the model, which can correct itself or ask;
    a slash-command user sees the same sentence."""
    return FunctionResult(llm_content=f"Reminder not set: {text}", metadata={"refused": True})


def _read_free_text(args: ReminderSetArgs) -> ReminderSetArgs:
    """`/reminder_set in 10m stretch`, `/reminder_set daily 9:00 stand-up`,
    `/reminder_set every mon 9:00 report`: the schedule written in front of the text."""
    if args.at or args.cron:
        return args
    text = args.text.strip()
    if m := _DAILY.match(text):
        return args.model_copy(update={"kind": "daily", "at": m.group(1), "text": m.group(2)})
    if args.kind in ("once", "weekly") and (m := _WEEKLY.match(text)):
        days = m.group(1).lower()
        if days[:3] in ("mon", "tue", "wed", "thu", "fri", "sat", "sun"):
            return args.model_copy(
                update={"kind": "weekly", "weekday": days, "at": m.group(2), "text": m.group(3)}
            )
    when, rest = split_leading_time(text)
    if when and rest:
        return args.model_copy(update={"at": when, "text": rest})
    return args


@tool_function(
    name="reminder_set",
    description="Set a reminder in this chat: once at a date and time, daily or weekly at a time, "
    "or on a cron schedule. The reminder is posted here and mentions the user. Use "
    "the current time and time zone noted on the newest message for absolute times.",
    examples=[
        '/reminder_set at="tomorrow 9:00" text="stand-up"',
        "/reminder_set in 10m stretch",
        "/reminder_set daily 08:30 take the pills",
        "remind me every Monday at 9 to send the report",
    ],
)
async def reminder_set(ctx: MessageContext, args: ReminderSetArgs) -> FunctionResult:
    service = _service(ctx)
    if service is None:
        return _not_running()
    args = _read_free_text(args)
    msg = ctx.message
    try:
        schedule = service.schedule(args.kind, args.at, args.weekday, args.cron)
        row = service.create(
            Creator(
                platform=msg.platform,
                chat_id=msg.chat_id,
                chat_name=msg.chat_name,
                is_group=msg.is_group,
                user_id=msg.sender_id,
                user_name=msg.display_name,
            ),
            args.text.strip(),
            schedule,
        )
    except (ReminderTimeError, ReminderError) as exc:
        return _refuse(str(exc))
    text = f"⏰ Reminder set for {describe(row)}: {row.text} (id {row.short_id})"
    return FunctionResult(
        messages=[text],
        at=msg.sender_id if msg.is_group else None,
        llm_content=f"Reminder {row.short_id} set; the user saw: {text}",
        metadata={"id": row.id},
    )


@tool_function(
    name="reminder_list",
    description="List the active reminders (in a group: this group's; in private: the user's "
    "own), with the ids reminder_delete accepts.",
    examples=["/reminder_list", "what reminders do I have?"],
)
async def reminder_list(ctx: MessageContext) -> FunctionResult:
    service = _service(ctx)
    if service is None:
        return _not_running()
    msg = ctx.message
    rows = service.visible_to(msg.platform, msg.chat_id, msg.is_group, msg.sender_id)
    if not rows:
        text = "No active reminders here. Set one with /reminder_set in 10m stretch."
        return FunctionResult(messages=[text], llm_content=text)
    where = "this group" if msg.is_group else "you"
    lines = [f"Active reminders for {where} ({len(rows)}):"]
    for row in rows:
        if msg.is_group:
            by = f" (by {row.creator_name or row.creator_id})"
        else:
            by = f" (in {row.chat_name or row.chat_id})" if row.is_group else ""
        lines.append(f"• {row.short_id} — {describe(row, service.tz)} — {row.text}{by}")
    lines.append("Delete one with /reminder_delete ID (the first characters are enough).")
    text = "\n".join(lines)
    return FunctionResult(messages=[text], llm_content=text)


@tool_function(
    name="reminder_delete",
    description="Delete an active reminder by its id from reminder_list (a unique prefix is "
    "enough). Only the person who set it, or an admin, may delete it.",
    examples=["/reminder_delete 3f2a9c1b", "/reminder_delete id=3f2a"],
)
async def reminder_delete(ctx: MessageContext, args: ReminderDeleteArgs) -> FunctionResult:
    service = _service(ctx)
    if service is None:
        return _not_running()
    msg = ctx.message
    try:
        row = service.resolve(
            args.id, service.visible_to(msg.platform, msg.chat_id, msg.is_group, msg.sender_id)
        )
    except ReminderError as exc:
        return FunctionResult(llm_content=str(exc), metadata={"refused": True})
    if row.creator_id != msg.sender_id and not ctx.is_admin:
        text = (
            f"Only {row.creator_name or row.creator_id} (who set it) or an admin can delete "
            f"reminder {row.short_id}."
        )
        return FunctionResult(messages=[text], llm_content=text, metadata={"refused": True})
    service.delete(row)
    text = f"Deleted reminder {row.short_id}: {row.text}"
    return FunctionResult(messages=[text], llm_content=text, metadata={"id": row.id})
