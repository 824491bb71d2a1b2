# ruff: noqa: E501  (CJK characters count double; catalogue lines stay whole)
"""The texts of the `reminders` built-in, in each language (its `Plugin(texts=...)`)."""

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "help.fn.reminder_set": "Set a reminder: once, every day, on weekdays or on a cron "
        "schedule. E.g. /reminder_set in 10m stretch, /reminder_set tomorrow 9:00 meeting, "
        "/reminder_set every weekday 9:00 stand-up.",
        "help.fn.reminder_list": "Your active reminders (in a group: this group's), with their ids.",
        "help.fn.reminder_delete": "Delete a reminder by its id (the first characters are enough).",
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
    },
    "zh": {
        "help.fn.reminder_set": "设置提醒：一次性、每天、工作日或按 cron 计划。例如 "
        "/reminder_set 10分钟后 喝水、/reminder_set 明天 9:00 开会、/reminder_set 工作日 9:00 站会。",
        "help.fn.reminder_list": "列出你的提醒（在群里：本群的提醒）及其编号。",
        "help.fn.reminder_delete": "按编号删除提醒（输入前几位即可）。",
        "reminder.not_running": "这个机器人没有运行提醒功能（reminders.enabled 已关闭或尚未启动）。",
        "reminder.not_set": "提醒未设置：{reason}",
        "reminder.set": "⏰ 已设置提醒，时间 {when}：{text}（编号 {id}）",
        "reminder.list_empty": "这里没有进行中的提醒。用 /reminder_set 10分钟后 喝水 设置一个。",
        "reminder.list_group": "本群进行中的提醒（{count} 个）：",
        "reminder.list_private": "你进行中的提醒（{count} 个）：",
        "reminder.list_by": "（由 {name} 设置）",
        "reminder.list_in": "（在 {chat}）",
        "reminder.list_footer": "用 /reminder_delete 编号 删除（输入前几位即可）。",
        "reminder.delete_denied": "只有 {name}（设置者）或管理员可以删除提醒 {id}。",
        "reminder.deleted": "已删除提醒 {id}：{text}",
        "reminder.no_id": "请给出提醒的编号（见 /reminder_list）。",
        "reminder.no_match": "这里没有编号为 {id!r} 的提醒。用 /reminder_list 查看编号。",
        "reminder.ambiguous": "编号 {id!r} 匹配到 {count} 个提醒（{ids}），请多输入几位。",
        "reminder.max_per_user": "你已经有 {max} 个进行中的提醒，达到上限。请先删除一个"
        "（/reminder_list，然后 /reminder_delete id=...）。",
        "reminder.fire": "⏰ 提醒：{text}",
        "reminder.fire_late": "⏰ 提醒：{text}\n（晚了：原定 {due}，已过去 {late}；{why}。）{after}",
        "reminder.late_offline": "当时我不在线",
        "reminder.late_busy": "当时我太忙",
        "reminder.missed": "⏰ 错过的提醒：“{text}”原定于 {due}，当时我不在线，现已晚了 {late}。{after}",
        "reminder.next": " 下次：{when}。",
        "reminder.kind.daily": "每天 {spec}（下次 {next}）",
        "reminder.kind.weekly": "每周 {spec}（下次 {next}）",
        "reminder.kind.cron": "cron {spec}（下次 {next}）",
        "time.unreadable": "无法识别时间 {text!r}；可以写成“10分钟后”“明天 9:00”“下周五 10:00”"
        "“工作日 9:00”或“{example}”",
        "time.empty": "没有给出时间；例如“10分钟后”“明天 9:00”或“{example}”",
        "time.past": "{when} 已经过去了（现在是 {now}）；请给一个将来的时间，例如“{example}”",
        "time.too_far": "超过 5 年之后了；请选一个更近的日期，例如“{example}”",
        "time.bad_clock": "{text!r} 不是一个时刻；请写成 HH:MM，例如 09:30",
        "time.bad_date": "{text!r} 不是有效日期；请写成 YYYY-MM-DD（例如 {example}），并确认当月有这一天",
        "time.no_clock": "{text!r} 没有具体时刻；请加上，例如“{text} 09:00”",
        "time.bad_clock_range": "{text!r} 不是有效的时刻（00:00 到 23:59）",
        "time.say_when": "请说明时间：例如“10分钟后”“明天 9:00”或 at='{example}'",
        "time.cron_fields": "cron {text!r} 必须有 5 个字段：分 时 日 月 星期，例如 '0 9 * * 1-5'",
        "time.no_text": "请在时间后写上提醒内容，例如“/reminder_set 10分钟后 喝水”",
        "time.bad_weekday": "{text!r} 不是星期几；请用 周一 到 周日，或 mon 到 sun",
        "time.needs_clock": "{kind} 提醒需要一个时刻，例如 at='09:00'",
        "time.needs_weekday": "每周提醒需要指定星期几，例如 weekday='mon'",
        "time.needs_cron": "cron 提醒需要 cron='分 时 日 月 星期'，例如 cron='0 9 * * 1-5'",
        "time.bad_cron": "cron 表达式 {text!r} 有误：{error}；例如 '30 8 * * mon-fri'",
        "time.never": "{kind} 计划 {text!r} 永远不会触发；请检查日期字段（例如 30 天的月份没有 31 号）",
    },
}
