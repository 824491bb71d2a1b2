"""The IRC channel's own cases against a real ngircd (ngircd_server.py) and independent
socket clients (irc_user.py): lines within 512 bytes as the server relays them, the pace of
flood control, a nick in use, rejoining after a KICK and a lost connection, NOTICE and CTCP
left unanswered, the `check` probe; the wire format's own rules without a server."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from chatfn.channels.irc import check
from chatfn.channels.irc.protocol import line, parse
from chatfn.channels.irc.send import lines_of, parse_chat_id, wrap
from chatfn.channels.irc.settings import IrcSettings
from function_calls import FunctionResult, MessageContext, tool_function
from function_calls.registry import Registry
from tests.channels.contract import Chat
from tests.channels.irc.irc_driver import BOT_NICK, IrcDriver, is_bot, running
from tests.channels.irc.irc_user import IrcUser
from tests.channels.irc.ngircd_server import NgIrcd
from tests.kit import until

#: Multi-byte text: 3 bytes a character, and a 700-character word with no space to cut at.
LONG = " ".join(["日本語のテキスト"] * 60) + " " + "ü" * 700 + " done"
LINES = "\n".join(f"line {n}" for n in range(12))


def registry() -> Registry:
    reg = Registry()
    with reg.collecting():

        @tool_function(name="long", description="A long multi-byte line.")
        async def long(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=[LONG])

        @tool_function(name="lines", description="Twelve lines.")
        async def lines(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=[LINES])

    return reg


# -- against the server ------------------------------------------------------------------------
@pytest.mark.services
async def test_lines_stay_within_512_bytes_as_relayed(irc: IrcDriver, tmp_path: Path) -> None:
    async with running(irc, tmp_path, registry=registry()):
        user = await irc.user("2001")
        await user.say(BOT_NICK, "/long")
        await until(
            lambda: (found := user.privmsgs(is_bot)) and found[-1].params[-1].endswith(" done"),
            15,
            "the long reply",
        )
        got = user.privmsgs(is_bot)
    assert len(got) >= 5
    assert all(len(g.raw) <= 512 for g in got), [len(g.raw) for g in got]
    # cut at spaces, else between characters: nothing lost, no character broken
    # (read_line decodes strictly: a character cut in two would have failed there)
    assert "".join(g.params[-1] for g in got).replace(" ", "") == LONG.replace(" ", "")
    assert max(len(g.raw) for g in got) > 480  # lines are filled, not cut short


@pytest.mark.services
async def test_pace_holds_lines_back(ngircd: NgIrcd, tmp_path: Path) -> None:
    """Two at once, then five a second: twelve lines take at least two seconds."""
    driver = await IrcDriver(ngircd, flood_rate=5.0, flood_burst=2).open()
    try:
        async with running(driver, tmp_path, registry=registry()):
            user = await driver.user("2003")
            began = time.monotonic()
            await user.say(BOT_NICK, "/lines")
            await until(lambda: len(user.privmsgs(is_bot)) >= 12, 15, "twelve lines")
            took = time.monotonic() - began
    finally:
        await driver.close()
    assert took >= (12 - 2) / 5.0 - 0.1, took
    assert [g.params[-1] for g in user.privmsgs(is_bot)] == [f"line {n}" for n in range(12)]


@pytest.mark.services
async def test_a_nick_in_use_is_tried_with_an_underscore(irc: IrcDriver, tmp_path: Path) -> None:
    squatter = await IrcUser(irc.server.port, BOT_NICK).connect()
    try:
        async with running(irc, tmp_path, bot={"reply_with_mention": False}):
            assert irc.channel is not None and irc.channel.nick == f"{BOT_NICK}_"
            await irc.say(Chat("group", "irc1"), "who are you", mention=True)
            [reply] = await irc.sent(Chat("group", "irc1"), 1)
    finally:
        await squatter.close()
    assert reply.text == "echo: who are you"


@pytest.mark.services
async def test_rejoins_after_a_kick_and_after_a_lost_connection(
    irc: IrcDriver, tmp_path: Path
) -> None:
    group = Chat("group", "irc2")
    assert irc.watcher is not None
    async with running(irc, tmp_path, bot={"reply_with_mention": False}):
        channel = irc.channel
        assert channel is not None
        await irc.watcher.send(f"KICK #irc2 {channel.nick} :out")
        await until(lambda: "#irc2" not in channel.joined, 10, "kicked")
        await until(lambda: "#irc2" in channel.joined, 10, "rejoined after the kick")
        await irc.say(group, "one", mention=True)
        await irc.sent(group, 1)
        await irc.drop_connection()
        assert "#irc2" in channel.joined
        await irc.say(group, "two", mention=True)
        replies = await irc.sent(group, 2)
    assert [r.text for r in replies] == ["echo: one", "echo: two"]


@pytest.mark.services
async def test_notice_and_ctcp_are_not_answered(irc: IrcDriver, tmp_path: Path) -> None:
    async with running(irc, tmp_path):
        user = await irc.user("2004")
        await user.send(f"NOTICE {BOT_NICK} :a notice")
        await user.say(BOT_NICK, "\x01VERSION\x01")
        await user.say(BOT_NICK, "\x01ACTION waves\x01")
        await user.say(BOT_NICK, "hello")
        await until(lambda: len(user.privmsgs(is_bot)) >= 2, 10, "two replies")
        await asyncio.sleep(0.1)
    assert [g.params[-1] for g in user.privmsgs(is_bot)] == ["echo: * u2004 waves", "echo: hello"]


@pytest.mark.services
async def test_check_online_registers(ngircd: NgIrcd) -> None:
    good = IrcSettings(server="127.0.0.1", port=ngircd.port, tls=False, nick="probebot")
    [offline, online] = await check(good, True)
    assert offline.status == "ok" and online.status == "ok", online
    assert "probebot" in online.detail
    ngircd.set_password("sesame")
    try:
        [_, refused] = await check(good, True)
        with_it = good.model_copy(update={"password": "sesame"})
        [_, accepted] = await check(IrcSettings.model_validate(with_it.model_dump()), True)
    finally:
        ngircd.set_password("")
    assert refused.status == "fail" and "channels.irc.password" in refused.detail, refused
    assert accepted.status == "ok", accepted
    closed = IrcSettings(server="127.0.0.1", port=1, tls=False, nick="probebot")
    [_, unreachable] = await check(closed, True)
    assert unreachable.status == "fail" and "not reachable" in unreachable.detail


# -- without a server --------------------------------------------------------------------------
def test_the_wire_format() -> None:
    msg = parse("@time=2026-01-01T00:00:00Z :nick!user@host PRIVMSG #chan :hello: there")
    assert msg is not None and msg.command == "PRIVMSG" and msg.nick == "nick"
    assert msg.params == ("#chan", "hello: there") and msg.tags["time"].startswith("2026")
    assert parse("PING :abc") == parse("PING abc")
    assert parse("") is None and parse(":prefix.only") is None
    assert line("PRIVMSG", "#chan", "hi there") == "PRIVMSG #chan :hi there"
    assert line("NICK", "bot") == "NICK bot" and line("PRIVMSG", "x", ":)") == "PRIVMSG x ::)"
    for bad in ("a\r\nQUIT", "a\nb", "a\0b"):
        with pytest.raises(ValueError):
            line("PRIVMSG", "#chan", bad)
    with pytest.raises(ValueError):
        line("PRIVMSG", "#chan two", "x")
    with pytest.raises(ValueError):
        line("PRIVMSG", "#chan", "x" * 600)


def test_wrap_cuts_at_spaces_and_never_inside_a_character() -> None:
    pieces = wrap("é" * 10, 5)
    assert pieces == ["éé", "éé", "éé", "éé", "éé"]
    assert wrap("aa bb cc", 5) == ["aa bb", "cc"]
    lines = lines_of("**Bold** line\n\n```\ncode\n```\n\n- item", 100, first="u1: ")
    assert lines == ["u1: Bold line", "code", "• item"] or lines[0] == "u1: Bold line"
    assert lines_of("a\nb\nc\nd", 100, max_lines=3) == ["a", "b", "[2 more lines not sent]"]


def test_settings_name_the_key() -> None:
    with pytest.raises(ValidationError, match="nick"):
        IrcSettings(server="irc.example.org", nick="1bad")
    with pytest.raises(ValidationError, match="channel"):
        IrcSettings(server="irc.example.org", channels=["nohash"])
    assert "channels.irc.server" in (IrcSettings().problem() or "")
    assert "channels.irc.password" in (IrcSettings(server="x", sasl=True).problem() or "")
    assert parse_chat_id("group:#chan").is_group and not parse_chat_id("private:nick").is_group
    with pytest.raises(ValueError, match="expected group:#channel"):
        parse_chat_id("group:nohash")


# -- SASL (ngircd has none): a server speaking IRCv3 SASL 3.1 ----------------------------------
class SaslServer:
    """The registration of https://ircv3.net/specs/extensions/sasl-3.1 (CAP LS, CAP REQ,
    AUTHENTICATE PLAIN, 900/903 or 904, CAP END), welcoming (001) only after CAP END."""

    def __init__(self, account: str, password: str) -> None:
        self.account, self.password = account, password
        self.said: list[str] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> SaslServer:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        def send(text: str) -> None:
            writer.write(f":sasl.test {text}\r\n".encode())

        negotiating, nick = False, "*"
        while raw := await reader.readline():
            text = raw.decode().rstrip("\r\n")
            self.said.append(text)
            words = text.split(" ")
            if text == "CAP LS 302":
                negotiating = True
                send("CAP * LS :multi-prefix sasl=PLAIN,EXTERNAL")
            elif text == "CAP REQ sasl" or text == "CAP REQ :sasl":
                send("CAP * ACK :sasl")
            elif text == "AUTHENTICATE PLAIN":
                writer.write(b"AUTHENTICATE +\r\n")
            elif words[0] == "AUTHENTICATE":
                import base64

                _authz, account, password = base64.b64decode(words[1]).decode().split("\0")
                if (account, password) == (self.account, self.password):
                    send(f"900 {nick} {nick}!u@h {account} :You are now logged in")
                    send(f"903 {nick} :SASL authentication successful")
                else:
                    send(f"904 {nick} :SASL authentication failed")
            elif text == "CAP END":
                negotiating = False
                send(f"001 {nick} :Welcome")
            elif words[0] == "NICK":
                nick = words[1]
            elif words[0] == "USER" and not negotiating:
                send(f"001 {nick} :Welcome")
            await writer.drain()
        writer.close()


async def test_sasl_plain_logs_in_and_a_refusal_names_the_password() -> None:
    async with SaslServer("mybot", "sesame") as server:
        good = IrcSettings(
            server="127.0.0.1",
            port=server.port,
            tls=False,
            nick="mybot",
            sasl=True,
            password="sesame",  # type: ignore[arg-type]
        )
        [_, online] = await check(good, True)
        assert online.status == "ok", online
        assert "CAP END" in server.said and not any(s.startswith("PASS") for s in server.said)
        wrong = IrcSettings.model_validate({**good.model_dump(), "password": "wrong"})
        [_, refused] = await check(wrong, True)
    assert refused.status == "fail" and "channels.irc.password (SASL)" in refused.detail, refused
