"""Built-in reminder functions: `reminder_set`, `reminder_list`, `reminder_delete`.

Written with the public plugin API only; the scheduling lives in `service.py`. Every
confirmation comes from these functions' own results, so the model cannot claim a reminder
exists without having called `reminder_set`. Refusals are returned as content for the model
(not as an error), so it can fix the arguments or ask.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Literal
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field

from function_calls import FunctionResult, MessageContext, tool_function
from function_calls.builtins.reminders.phrases import (
    ReminderTimeError,
    future_example,
    read_leading,
)
from function_calls.builtins.reminders.service import (
    Creator,
    ReminderError,
    ReminderService,
    describe,
)

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
        description="kind=once: 'YYYY-MM-DD HH:MM' in the bot's time zone (or ISO 8601 with "
        "an offset), 'in 10m', 'tomorrow 9:00'. kind=daily/weekly: 'HH:MM'. Not used for cron.",
    )
    kind: Literal["once", "daily", "weekly", "cron"] = Field(
        default="once", description="cron for any other schedule."
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


def _not_running(ctx: MessageContext) -> FunctionResult:
    text = ctx.t("reminder.not_running")
    return FunctionResult(handled=False, llm_content=text, metadata={"refused": True})


def _refuse(ctx: MessageContext, exc: ReminderTimeError, tz: ZoneInfo) -> FunctionResult:
    """Content only: the tool loop goes back to the model, which can correct itself or ask;
    a slash-command user sees the same sentence, in the chat's language, and any example
    date in it is in the future."""
    exc.fmt.setdefault("example", future_example(datetime.now(UTC), tz))
    text = ctx.t("reminder.not_set", reason=exc.text(ctx.language))
    return FunctionResult(llm_content=text, metadata={"refused": True})


def _read_free_text(args: ReminderSetArgs, tz: ZoneInfo) -> ReminderSetArgs:
    """`/reminder_set in 10m stretch`, `/reminder_set 明天 9:00 开会`, `/reminder_set every
    weekday 9:00 stand-up`, `/reminder_set 每周一 9:00 周报`: the schedule written in front of
    the text (see `phrases.read_leading`)."""
    if args.at or args.cron:
        return args
    text = args.text.strip()
    lead = read_leading(text, datetime.now(UTC), tz)
    if lead is not None:
        if not lead.rest:
            raise ReminderTimeError("time.no_text")
        clock = (
            lead.clock.strftime("%H:%M:%S" if lead.clock.second else "%H:%M")
            if lead.clock
            else None
        )
        if lead.kind == "once" and lead.when is not None:
            return args.model_copy(
                update={"kind": "once", "at": lead.when.isoformat(), "text": lead.rest}
            )
        if lead.kind == "daily":
            return args.model_copy(update={"kind": "daily", "at": clock, "text": lead.rest})
        return args.model_copy(
            update={"kind": "weekly", "at": clock, "weekday": lead.weekday, "text": lead.rest}
        )
    if m := _DAILY.match(text):
        return args.model_copy(update={"kind": "daily", "at": m.group(1), "text": m.group(2)})
    if args.kind in ("once", "weekly") and (m := _WEEKLY.match(text)):
        days = m.group(1).lower()
        if days[:3] in ("mon", "tue", "wed", "thu", "fri", "sat", "sun"):
            return args.model_copy(
                update={"kind": "weekly", "weekday": days, "at": m.group(2), "text": m.group(3)}
            )
    return args


@tool_function(
    name="reminder_set",
    # The schedules (kind, at, weekday, cron) are described once, on the fields.
    description="Set a reminder, posted in this chat with a mention of the user. For absolute "
    "times use the current time and time zone noted on the newest message.",
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
        return _not_running(ctx)
    msg = ctx.message
    try:
        args = _read_free_text(args, service.tz)
        schedule = service.schedule(args.kind, args.at, args.weekday, args.cron)
        row = await service.create(
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
    except ReminderTimeError as exc:  # ReminderError is one too
        return _refuse(ctx, exc, service.tz)
    when = describe(row, language=ctx.language)
    text = ctx.t("reminder.set", when=when, text=row.text, id=row.short_id)
    return FunctionResult(
        messages=[text],
        at=msg.sender_id if msg.is_group else None,
        llm_content=f"Reminder {row.short_id} set; the user saw: {text}",
        metadata={"id": row.id},
    )


@tool_function(
    name="reminder_list",
    description="List the active reminders with their ids (in a group: this group's; in "
    "private: the user's own).",
    examples=["/reminder_list", "what reminders do I have?"],
)
async def reminder_list(ctx: MessageContext) -> FunctionResult:
    service = _service(ctx)
    if service is None:
        return _not_running(ctx)
    msg = ctx.message
    rows = await service.visible_to(msg.platform, msg.chat_id, msg.is_group, msg.sender_id)
    if not rows:
        text = ctx.t("reminder.list_empty")
        return FunctionResult(messages=[text], llm_content=text)
    header = "reminder.list_group" if msg.is_group else "reminder.list_private"
    lines = [ctx.t(header, count=len(rows))]
    for row in rows:
        if msg.is_group:
            by = ctx.t("reminder.list_by", name=row.creator_name or row.creator_id)
        else:
            by = (
                ctx.t("reminder.list_in", chat=row.chat_name or row.chat_id) if row.is_group else ""
            )
        when = describe(row, service.tz, ctx.language)
        lines.append(f"• {row.short_id} — {when} — {row.text}{by}")
    lines.append(ctx.t("reminder.list_footer"))
    text = "\n".join(lines)
    return FunctionResult(messages=[text], llm_content=text)


@tool_function(
    name="reminder_delete",
    # Where the id comes from, and that a prefix will do, is said once, on the field.
    description="Delete an active reminder. Only the person who set it, or an admin, may.",
    examples=["/reminder_delete 3f2a9c1b", "/reminder_delete id=3f2a"],
)
async def reminder_delete(ctx: MessageContext, args: ReminderDeleteArgs) -> FunctionResult:
    service = _service(ctx)
    if service is None:
        return _not_running(ctx)
    msg = ctx.message
    try:
        visible = await service.visible_to(msg.platform, msg.chat_id, msg.is_group, msg.sender_id)
        row = service.resolve(args.id, visible)
    except ReminderError as exc:
        return FunctionResult(llm_content=exc.text(ctx.language), metadata={"refused": True})
    if row.creator_id != msg.sender_id and not ctx.is_admin:
        text = ctx.t(
            "reminder.delete_denied", name=row.creator_name or row.creator_id, id=row.short_id
        )
        return FunctionResult(messages=[text], llm_content=text, metadata={"refused": True})
    await service.delete(row)
    text = ctx.t("reminder.deleted", id=row.short_id, text=row.text)
    return FunctionResult(messages=[text], llm_content=text, metadata={"id": row.id})
