# ruff: noqa: E501  (catalogue lines stay whole)
"""The texts of the `welcome` built-in, in each language (its `Plugin(texts=...)`)."""

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "welcome.default": "Welcome! Send /help to see what I can do.",
    },
    "zh": {
        "welcome.default": "欢迎！发送 /help 看看我能做什么。",
    },
}
