"""Who is asking, where: the part of a `MessageContext` that permission rules read.

A module of its own so that `spec` (which holds the rules a function declares) and
`permissions` (which applies them) can both name it without importing each other.
"""

from __future__ import annotations

from typing import Protocol

from chatfn.common.config import CoreSettings
from chatfn.common.messages import IncomingMessage
from function_calls.chat_settings import ChatSettings

__all__ = ["Caller"]


class Caller(Protocol):
    """Who is asking, where: the part of a MessageContext the rules read."""

    @property
    def message(self) -> IncomingMessage: ...

    @property
    def is_admin(self) -> bool: ...

    @property
    def config(self) -> CoreSettings: ...

    @property
    def chat(self) -> ChatSettings:
        """This chat's effective settings (`function_calls` lists and the `chats:` rules)."""
        ...

    def t(self, key: str, /, **fmt: object) -> str:
        """The catalogue text of `key` in this chat's language: a rule's refusal."""
        ...
