"""English catalogue (the reference: every key of every other language must exist here)."""

MESSAGES: dict[str, str] = {
    # -- core notices ------------------------------------------------------------------------
    "core.outage": "Sorry, {why}. Your message is saved; please try again in a moment.",
    "core.outage.timeout": "the model took too long to answer",
    "core.outage.rate_limited": "the model is rate-limited right now",
    "core.outage.auth": "the model rejected the API key (check the bot's config)",
    "core.outage.bad_request": "the model refused this request (the bot's log says why)",
    "core.outage.unavailable": "the model is not available right now",
    "core.no_model": "No model is configured, so I can only run slash commands (try /help). Set "
    "OPENAI_API_KEY (and OPENAI_BASE_URL / CHATFN_MODEL) or add a `models:` entry to "
    "config.yaml.",
    "core.unknown_command": "Unknown command /{name}. Send /help to see what you can use.",
    "core.command_failed": "/{name} failed. The error was logged.",
    "core.command_done": "/{name}: done.",
    "core.internal_error": "Sorry, something went wrong on my side. The error was logged.",
    "core.usage": "Usage: {line}",
    "core.usage_or_text": "(or /{name} <{field}>)",
    "core.bad_json": "the JSON after /{name} is invalid: {error}",
    "core.json_not_object": "the JSON must be an object",
    "core.stop.repeat": "I stopped because the same step kept repeating.",
    "core.stop.max_rounds": "I stopped because this needed too many steps.",
    "core.stop.max_calls": "I stopped because this needed too many function calls.",
    "core.stop.deadline": "That took too long, so I stopped.",
    "core.refused.disabled": "{name} is disabled in this chat",
    "core.refused.group_only": "{name} only works in group chats",
    "core.refused.private_only": "{name} only works in private chats",
    "core.refused.admin_only": "{name} is for admins only",
    "core.refused.needs_at": "{name} needs the bot to be @-mentioned",
    "core.refused.gone": "{name} is no longer available",
    # -- images ------------------------------------------------------------------------------
    "image.note": "[image]",
    "image.described": "[image: {description}]",
    "image.too_big": "That image is too large (more than {limit} MB); I cannot look at it.",
    "image.not_image": "That file is not an image I can read (PNG, JPEG, GIF or WebP).",
    "image.failed": "I could not download that image.",
    # -- help --------------------------------------------------------------------------------
    "help.intro": "You can ask me in plain words, or use these commands:",
    "help.intro_no_model": "These are the commands you can use:",
    "help.none": "There are no commands you can use here.",
    "help.fn.help": "What you can use here.",
    "help.fn.reminder_set": "Set a reminder: once, every day, on weekdays or on a cron "
    "schedule. E.g. /reminder_set in 10m stretch, /reminder_set tomorrow 9:00 meeting, "
    "/reminder_set every weekday 9:00 stand-up.",
    "help.fn.reminder_list": "Your active reminders (in a group: this group's), with their ids.",
    "help.fn.reminder_delete": "Delete a reminder by its id (the first characters are enough).",
    "help.fn.summary": "Summarise this group's recent messages: /summary, /summary 2h, "
    "/summary 100, /summary today.",
    "help.fn.web_search": "Search the web and answer with source links.",
    # -- reminders ---------------------------------------------------------------------------
    "reminder.not_running": "Reminders are not running on this bot (reminders.enabled is off "
    "or it has not started).",
    "reminder.not_set": "Reminder not set: {reason}",
    "reminder.set": "⏰ Reminder set for {when}: {text} (id {id})",
    "reminder.list_empty": "No active reminders here. Set one with /reminder_set in 10m stretch.",
    "reminder.list_group": "Active reminders for this group ({count}):",
    "reminder.list_private": "Active reminders for you ({count}):",
    "reminder.list_by": " (by {name})",
    "reminder.list_in": " (in {chat})",
    "reminder.list_footer": "Delete one with /reminder_delete ID (the first characters are "
    "enough).",
    "reminder.delete_denied": "Only {name} (who set it) or an admin can delete reminder {id}.",
    "reminder.deleted": "Deleted reminder {id}: {text}",
    "reminder.no_id": "Give the reminder's id (see /reminder_list).",
    "reminder.no_match": "No active reminder with id {id!r} here. Use /reminder_list to see "
    "the ids.",
    "reminder.ambiguous": "Id {id!r} matches {count} reminders ({ids}); give more characters.",
    "reminder.max_per_user": "You already have {max} active reminders, the maximum. Delete one "
    "first (/reminder_list, then /reminder_delete id=...).",
    "reminder.fire": "⏰ Reminder: {text}",
    "reminder.fire_late": "⏰ Reminder: {text}\n(Late: it was due {due}, {late} ago; {why}.)"
    "{after}",
    "reminder.late_offline": "I was offline then",
    "reminder.late_busy": "I was busy",
    "reminder.missed": "⏰ Missed reminder: “{text}” was due {due}, while I was offline, and is "
    "now {late} late.{after}",
    "reminder.next": " Next: {when}.",
    "reminder.kind.daily": "daily {spec} (next {next})",
    "reminder.kind.weekly": "weekly on {spec} (next {next})",
    "reminder.kind.cron": "cron {spec} (next {next})",
    # times (refusals name a future example, built from the current date)
    "time.unreadable": "cannot read the time {text!r}; write e.g. 'in 10m', 'tomorrow 9:00', "
    "'next friday 10am', 'every weekday 9:00' or '{example}'",
    "time.empty": "no time given; e.g. 'in 10m', 'tomorrow 9:00' or '{example}'",
    "time.past": "{when} is in the past (now it is {now}); give a future time such as '{example}'",
    "time.too_far": "that is more than 5 years ahead; pick a nearer date such as '{example}'",
    "time.bad_clock": "{text!r} is not a time of day; write it as HH:MM, e.g. 09:30",
    "time.bad_date": "{text!r} is not a real date; write YYYY-MM-DD (e.g. {example}) and check "
    "the day exists in that month",
    "time.no_clock": "{text!r} has no time of day; add one, e.g. '{text} 09:00'",
    "time.bad_clock_range": "{text!r} is not a valid time of day (00:00 to 23:59)",
    "time.say_when": "say when: at='in 10m', at='tomorrow 9:00' or at='{example}'",
    "time.cron_fields": "cron {text!r} must have 5 fields: minute hour day month weekday, "
    "e.g. '0 9 * * 1-5'",
    "time.no_text": "say what to remind about after the time, e.g. '/reminder_set in 10m stretch'",
    "time.bad_weekday": "{text!r} is not a weekday; use mon, tue, wed, thu, fri, sat or sun",
    "time.needs_clock": "a {kind} reminder needs a time of day, e.g. at='09:00'",
    "time.needs_weekday": "a weekly reminder needs a weekday, e.g. weekday='mon'",
    "time.needs_cron": "a cron reminder needs cron='MIN HOUR DAY MONTH WEEKDAY', e.g. "
    "cron='0 9 * * 1-5'",
    "time.bad_cron": "bad cron expression {text!r}: {error}; e.g. '30 8 * * mon-fri'",
    "time.never": "the {kind} schedule {text!r} never fires; check the date fields (e.g. 31 in "
    "a 30-day month)",
    # -- summary -----------------------------------------------------------------------------
    "summary.not_done": "Not summarised: {reason}.",
    "summary.nothing": "Nothing to summarise in {span}.",
    "summary.header": "Summary of {span}, {count} messages{cut}:",
    "summary.cut": " (only the newest {used} fit)",
    "summary.failed": "I could not summarise {span} ({why}); the last messages were:\n{extract}",
    "summary.no_model": "no model is configured",
    "summary.unavailable": "the model is not available",
    "summary.span.count": "the last {count} messages",
    "summary.span.today": "today",
    "summary.span.window": "the last {window}",
    "summary.err.positive_count": "give a positive number of messages, e.g. 50",
    "summary.err.unit": "unknown unit {unit!r}; use m, h or d (e.g. 2h)",
    "summary.err.positive_window": "give a positive window, e.g. 2h",
    "summary.err.too_long": "give a window of at most 3650d, or a number of messages",
    "summary.err.unreadable": "cannot read {text!r}; use a number of messages (100), a window "
    "(30m, 2h, 1d) or 'today'",
    # -- web search --------------------------------------------------------------------------
    "web_search.not_enabled_group": "web search is not enabled for this group (ask an admin to "
    "add it to web_search config)",
    "web_search.not_enabled_user": "web search is not enabled for you (ask an admin to add it "
    "to web_search config)",
    "web_search.not_configured": "Web search is not configured on this bot.",
    "web_search.failed": "Web search failed: {error}. Tell the user, or answer from what you "
    "know and say it was not checked.",
    # -- welcome -----------------------------------------------------------------------------
    "welcome.default": "Welcome! Send /help to see what I can do.",
    # -- the web chat page (served with the page; `{x}` placeholders filled in the browser) ---
    "web.you": "You",
    "web.private": "Private",
    "web.group": "Group",
    "web.token": "Token",
    "web.token_placeholder": "if required",
    "web.live": "live",
    "web.offline": "offline",
    "web.placeholder": "Message (Enter to send, Shift+Enter for a new line). Try /help",
    "web.send": "Send",
    "web.attach": "Attach an image",
    "web.remove_image": "Remove",
    "web.where_group": 'In group "{group}" as {speaker}',
    "web.where_at": ", mentioning the bot",
    "web.where_no_at": ", not mentioning the bot (stored, not answered)",
    "web.where_private": "Private chat as {speaker}",
    "web.in_group": "{speaker} in {group}",
    "web.silent": "Stored; the bot was not mentioned, so it stays silent.",
    "web.no_reply": "No reply.",
    "web.connection_problem": "Connection problem: {error}",
    "web.image_too_big": "That image is larger than {limit} MB.",
}
