# ruff: noqa: E501  (catalogue lines stay whole)
"""The texts of the `help` built-in, in each language (its `Plugin(texts=...)`)."""

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "help.intro": "You can ask me in plain words, or use these commands:",
        "help.intro_no_model": "These are the commands you can use:",
        "help.none": "There are no commands you can use here.",
        "help.fn.help": "What you can use here.",
    },
    "zh": {
        "help.intro": "你可以直接用自然语言问我，也可以使用这些命令：",
        "help.intro_no_model": "你可以使用这些命令：",
        "help.none": "这里没有你可以使用的命令。",
        "help.fn.help": "查看这里可以使用的功能。",
    },
}
