"""Where a message goes on a platform whose chats have threads, as the
chat ids every such channel uses: `private:<id>`, `group:<id>`, and `<kind>:<id>:thread:<t>`
for a thread, each thread its own conversation (its own history and turn order)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Self

from chatfn.channels.kit.incoming import chat_parts

__all__ = ["ThreadChat"]


@dataclass(frozen=True, slots=True)
class ThreadChat:
    """A chat (`target`, the platform's id of a group or a one-to-one chat) and the thread in
    it (`thread`, the platform's id of its root; None: the chat itself)."""

    is_group: bool
    target: str
    thread: str | None = None

    @property
    def key(self) -> str:
        base = f"{'group' if self.is_group else 'private'}:{self.target}"
        return f"{base}:thread:{self.thread}" if self.thread else base

    @classmethod
    def parse(
        cls,
        chat_id: str,
        ident: re.Pattern[str],
        thread: re.Pattern[str],
        platform: str,
        shapes: str,
        *,
        private_threads: bool = True,
    ) -> Self:
        """One of these chat ids back to where to send, when its ids are of the platform's
        shape (`ident`, `thread`); ValueError naming the `shapes` expected."""
        return cls(
            *chat_parts(chat_id, ident, thread, platform, shapes, private_threads=private_threads)
        )
