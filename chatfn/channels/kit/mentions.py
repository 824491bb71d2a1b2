"""A message's mentions read the one way, on every platform that marks them in the text.

Such a platform writes a mention as markup naming its kind (a user, a role, a channel) and an
id. What the bot reads of it is the same everywhere: the bot's own mention is taken out (and
noted: the message addresses the bot), any other is shown as a reader sees it ("@name",
"#channel"), and the runs of spaces a removal leaves are folded. What is the platform's own:
its markup, which of its kinds name a user, and the names it knows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

__all__ = ["folded", "read_mentions", "remove_once", "starts_with_word"]

_SPACES = re.compile(r"[ \t]{2,}")


def folded(text: str) -> str:
    """`text` with each run of spaces and tabs one space, and no white space at its ends."""
    return _SPACES.sub(" ", text).strip()


def read_mentions(
    text: str,
    markup: re.Pattern[str],
    bot_id: str,
    shown: Callable[[str, str], str | None],
    users: Collection[str] = ("",),
    fold: bool = True,
) -> tuple[str, bool]:
    """(`text` as the bot reads it, whether it mentions the bot). `markup`'s groups are a
    mention's kind and its id (with one group, the id alone: the kind is ""); a mention of
    one of the kinds `users` whose id is `bot_id` (none when it is "") is the bot's and
    removed, any other is `shown(kind, id)` (None: kept as written). `fold`: the result
    `folded` (False: the caller folds it after reading the rest of its markup)."""
    mentioned = False

    def one(match: re.Match[str]) -> str:
        nonlocal mentioned
        kind, ident = (match[1], match[2]) if markup.groups > 1 else ("", match[1])
        if bot_id and kind in users and ident == bot_id:
            mentioned = True
            return ""
        said = shown(kind, ident)
        return match.group(0) if said is None else said

    read = markup.sub(one, text)
    return (folded(read) if fold else read), mentioned


def remove_once(text: str, word: str) -> tuple[str, bool]:
    """`text` without the first `word` in it (the bot's name a client wrote), and whether it
    was there; `text` as it is for an empty `word`."""
    if not word:
        return text, False
    at = text.find(word)
    if at < 0:
        return text, False
    return text[:at] + text[at + len(word) :], True


def starts_with_word(text: str, word: str) -> bool:
    """`text` begins with the word `word` ("Helper: hi", not "Helpers are")."""
    stripped = text.lstrip()
    if not word or not stripped.startswith(word):
        return False
    rest = stripped[len(word) :]
    return not rest or not (rest[0].isalnum() or rest[0] == "_")
