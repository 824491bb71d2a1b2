"""A long reply cut into parts whose rendered form fits a platform's limits (characters shown,
bytes of an event), where the rendering (HTML, escaping, multi-byte characters) is what is
measured but too dear to measure at every candidate cut: the Markdown is cut by its own length
first (cheap), each part rendered once and, only if it is still too big, cut again at a
proportionally smaller length. A 100 000-character reply costs a few renders, not one per
candidate cut."""

from __future__ import annotations

from collections.abc import Callable

from chatfn.channels.split import split_message

__all__ = ["fitted_parts"]


def fitted_parts(text: str, limit: int, over: Callable[[str], float], depth: int = 8) -> list[str]:
    """`text` in parts of at most `limit` characters whose `over(part)` (the rendered size
    over the platform's limit: at most 1 fits) fits; cut again at most `depth` times."""

    def fit(part: str, level: int) -> list[str]:
        ratio = over(part)
        if ratio <= 1 or level >= depth:
            return [part]
        smaller = max(50, int(len(part) / ratio * 0.9))
        return [done for sub in split_message(part, smaller) for done in fit(sub, level + 1)]

    return [done for part in split_message(text, limit) for done in fit(part, 0)]
