# ruff: noqa: E501  (catalogue lines stay whole)
"""The texts of the `summary` built-in, in each language (its `Plugin(texts=...)`)."""

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "help.fn.summary": "Summarise this group's recent messages: /summary, /summary 2h, "
        "/summary 100, /summary today.",
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
        "summary.err.unit": "unknown unit {unit!r}; use s, m, h, d or w (e.g. 2h)",
        "summary.err.positive_window": "give a positive window, e.g. 2h",
        "summary.err.too_long": "give a window of at most 3650d, or a number of messages",
        "summary.err.unreadable": "cannot read {text!r}; use a number of messages (100), a window "
        "(30m, 2h, 1d) or 'today'",
    },
    "zh": {
        "help.fn.summary": "总结本群最近的消息：/summary、/summary 2h、/summary 100、/summary today。",
        "summary.not_done": "未总结：{reason}。",
        "summary.nothing": "{span}没有可总结的内容。",
        "summary.header": "{span}的总结，共 {count} 条消息{cut}：",
        "summary.cut": "（只用了最新的 {used} 条）",
        "summary.failed": "无法总结{span}（{why}）；最近的消息是：\n{extract}",
        "summary.no_model": "没有配置模型",
        "summary.unavailable": "模型不可用",
        "summary.span.count": "最近 {count} 条消息",
        "summary.span.today": "今天",
        "summary.span.window": "最近 {window}",
        "summary.err.positive_count": "请给出一个正数的消息条数，例如 50",
        "summary.err.unit": "未知单位 {unit!r}；请用 s、m、h、d 或 w（例如 2h）",
        "summary.err.positive_window": "请给出一个正的时间窗口，例如 2h",
        "summary.err.too_long": "时间窗口最多 3650d，或者给出消息条数",
        "summary.err.unreadable": "无法识别 {text!r}；请用消息条数（100）、时间窗口（30m、2h、1d）或 today",
    },
}
