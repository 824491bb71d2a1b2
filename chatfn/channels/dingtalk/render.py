"""The model's Markdown as DingTalk's robot Markdown (`sampleMarkdown`'s text, a session
webhook's `markdown.text`).

DingTalk renders a subset of Markdown (https://open.dingtalk.com/document/orgapp/robot-
message-types-and-data-format, "markdown"): headings `#`-`######`, quotes `>`, **bold**,
*italics*, links `[label](url)`, images `![](url)`, ordered and unordered lists, and, in
current clients, `code` and fenced code blocks. There is no strikethrough (shown as plain
text) and no escape character, so text is written as it is; a table becomes an aligned code
block (the shared renderer's choice).
"""

from __future__ import annotations

import re

from chatfn.channels.markdown import Style, _Renderer

__all__ = ["title_of", "to_dingtalk_markdown"]


class DingTalkMarkdown(Style):
    strong = ("**", "**")
    em = ("*", "*")
    quote_prefix = "> "
    bullet = "-"

    def code(self, s: str) -> str:
        quoted = s.replace("`", "'")
        return f"`{quoted}`"

    def pre(self, s: str, lang: str) -> str:
        lang = re.sub(r"[^A-Za-z0-9_+-]", "", lang)
        return f"```{lang}\n" + s.replace("```", "'''") + "\n```"

    def link(self, label: str, url: str) -> str:
        return f"[{label}]({url})" if label and label != url else url

    def heading(self, inner: str, level: int) -> str:
        return f"{'#' * min(max(level, 1), 6)} {inner}" if inner else inner

    def rule(self) -> str:
        return "---"


def to_dingtalk_markdown(text: str) -> str:
    return _Renderer(DingTalkMarkdown()).render(text)


def title_of(markdown: str) -> str:
    """The message's title (what the chat list and notifications show): its first words."""
    first = next((line for line in markdown.splitlines() if line.strip()), "")
    plain = re.sub(r"[#>*`\[\]()!_-]+", " ", first)
    plain = " ".join(plain.split())
    return (plain[:30] or "message").strip()
