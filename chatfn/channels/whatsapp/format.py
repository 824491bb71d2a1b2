"""The model's Markdown as WhatsApp formats a message's text (https://faq.whatsapp.com/
539178204879377): *bold*, _italic_, ~strikethrough~, `inline code`, ```monospace``` blocks,
"> " quotes, "- " lists. WhatsApp has no escape and no link markup: a link is its label and
its URL (WhatsApp makes the URL a link)."""

from __future__ import annotations

from chatfn.channels.markdown import Style, _Renderer

__all__ = ["to_whatsapp"]


class WhatsAppStyle(Style):
    strong = ("*", "*")
    em = ("_", "_")
    strike = ("~", "~")
    bullet = "-"
    quote_prefix = "> "

    def code(self, s: str) -> str:
        return "`" + s.replace("`", "'") + "`"

    def pre(self, s: str, lang: str) -> str:
        return "```" + s.replace("```", "'''") + "```"


def to_whatsapp(text: str) -> str:
    return _Renderer(WhatsAppStyle()).render(text)
