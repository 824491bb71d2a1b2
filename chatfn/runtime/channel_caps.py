"""What a channel can do on its platform, declared once in its `ChannelSpec` (`capabilities=`).

The per-platform table in docs/channels.md is generated from these declarations
(`python -m chatfn.capabilities --write`), and tests/channels/test_capabilities.py
fails when the table and the declarations differ, so the table cannot drift from the code.
Hermes Agent publishes such a table by hand; here the channel package is the only source.

Each field says what the channel does today, not what the platform could do: `voice_in` is
true only when the channel hands a voice message on as audio the bot can transcribe.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

__all__ = ["COLUMNS", "Capabilities", "Connection"]

Connection = Literal["webhook", "long connection", "HTTP API", "local"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """One channel's row of the capability table.

    - `groups` / `dms`: group chats, one-to-one chats.
    - `mentions`: it knows when the bot is mentioned in a group (and can mention back).
    - `replies`: an answer can quote or reply to the message it answers.
    - `images_in` / `images_out`, `voice_in` / `voice_out`: media both ways.
    - `threads`: answers go into the thread a message came from.
    - `buttons`: OutgoingMessage.buttons (an approval request's Approve / Deny) are shown as the
      platform's buttons and a press comes back as the presser's message (issue 40 §2).
    - `markdown`: what formatting the platform renders the model's Markdown as ("plain" when none).
    - `edits`: a streamed answer is edited in place as it grows.
    - `delivery_ids`: the platform gives message ids, so a send is never made twice after a crash.
    - `confirm_stored`: the platform redelivers until told, and is told only once the message
      is stored.
    - `connection`: how the platform reaches the bot (a webhook on the bot's web server, a long
      connection the bot opens or accepts, the bot's own HTTP API, or local to the process).
    """

    groups: bool = False
    dms: bool = False
    mentions: bool = False
    replies: bool = False
    images_in: bool = False
    images_out: bool = False
    voice_in: bool = False
    voice_out: bool = False
    threads: bool = False
    buttons: bool = False
    markdown: str = "plain"
    edits: bool = False
    delivery_ids: bool = False
    confirm_stored: bool = False
    connection: tuple[Connection, ...] = ()

    def cells(self) -> list[str]:
        """The row's cells in `COLUMNS` order: ✓ / – for the flags, words for the rest."""
        out: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool):
                out.append("✓" if value else "–")
            elif isinstance(value, tuple):
                out.append(", ".join(value) or "–")
            else:
                out.append(str(value))
        return out


COLUMNS: tuple[str, ...] = (
    "groups",
    "DMs",
    "mentions",
    "replies",
    "images in",
    "images out",
    "voice in",
    "voice out",
    "threads",
    "buttons",
    "formatting",
    "edits",
    "delivery ids",
    "confirm once stored",
    "connection",
)
