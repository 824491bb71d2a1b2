"""The model's Markdown as a Feishu interactive card's `markdown` element (card JSON 2.0).

Why a card and not a `post`: a post's text styles are bold, italic, underline and
strikethrough only (no inline code), while the card's markdown element shows bold, italics,
strikethrough, inline code, code blocks, links, quotes and lists
(https://open.feishu.cn/document/uAjLw4CM/ukzMukzMukzM/feishu-cards/card-json-v2-components/
content-components/rich-text).

Escaping: that element also reads Feishu's own tags (`<at id=all></at>` pings everyone,
`<font>`, `<text_tag>`, `<link>`) and emoji codes (`:OK:`). The card reference says to write a
character that would be read as syntax as its HTML entity, so every such character of the
model's text is written as `&#NN;` (`*` -> `&#42;`, `<` -> `&#60;`, ...): a reply full of
`_*[]()~>#+-=|{}.!<>` shows those characters, formats nothing and mentions no one. Inside code
only what could start a tag or an entity is escaped (`<` before a letter, `/` or `!`; `&`
before an entity), so code stays readable. The bot's own mention of the user it answers is
the one `<at id=...>` written (`mention`), and only for an id of the platform's shape.

Buttons (OutgoingMessage.buttons: an approval request's Approve / Deny) are card JSON 2.0
`button` elements under the text (2.0 has no `action` block: buttons sit in `elements`),
each with a `callback` behaviour whose `value` is `press_value`'s object; the platform sends
that object back in the `card.action.trigger` callback of a click (channel.py)
(https://open.feishu.cn/document/uAjLw4CM/ukzMukzMukzM/feishu-cards/card-json-v2-components/
interactive-components/button).
"""

from __future__ import annotations

import json
import re

from chatfn.channels.markdown import (  # the shared Markdown parse, one renderer each
    Style,
    _Renderer,
)

__all__ = ["BUTTON_TEXT_LIMIT", "PRESS", "card", "mention", "press_value", "to_feishu_markdown"]

_SPECIAL = re.compile(r"[&<>*_~`#\[\]()!\-+|\\$:{}^=]")
_TAG_START = re.compile(r"<(?=[A-Za-z/!])")
_ENTITY = re.compile(r"&(?=#?\w+;)")
_OPEN_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
_SAFE_URL = re.compile(r"(?i)^(https?://|mailto:)[^\s]+$")
#: The key of a button's callback value that marks a press of one of the bot's own buttons.
PRESS = "chatfn_press"
BUTTON_TEXT_LIMIT = 100  # a button's text (plain_text), characters
#: A card's markdown kept in its buttons' values (so the card can be shown again with the
#: outcome of a click) only up to this length: an approval request is far shorter.
KEPT_MARKDOWN = 1500


def _entity(match: re.Match[str]) -> str:
    return f"&#{ord(match.group(0))};"


def _code_safe(s: str) -> str:
    return _TAG_START.sub("&#60;", _ENTITY.sub("&#38;", s))


class FeishuCardMarkdown(Style):
    strong = ("**", "**")
    em = ("*", "*")
    strike = ("~~", "~~")
    quote_prefix = "> "

    def text(self, s: str) -> str:
        return _SPECIAL.sub(_entity, s)

    def code(self, s: str) -> str:
        return "`" + _code_safe(s.replace("`", "ˋ")) + "`"

    def pre(self, s: str, lang: str) -> str:
        lang = re.sub(r"[^A-Za-z0-9_+-]", "", lang)
        return f"```{lang}\n" + _code_safe(s.replace("```", "ˋˋˋ")) + "\n```"

    def link(self, label: str, url: str) -> str:
        if not _SAFE_URL.match(url):  # javascript:, relative links: text, not a link
            shown = self.text(url)
            if not url:
                return label or self.text("[]()")
            return label if label == shown else f"{label} " + self.text(f"({url})")
        href = url.replace("(", "%28").replace(")", "%29").replace("<", "%3C").replace(">", "%3E")
        return f"[{label or self.text(url)}]({href})"


def to_feishu_markdown(text: str) -> str:
    """Markdown as the card markdown element's content (module docstring)."""
    return _Renderer(FeishuCardMarkdown()).render(text)


def mention(open_id: str) -> str:
    """The card markdown of a mention of one user (`<at id=ou_...></at>`), or "" for an id
    that is not the platform's shape (never the model's text)."""
    return f"<at id={open_id}></at> " if _OPEN_ID.match(open_id) and open_id != "all" else ""


def press_value(text: str, chat_key: str, markdown: str) -> dict[str, str]:
    """A button's callback value: the text a press sends as the presser's message, the chat
    (chatfn's key, a thread's included) it was sent to, and the card's markdown when short
    (the card shown again, with the click's outcome, when an approval is answered)."""
    value = {PRESS: text, "chat": chat_key}
    if len(markdown) <= KEPT_MARKDOWN:
        value["markdown"] = markdown
    return value


def card(
    markdown: str,
    image_keys: list[str] | None = None,
    buttons: list[tuple[str, dict[str, str]]] | None = None,
) -> str:
    """The `content` of an interactive message showing `markdown` (already rendered), then
    the uploaded images `image_keys` (card JSON 2.0 `img` elements), then `buttons` (label,
    callback value): the first one primary, as the card guidelines ask of a main action."""
    elements: list[dict[str, object]] = []
    if markdown:
        elements.append({"tag": "markdown", "content": markdown})
    for key in image_keys or []:
        elements.append({"tag": "img", "img_key": key, "alt": {"tag": "plain_text", "content": ""}})
    for index, (label, value) in enumerate(buttons or []):
        elements.append(
            {
                "tag": "button",
                "text": {"tag": "plain_text", "content": label[:BUTTON_TEXT_LIMIT]},
                "type": "primary_filled" if index == 0 else "default",
                "behaviors": [{"type": "callback", "value": value}],
            }
        )
    body = {"schema": "2.0", "body": {"elements": elements}}
    return json.dumps(body, ensure_ascii=False)
