"""The way out to IRC: a reply as PRIVMSG lines, within the protocol's 512 bytes.

IRC carries one line per message and no formatting the model writes: the Markdown is made
plain (chatfn/channels/markdown.py's `to_plain`), each of its lines is sent on its own (blank
lines skipped: a PRIVMSG cannot be empty), and a line longer than a message can hold is cut
at a space (else between characters, never inside one) so that the line the server relays,
`:nick!user@host PRIVMSG <target> :<text>` with its CR LF, stays within 512 bytes. The bot's
own `nick!user@host` is read from the server's echo of its JOIN; until then the longest a
server gives (user 10, host 63 bytes) is assumed.

A group reply mentions its user as IRC clients do, `nick: ` before the first line. IRC
gives no message ids: a crash between a send and its mark sends the message again
(at least once). Images cannot be sent; an image given as a URL is sent as the URL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from chatfn.channels import kit
from chatfn.channels.irc.protocol import MAX_LINE
from chatfn.channels.irc.settings import CHANNEL, NICK, IrcSettings, irc_lower
from chatfn.channels.kit.sender import SocketSender, chat_kind
from chatfn.channels.markdown import to_plain
from chatfn.common.messages import OutgoingMessage

__all__ = ["ChatRef", "IrcSender", "lines_of", "parse_chat_id", "wrap"]

#: The longest `user@host` a server puts in a relayed prefix (USERLEN 10, HOSTLEN 63).
LONGEST_USERHOST = 10 + 1 + 63


@dataclass(frozen=True, slots=True)
class ChatRef:
    is_group: bool
    target: str  # a channel ("#chatfn") or a nick

    @property
    def key(self) -> str:
        return f"{'group' if self.is_group else 'private'}:{irc_lower(self.target)}"


def parse_chat_id(chat_id: str) -> ChatRef:
    shapes = "group:#channel or private:nick"
    return ChatRef(*chat_kind(chat_id, "an IRC chat id", shapes, private=NICK, group=CHANNEL))


def wrap(text: str, budget: int) -> list[str]:
    """`text` (one line) in pieces of at most `budget` bytes of UTF-8, cut at the last space
    that fits (else at a character boundary); the spaces cut at are dropped."""
    pieces: list[str] = []
    while len(text.encode()) > budget:
        head = text.encode()[:budget].decode("utf-8", errors="ignore")
        cut = len(head) if text[len(head)] == " " else head.rfind(" ")
        if cut > 0:
            pieces.append(head[:cut])
            text = text[cut + 1 :]
        else:
            pieces.append(head)
            text = text[len(head) :]
    if text:
        pieces.append(text)
    return pieces


def lines_of(text: str, budget: int, first: str = "", max_lines: int = 0) -> list[str]:
    """The PRIVMSG texts of a reply: its Markdown made plain, line by line, each within
    `budget` bytes; `first` (a mention) before the first; at most `max_lines` (0: all) with
    a note in the last when cut."""
    out: list[str] = []
    for raw in to_plain(text).split("\n"):
        raw = "".join(c for c in raw.rstrip() if c >= " " or c == "\t").replace("\t", "    ")
        if not raw.strip():
            continue
        if not out and first:
            raw = first + raw
        out.extend(wrap(raw, budget))
    if max_lines and len(out) > max_lines:
        out = out[: max_lines - 1] + [f"[{len(out) - max_lines + 1} more lines not sent]"]
    return out


class _Client(Protocol):
    """What the sender needs of the channel: the bot's prefix and the connection's send."""

    def prefix_bytes(self) -> int: ...

    async def privmsg(self, target: str, text: str) -> None: ...


class IrcSender(SocketSender[ChatRef], platform="irc", label="IRC"):
    """Sends OutgoingMessages through `client`, the channel (its connection of the moment)."""

    client: _Client
    cfg: IrcSettings

    parse_chat = staticmethod(parse_chat_id)

    def budget(self, ref: ChatRef) -> int:
        """Bytes of text one PRIVMSG to `ref` can carry as the server relays it."""
        overhead = self.client.prefix_bytes() + len(f" PRIVMSG {ref.target} :".encode()) + 2
        return MAX_LINE - overhead

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> Any:
        first = f"{out.at}: " if ref.is_group and out.at and NICK.match(out.at) else ""
        lines = lines_of(out.text, self.budget(ref), first, self.cfg.max_lines)
        urls = [i for i in out.images if i.startswith(("https://", "http://"))]
        lines += [u for u in urls if len(u.encode()) <= self.budget(ref)]
        owed.parts = lines
        for text in lines:
            await self.call(ref.key, lambda text=text: self.client.privmsg(ref.target, text))  # type: ignore[misc]
            owed.sent += 1
        return None
