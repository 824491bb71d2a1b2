"""Who a program calling the bot's functions is (an MCP client of `/mcp` or `chatfn mcp`): an
identity in a chat, with the function names it may see at all.

A plugin says it with `@plugin.program_caller` from its own settings section (the mcp built-in:
`mcp.expose`); the runtime (chatfn/runtime/exposure.py) asks every loaded plugin and, when none
answers, uses `ProgramCaller()`. The core reads no plugin's section by name.
"""

from __future__ import annotations

import fnmatch
import itertools
from dataclasses import dataclass

from chatfn.common.messages import IncomingMessage

__all__ = ["ProgramCaller"]

_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class ProgramCaller:
    """Who calls, where, and which function names they may see at all (glob patterns; an empty
    `include` means every function). `setting`: the config key the identity comes from, named
    in the audit row of a call it hides."""

    user_id: str = "mcp-client"
    chat_id: str = "mcp"
    admin: bool = False
    platform: str = "mcp"
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    setting: str = ""

    def may_see(self, name: str) -> bool:
        if self.include and not any(fnmatch.fnmatchcase(name, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(name, p) for p in self.exclude)

    def message(self) -> IncomingMessage:
        return IncomingMessage(
            platform=self.platform,
            chat_id=self.chat_id,
            sender_id=self.user_id,
            sender_name=self.user_id,
            text="",
            is_at_bot=True,
            message_id=f"{self.platform}-{next(_ids)}",
            admin_override=self.admin,
        )
