"""The IRC channel: a bot on one IRC network, in the channels it joins and in private
messages (queries), on asyncio streams (protocol.py).

- connect: the connection (TLS by default), then registration: with `sasl` the IRCv3 CAP
  negotiation and SASL PLAIN, else `PASS` when a password is set, then NICK and USER until
  the server's welcome (001). A nick in use (433) is tried again with `_` after it; a
  password refused (464, or SASL's 904) is CredentialsRefused naming the key;
- serve: JOIN the configured channels (again after a KICK, and on every reconnect), answer
  PING, read PRIVMSG: a channel's message is the chat `group:#channel`, a query
  `private:<nick>`; `nick: ` / `nick, ` before a channel message (or the nick in it) is a
  mention. NOTICEs are never answered (RFC 2812 section 3.3.2). Channel operators (`@`, `&`,
  `~`) are the group's admins (from NAMES and MODE). Someone's JOIN is the kit's member-joined.
  A lost connection: reconnect with backoff, rejoin;
- out: send.py (the 512-byte lines, the mention, the pace of flood control).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
from typing import Any

from chatfn.channels import kit
from chatfn.channels.irc.protocol import Connection, Message
from chatfn.channels.irc.send import LONGEST_USERHOST, IrcSender
from chatfn.channels.irc.settings import IrcSettings, irc_lower
from chatfn.common.messages import IncomingMessage
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["IrcChannel"]

_NETWORK = (OSError, TimeoutError, ConnectionError)
#: NAMES prefixes of a channel's operators (owner ~, admin &, op @) and what the kit calls them.
_ROLE = {"~": "owner", "&": "admin", "@": "admin"}
_PREFIXES = "~&@%+"
#: Numerics: welcome, nick in use, erroneous nick, password mismatch, banned, SASL.
_NICK_IN_USE, _ERRONEOUS_NICK, _PASSWD_MISMATCH, _BANNED = "433", "432", "464", "465"
_SASL_OK, _SASL_FAIL = ("903",), ("902", "904", "905", "906", "908")
#: An ERROR before the welcome that refuses the password (servers that send no 464).
_REFUSED = re.compile(r"password|access denied|authenticat", re.IGNORECASE)
_CANNOT_JOIN = {"471": "full", "473": "invite only", "474": "banned", "475": "key wrong"}


class IrcChannel(kit.SessionChannel[IrcSettings], platform="irc", label="IRC"):
    skip_stored = False  # IRC gives no message ids

    def __init__(self, host: ChannelHost, settings: IrcSettings) -> None:
        super().__init__(host, settings)
        self.conn: Connection | None = None
        self.nick = settings.nick
        self.userhost = ""  # the bot's user@host as the server relays it (its JOIN echo)
        self.joined: set[str] = set()
        self.ops: dict[str, dict[str, str]] = {}  # channel -> lower nick -> role
        self.sender = IrcSender(self, settings, self.policy)
        self._joining: set[str] = set()
        self._all_joined = asyncio.Event()

    # -- what the sender asks --------------------------------------------------------------
    def prefix_bytes(self) -> int:
        userhost = self.userhost or "x" * LONGEST_USERHOST
        return len(f":{self.nick}!{userhost}".encode())

    async def privmsg(self, target: str, text: str) -> None:
        conn = self.conn
        if conn is None or conn.closed:
            raise kit.Unreachable("the IRC channel is not connected")
        await conn.send("PRIVMSG", target, text)

    # -- connect ---------------------------------------------------------------------------
    async def connect(self) -> str:
        cfg = self.cfg
        where = f"{cfg.server}:{cfg.port}{' (TLS)' if cfg.tls else ''}"
        try:
            conn = await Connection.open(
                cfg.server,
                cfg.port,
                tls=cfg.tls,
                timeout=cfg.connect_timeout,
                rate=cfg.flood_rate,
                burst=cfg.flood_burst,
            )
        except _NETWORK as exc:
            raise kit.Unreachable(f"IRC server not reachable at {where} ({exc!r})") from None
        try:
            async with asyncio.timeout(cfg.connect_timeout):
                await self._register(conn)
        except BaseException as exc:
            await conn.close()
            if isinstance(exc, TimeoutError):
                raise kit.Unreachable(f"IRC server at {where} did not welcome the bot") from None
            if isinstance(exc, ConnectionError | OSError):
                raise kit.Unreachable(f"IRC server at {where}: {exc!r}") from None
            raise
        self.conn = conn
        return f"{self.nick} on {where}"

    async def _register(self, conn: Connection) -> None:
        cfg = self.cfg
        password = cfg.secret_text("password")
        if cfg.sasl:
            await conn.send("CAP", "LS", "302", paced=False)
        elif password:
            await conn.send("PASS", password, paced=False)
        self.nick = cfg.nick
        await conn.send("NICK", self.nick, paced=False)
        await conn.send("USER", cfg.account(), "0", "*", cfg.realname, paced=False)
        while True:
            msg = await conn.read()
            if msg is None:
                raise ConnectionError("the server closed the connection while registering")
            if msg.command == "001":
                self.nick = msg.param(0) or self.nick
                return
            await self._registering(conn, msg, password)

    async def _registering(self, conn: Connection, msg: Message, password: str) -> None:
        cmd = msg.command
        if cmd == "PING":
            await conn.send("PONG", msg.param(0), paced=False)
        elif cmd == _NICK_IN_USE:
            self.nick = _next_nick(self.nick)
            self.log.warning("IRC: nick {} in use, trying {}", msg.param(1), self.nick)
            await conn.send("NICK", self.nick, paced=False)
        elif cmd == _ERRONEOUS_NICK:
            raise kit.CredentialsRefused(
                f"IRC server refused channels.irc.nick {self.nick!r}: {msg.params[-1]}"
            )
        elif cmd in (_PASSWD_MISMATCH, _BANNED) or cmd in _SASL_FAIL:
            key = "channels.irc.password" + (" (SASL)" if cmd in _SASL_FAIL else "")
            raise kit.CredentialsRefused(f"IRC server refused {key}: {msg.params[-1]}")
        elif cmd == "ERROR":
            said = msg.params[-1] if msg.params else ""
            if _REFUSED.search(said):  # ngircd: "Access denied: Bad password?", no 464
                raise kit.CredentialsRefused(f"IRC server refused channels.irc.password: {said}")
            raise ConnectionError(f"the server said ERROR {said}")
        elif cmd == "CAP" or cmd == "AUTHENTICATE" or cmd in _SASL_OK:
            await self._sasl(conn, msg, password)

    async def _sasl(self, conn: Connection, msg: Message, password: str) -> None:
        """IRCv3 SASL PLAIN (ircv3.net/specs/extensions/sasl-3.1)."""
        sub = msg.param(1).upper()
        if msg.command == "CAP" and sub == "LS" and msg.param(2) != "*":
            offered = msg.params[-1].lower().split()
            if not any(c == "sasl" or c.startswith("sasl=") for c in offered):
                raise kit.CredentialsRefused(
                    "IRC server offers no SASL: set channels.irc.sasl to false"
                )
            await conn.send("CAP", "REQ", "sasl", paced=False)
        elif msg.command == "CAP" and sub == "ACK":
            await conn.send("AUTHENTICATE", "PLAIN", paced=False)
        elif msg.command == "CAP" and sub == "NAK":
            raise kit.CredentialsRefused("IRC server refused SASL: set channels.irc.sasl to false")
        elif msg.command == "AUTHENTICATE" and msg.param(0) == "+":
            account = self.cfg.account()
            token = base64.b64encode(f"{account}\0{account}\0{password}".encode()).decode()
            for start in range(0, len(token), 400):
                await conn.send("AUTHENTICATE", token[start : start + 400], paced=False)
            if len(token) % 400 == 0:
                await conn.send("AUTHENTICATE", "+", paced=False)
        elif msg.command in _SASL_OK:
            await conn.send("CAP", "END", paced=False)

    # -- serve -----------------------------------------------------------------------------
    async def session(self, backoff: kit.Backoff) -> Exception:
        """Join, then read until the connection ends; what ended it."""
        conn = self.conn
        assert conn is not None
        self.joined.clear()
        self.ops.clear()
        self._all_joined.clear()
        self._joining = set(self.cfg.channel_names())
        ready = self.spawn(self._up_when_joined(backoff))
        try:
            await self._join(conn, self.cfg.channels)
            while (msg := await conn.read()) is not None:
                await self._on(conn, msg)
            return kit.Unreachable("IRC server closed the connection")
        except ConnectionError as exc:
            return kit.Unreachable(f"IRC connection lost ({exc})")
        except _NETWORK as exc:
            return kit.Unreachable(f"IRC connection lost ({exc!r})")
        finally:
            ready.cancel()
            await conn.close()

    async def _up_when_joined(self, backoff: kit.Backoff) -> None:
        """Up once every configured channel is joined (or after 10 s: a channel that will
        not let the bot in is a warning, not a channel down)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                if self._joining:
                    await self._all_joined.wait()
        backoff.reset()
        self.up()

    async def _join(self, conn: Connection, channels: list[str]) -> None:
        """JOIN `channels` (`"#room key"` with a key), as few lines as fit."""
        names = [c.split(" ", 1)[0] for c in channels]
        keys = [c.split(" ", 1)[1] if " " in c else "x" for c in channels]
        for start in range(0, len(names), 10):
            chunk, chunk_keys = names[start : start + 10], keys[start : start + 10]
            if any(" " in c for c in channels[start : start + 10]):
                await conn.send("JOIN", ",".join(chunk), ",".join(chunk_keys))
            else:
                await conn.send("JOIN", ",".join(chunk))

    def _joined(self, channel: str) -> None:
        self.joined.add(channel)
        self._joining.discard(channel)
        if not self._joining:
            self._all_joined.set()

    # -- what comes in ---------------------------------------------------------------------
    async def _on(self, conn: Connection, msg: Message) -> None:
        handler = _HANDLERS.get(msg.command)
        if handler is not None:
            await handler(self, conn, msg)

    async def _ping(self, conn: Connection, msg: Message) -> None:
        await conn.send("PONG", msg.param(0), paced=False)

    async def _error(self, conn: Connection, msg: Message) -> None:
        raise ConnectionError(f"the server said ERROR {msg.params[-1] if msg.params else ''}")

    async def _join_seen(self, conn: Connection, msg: Message) -> None:
        channel = irc_lower(msg.param(0))
        if self._is_me(msg.nick):
            self.userhost = msg.prefix.split("!", 1)[1] if "!" in msg.prefix else self.userhost
            self._joined(channel)
            return
        if channel not in self.joined:
            return
        nick = msg.nick
        event = kit.member_joined(self.platform, f"group:{channel}", nick, nick)
        self.inbound.events(f"group:{channel}", lambda: _async_list(event))

    async def _kick(self, conn: Connection, msg: Message) -> None:
        channel = irc_lower(msg.param(0))
        if self._is_me(msg.param(1)):
            self.joined.discard(channel)
            self.log.warning("IRC: kicked from {} by {}: rejoining", channel, msg.nick)
            configured = [c for c in self.cfg.channels if irc_lower(c.split(" ")[0]) == channel]
            if configured:
                self.spawn(self._rejoin(conn, configured))
        else:
            self.ops.get(channel, {}).pop(irc_lower(msg.param(1)), None)

    async def _rejoin(self, conn: Connection, channels: list[str]) -> None:
        if await self.pause(2.0):
            with contextlib.suppress(*_NETWORK):
                await self._join(conn, channels)

    async def _part(self, conn: Connection, msg: Message) -> None:
        channel = irc_lower(msg.param(0))
        if self._is_me(msg.nick):
            self.joined.discard(channel)
        self.ops.get(channel, {}).pop(irc_lower(msg.nick), None)

    async def _quit(self, conn: Connection, msg: Message) -> None:
        for ops in self.ops.values():
            ops.pop(irc_lower(msg.nick), None)

    async def _nick(self, conn: Connection, msg: Message) -> None:
        old, new = irc_lower(msg.nick), msg.param(0)
        if self._is_me(msg.nick):
            self.nick = new
        for ops in self.ops.values():
            if old in ops:
                ops[irc_lower(new)] = ops.pop(old)

    async def _names(self, conn: Connection, msg: Message) -> None:
        """353 RPL_NAMREPLY: `<me> <type> <channel> :[prefix]nick ...`."""
        channel = irc_lower(msg.param(2))
        ops = self.ops.setdefault(channel, {})
        for entry in msg.params[-1].split():
            nick = entry.lstrip(_PREFIXES)
            marks = entry[: len(entry) - len(nick)]
            role = next((_ROLE[m] for m in marks if m in _ROLE), None)
            if role:
                ops[irc_lower(nick)] = role
            else:
                ops.pop(irc_lower(nick), None)

    async def _mode(self, conn: Connection, msg: Message) -> None:
        """MODE #channel +o-o nick nick: who is an operator now."""
        channel = irc_lower(msg.param(0))
        if channel not in self.joined:
            return
        ops = self.ops.setdefault(channel, {})
        args = list(msg.params[2:])
        adding = True
        for flag in msg.param(1):
            if flag in "+-":
                adding = flag == "+"
                continue
            if flag in "qaohvbeIklfjL" and not (flag == "l" and not adding) and args:
                nick = irc_lower(args.pop(0))
                if flag in "qao":
                    role = "owner" if flag == "q" else "admin"
                    if adding:
                        ops[nick] = role
                    else:
                        ops.pop(nick, None)

    async def _cannot_join(self, conn: Connection, msg: Message) -> None:
        channel = irc_lower(msg.param(1))
        self.log.warning(
            "IRC: cannot join {} ({}): check channels.irc.channels",
            channel,
            _CANNOT_JOIN.get(msg.command, msg.params[-1]),
        )
        if channel in self._joining:
            self._joined(channel)

    async def _privmsg(self, conn: Connection, msg: Message) -> None:
        target, text = msg.param(0), msg.params[-1] if len(msg.params) > 1 else ""
        nick = msg.nick
        if not nick or "!" not in msg.prefix or self._is_me(nick):
            return  # a server's or the bot's own
        if text.startswith("\x01"):
            if not text.startswith("\x01ACTION "):
                return  # CTCP (VERSION, PING...): not a message to the bot
            text = f"* {nick} {text[8:].rstrip(chr(1))}"
        is_group = target[:1] in "#&+!"
        chat = f"group:{irc_lower(target)}" if is_group else f"private:{irc_lower(nick)}"
        mentioned, text = self._mention(text) if is_group else (False, text)
        roles = (
            [self.ops[irc_lower(target)][irc_lower(nick)]]
            if is_group and irc_lower(nick) in self.ops.get(irc_lower(target), {})
            else []
        )

        async def read() -> IncomingMessage | None:
            return self.incoming(
                chat,
                nick,
                text,
                is_group=is_group,
                sender_name=nick,
                chat_name=target if is_group else nick,
                is_at_bot=mentioned,
                sender_roles=roles,
            )

        self.inbound.message(chat, "", read)

    def _mention(self, text: str) -> tuple[bool, str]:
        """Whether a channel message speaks to the bot (`nick: ...`, `nick, ...`, or its nick
        as a word), and the text without the leading address."""
        nick = re.escape(self.nick)
        lead = re.match(rf"^\s*@?{nick}\s*[:,]\s*", text, re.IGNORECASE)
        if lead:
            return True, text[lead.end() :]
        word = re.search(rf"(?<![\w\[\]\\`^{{|}}-])@?{nick}(?![\w\[\]\\`^{{|}}-])", text, re.I)
        return word is not None, text

    def _is_me(self, nick: str) -> bool:
        return irc_lower(nick) == irc_lower(self.nick)

    # -- close and tests -------------------------------------------------------------------
    async def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None and not conn.closed:
            with contextlib.suppress(*_NETWORK, ValueError):
                async with asyncio.timeout(2):
                    await conn.send("QUIT", "chatfn stopping", paced=False)
            await conn.close()

    async def drop_connection(self) -> None:
        """Cut the connection (tests): the channel reconnects and rejoins."""
        if self.conn is not None:
            self.conn.writer.transport.abort()


async def _async_list(event: Any) -> list[Any]:
    return [event]


def _next_nick(nick: str) -> str:
    """The nick to try when `nick` is in use: `_` after it (the last character replaced by
    a digit once it is 30 long)."""
    if len(nick) < 30:
        return nick + "_"
    return nick[:-1] + str((int(nick[-1]) + 1) % 10 if nick[-1].isdigit() else 1)


_HANDLERS = {
    "PING": IrcChannel._ping,
    "ERROR": IrcChannel._error,
    "JOIN": IrcChannel._join_seen,
    "KICK": IrcChannel._kick,
    "PART": IrcChannel._part,
    "QUIT": IrcChannel._quit,
    "NICK": IrcChannel._nick,
    "353": IrcChannel._names,
    "MODE": IrcChannel._mode,
    "PRIVMSG": IrcChannel._privmsg,
    **dict.fromkeys(_CANNOT_JOIN, IrcChannel._cannot_join),
}
