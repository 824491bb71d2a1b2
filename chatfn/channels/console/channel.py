"""The default channel: talk to the bot in a terminal, or pipe a conversation through it.

Lines starting with `:` are meta-commands that change who is speaking and where, so group vs
private and admin vs user can be tried without any chat platform:

    :as alice        speak as alice            :group team1   move to group chat "team1"
    :admin on|off    make the speaker admin    :private       back to a private chat
    :join NAME       NAME joins the group      :help          list meta-commands
    :quit            leave

`@bot` anywhere in a line mentions the bot (needed in groups by default).

In a terminal the line is edited with prompt_toolkit (arrow keys, Ctrl-R, the history of the
session with up/down), and everything printed meanwhile, log lines, streamed text, a reminder,
goes above the prompt (`patch_stdout`) instead of through it. Ctrl-C while a reply runs stops
it (what was shown is kept as the reply); Ctrl-C or Ctrl-D at the prompt leaves. Piped input
is read line by line as it is, with no prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import signal
import sys
import threading
import uuid
from typing import TextIO

from chatfn.channels.base import Channel
from chatfn.channels.console.settings import ConsoleSettings
from chatfn.common.messages import (
    IncomingMessage,
    OutgoingMessage,
    StreamEvent,
    SystemEvent,
    image_label,
)
from chatfn.runtime.channel_host import ChannelHost, section_of

MENTION = re.compile(r"(?<!\S)@bot\b", re.IGNORECASE)
META_HELP = (
    ":as NAME | :admin on|off | :group NAME | :private | :join NAME | :whoami | "
    ":help | :quit   (@bot in a line mentions the bot)"
)


class ConsoleChannel(Channel):
    platform = "console"
    streams = True

    def __init__(
        self,
        host: ChannelHost,
        settings: ConsoleSettings | None = None,
        *,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
    ) -> None:
        super().__init__(host)
        self.cfg = settings or section_of(host.settings, "console", ConsoleSettings)
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.user = self.cfg.user
        self.group: str | None = None
        self.admin: bool | None = None
        self.interactive = self.stdin.isatty()
        # Message ids unique across runs (`console-<run>-<n>`): an incoming message is stored
        # once per chat and id, so a counter starting at 1 again would make the next run's
        # first line the last run's.
        self._run = uuid.uuid4().hex[:8]
        self._ids = itertools.count(1)
        # Stored incoming messages are unique per (platform, chat, message id), so the ids of
        # one run must not repeat those of the last: a counter alone restarts at 1.
        self._run = uuid.uuid4().hex[:8]
        self._streamed: list[str] = []
        self._thinking = False  # a "(thinking)" line is open
        self._done = asyncio.Event()
        self._stop: asyncio.Event | None = None  # the running turn's (Ctrl-C sets it)

    # -- output ----------------------------------------------------------------------------
    def _write(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def _format(self, out: OutgoingMessage) -> str:
        mention = f"@{out.at} " if out.at else ""
        where = f"[{out.chat_id}] " if out.is_group else ""
        images = "".join(f"\n  [image: {image_label(ref)}]" for ref in out.images)
        return f"{self.host.settings.bot.name}> {where}{mention}{out.text}{images}\n"

    async def send(self, message: OutgoingMessage) -> None:
        self._write(self._format(message))

    async def _reply(self, out: OutgoingMessage) -> None:
        streamed = "".join(self._streamed)
        self._streamed.clear()
        if streamed and streamed.strip() == out.text.strip():
            self._write("\n")  # already shown as it arrived
            return
        if streamed:
            self._write("\n")
        self._write(self._format(out))

    async def _on_stream(self, event: StreamEvent) -> None:
        # Reasoning arrives here only when models.<name>.thinking.show is on.
        if event.type == "thinking" and event.text:
            if not self._thinking:
                self._write("  (thinking) ")
                self._thinking = True
            self._write(event.text)
            return
        if self._thinking:
            self._write("\n")
            self._thinking = False
        if event.type == "text" and event.text:
            if not self._streamed:
                self._write(f"{self.host.settings.bot.name}> ")
            self._streamed.append(event.text)
            self._write(event.text)
        elif event.type == "tool_call_start" and event.tool_call is not None:
            if self._streamed:
                self._write("\n")
                self._streamed.clear()
            self._write(f"  [calling {event.tool_call.name}]\n")

    # -- input -----------------------------------------------------------------------------
    def _meta(self, line: str) -> None:
        cmd, _, arg = line[1:].strip().partition(" ")
        arg = arg.strip()
        if cmd == "as" and arg:
            self.user = arg
        elif cmd == "admin":
            self.admin = arg.lower() in ("on", "yes", "true", "1")
        elif cmd == "group" and arg:
            self.group = arg
        elif cmd == "private":
            self.group = None
        elif cmd in ("quit", "exit", "q"):
            self._done.set()
            return
        elif cmd == "whoami":
            pass
        else:
            self._write(META_HELP + "\n")
            return
        where = f"group {self.group}" if self.group else "private chat"
        admin = " (admin)" if self._is_admin() else ""
        self._write(f"-- you are {self.user}{admin} in {where}\n")

    def _is_admin(self) -> bool:
        if self.admin is not None:
            return self.admin
        return self.user in self.host.settings.bot.admins

    def message_for(self, line: str) -> IncomingMessage:
        at_bot = bool(MENTION.search(line))
        text = MENTION.sub("", line).strip() if at_bot else line.strip()
        return IncomingMessage(
            platform=self.platform,
            chat_id=f"group:{self.group}" if self.group else f"private:{self.user}",
            chat_name=self.group or "",
            is_group=self.group is not None,
            sender_id=self.user,
            sender_name=self.user,
            text=text,
            is_at_bot=at_bot,
            message_id=f"console-{self._run}-{next(self._ids)}",
            admin_override=self.admin,
        )

    async def handle_line(self, line: str) -> None:
        line = line.rstrip("\r\n")
        if not line.strip():
            return
        if line.startswith(":join"):
            await self._join(line[len(":join") :].strip())
            return
        if line.startswith(":"):
            self._meta(line)
            return
        stop = self._stop = asyncio.Event()
        try:
            await self.host.handle(
                self.message_for(line), self._reply, on_stream=self._on_stream, stop=stop
            )
        finally:
            self._stop = None
        if stop.is_set():
            if self._streamed or self._thinking:  # the stopped text had no reply line after it
                self._write("\n")
                self._streamed.clear()
                self._thinking = False
            self._write("-- (stopped)\n")

    def interrupt(self) -> None:
        """Ctrl-C while a reply runs: stop it; the text shown so far is stored as the reply
        (ChannelHost.handle's `stop`). Nothing to do at other times."""
        if self._stop is not None:
            self._stop.set()

    def _catch_ctrl_c(self) -> None:
        """Ctrl-C (SIGINT: the terminal is out of prompt_toolkit's raw mode while a reply
        runs) stops the reply. prompt_toolkit takes SIGINT over while it prompts and drops
        every handler afterwards, so this is set again before each turn."""
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, self.interrupt)

    async def _join(self, name: str) -> None:
        """`:join NAME`: NAME joins the current group (a member_joined event); the bot's
        answer (a welcome) is printed through `send` as any unsolicited message."""
        if not name or self.group is None:
            self._write("-- :join NAME works in a group (:group NAME first)\n")
            return
        self._write(f"-- {name} joined group {self.group}\n")
        sent = await self.host.handle_event(
            SystemEvent(
                kind="member_joined",
                platform=self.platform,
                chat_id=f"group:{self.group}",
                user_id=name,
                user_name=name,
            )
        )
        if not sent:
            self._write("-- (nothing was sent)\n")

    async def run(self) -> None:
        if self.interactive and self.stdout.isatty() and self.stdin is sys.stdin:
            await self._run_terminal()
        else:
            await self._run_lines()

    async def _run_terminal(self) -> None:
        """Line editing and history; output printed while the prompt waits goes above it."""
        from prompt_toolkit import PromptSession
        from prompt_toolkit.patch_stdout import patch_stdout

        session: PromptSession[str] = PromptSession()
        with patch_stdout(raw=True):
            # What this channel and the log sink write goes through the patched streams now.
            self.stdout = sys.stdout
            self._write(f"chatfn console. {META_HELP}\n")
            while not self._done.is_set():
                try:
                    line = await session.prompt_async(self.cfg.prompt)
                except (EOFError, KeyboardInterrupt):  # Ctrl-D / Ctrl-C: leave
                    break
                self._catch_ctrl_c()
                await self.handle_line(line)
        self.stdout = sys.stdout

    async def _run_lines(self) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        def reader() -> None:  # a thread: blocking reads work for both ttys and pipes
            for line in self.stdin:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            loop.call_soon_threadsafe(queue.put_nowait, None)

        threading.Thread(target=reader, daemon=True, name="console-stdin").start()
        if self.interactive:
            self._write(f"chatfn console. {META_HELP}\n")
        while not self._done.is_set():
            if self.interactive:
                self._write(self.cfg.prompt)
            line = await queue.get()
            if line is None:
                break
            await self.handle_line(line)
