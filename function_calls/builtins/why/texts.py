# ruff: noqa: E501  (catalogue lines stay whole)
"""The texts of the `why` built-in, in each language (its `Plugin(texts=...)`); the fates' own
words are the core's (`fate.*`: function_calls/fates.py)."""

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "help.fn.why": "What became of a message: reply to it, or alone for your last one.",
        "why.none": "I have no earlier message of yours in this chat to explain.",
        "why.not_found": "I cannot find that message among this chat's messages.",
        "why.not_yours": "Only its sender or an admin may ask about that message.",
        "why.off": "Message fates are not recorded by this bot.",
    },
    "zh": {
        "help.fn.why": "查看一条消息的结果：回复那条消息，或单独发送查看你的上一条。",
        "why.none": "这个聊天里没有你之前的消息可以解释。",
        "why.not_found": "在这个聊天的消息中找不到那条消息。",
        "why.not_yours": "只有发送者或管理员可以询问那条消息。",
        "why.off": "这个机器人没有记录消息的结果。",
    },
}
