"""Which chats a console user may see: `admin.users.NAME.chats`, patterns of `platform:chat_id`
with `*` and `?` (`telegram:-100123*`, `onebot:group:42`). Lists are filtered in SQL by a LIKE
clause (a superset: LIKE is case-blind on SQLite) and then exactly with `fnmatchcase`, the
same matching as `chats:` rules use."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from sqlalchemy import and_, false, or_, true


def _like(glob: str) -> str:
    """A glob as a LIKE pattern with `\\` as the escape character."""
    out = []
    for ch in glob:
        if ch in "\\%_":
            out.append("\\" + ch)
        elif ch == "*":
            out.append("%")
        elif ch == "?":
            out.append("_")
        else:
            out.append(ch)
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Scope:
    """A user's chats: `patterns` None is every chat."""

    patterns: tuple[str, ...] | None = None

    @property
    def limited(self) -> bool:
        return self.patterns is not None

    def allows(self, platform: str, chat_id: str) -> bool:
        if self.patterns is None:
            return True
        key = f"{platform}:{chat_id}"
        return any(fnmatchcase(key, p) for p in self.patterns)

    def clause(self, platform: Any, chat_id: Any) -> Any:
        """A WHERE clause over two columns that keeps at least the allowed chats (check each
        row with `allows` after)."""
        if self.patterns is None:
            return true()
        parts = []
        for pattern in self.patterns:
            plat, sep, chat = pattern.partition(":")
            if not sep:  # a pattern without a platform: against the whole key
                parts.append((platform + ":" + chat_id).like(_like(pattern), escape="\\"))
                continue
            parts.append(
                and_(
                    platform.like(_like(plat), escape="\\"),
                    chat_id.like(_like(chat), escape="\\"),
                )
            )
        return or_(*parts) if parts else false()


EVERYTHING = Scope()
