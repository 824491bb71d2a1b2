"""The e-mail channel: a mailbox read by IMAP (IDLE: new mail at once) and answered by SMTP.

- connect: IMAP login (refused: CredentialsRefused naming `channels.email.password`) and the
  mailbox selected;
- serve: the unseen messages fetched (without marking them), each read (mail.py): a bounce
  or an automatic reply, a sender not in `allowed_senders`, or the bot's own mail is marked
  seen and not answered; the rest go to the bot, each thread one chat
  (`private:<sender>:thread:<root Message-ID>`), the Message-ID as the message id (a mail seen
  again is handled once). A message is marked `\\Seen` only once it is stored (confirm once
  stored: a crash before leaves it unseen, read again at the next start). Then IDLE until
  the server says something changed or `idle_timeout` passes; a lost connection reconnects
  with backoff;
- out: send.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aioimaplib  # type: ignore[import-untyped]

from chatfn.channels import kit
from chatfn.channels.email.mail import Received, read_mail
from chatfn.channels.email.send import EmailSender, Thread
from chatfn.channels.email.settings import EmailSettings
from chatfn.common.messages import IncomingMessage
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["EmailChannel", "imap_login"]


class ImapRefused(Exception):
    pass


async def imap_login(cfg: EmailSettings) -> aioimaplib.IMAP4:
    """A logged-in IMAP client with the mailbox selected; ImapRefused for the credentials,
    OSError/TimeoutError/aioimaplib errors for the rest."""
    host, port, tls = cfg.imap_address()
    client: aioimaplib.IMAP4
    if tls:
        client = aioimaplib.IMAP4_SSL(host, port, timeout=cfg.connect_timeout)
    else:
        client = aioimaplib.IMAP4(host, port, timeout=cfg.connect_timeout)
    try:
        await client.wait_hello_from_server()
        done = await client.login(cfg.username, cfg.secret_text("password"))
        if done.result != "OK":
            with contextlib.suppress(Exception):
                await client.logout()
            raise ImapRefused(" ".join(_text(line) for line in done.lines))
        selected = await client.select(cfg.mailbox)
        if selected.result != "OK":
            with contextlib.suppress(Exception):
                await client.logout()
            raise OSError(f"mailbox {cfg.mailbox!r} not selected: {selected.lines}")
    except BaseException:  # not returned: its connection is closed here (no one else can)
        _drop(client)
        raise
    return client


def _drop(client: aioimaplib.IMAP4) -> None:
    """Close `client`'s connection (one still being made is cancelled with the
    wait_hello_from_server that awaited it)."""
    with contextlib.suppress(Exception):
        transport = getattr(client.protocol, "transport", None)
        if transport is not None:
            transport.close()


def _text(line: Any) -> str:
    return line.decode(errors="replace") if isinstance(line, bytes | bytearray) else str(line)


class EmailChannel(kit.SessionChannel[EmailSettings], platform="email", label="e-mail"):
    def __init__(self, host: ChannelHost, settings: EmailSettings) -> None:
        super().__init__(host, settings)
        self.imap: aioimaplib.IMAP4 | None = None
        self.sender = EmailSender(self, settings, self.policy)
        self.threads: dict[str, Thread] = {}
        self._in_hand: set[str] = set()
        self._to_mark: set[str] = set()
        self._wake = asyncio.Event()
        self._dropped = asyncio.Event()

    # -- connect ---------------------------------------------------------------------------
    async def connect(self) -> str:
        try:
            self.imap = await imap_login(self.cfg)
        except ImapRefused as exc:
            raise kit.CredentialsRefused(
                f"IMAP server refused channels.email.username/password ({exc})"
            ) from None
        except (OSError, TimeoutError, aioimaplib.Abort, aioimaplib.Error) as exc:
            raise kit.Unreachable(
                f"IMAP server not reachable at {self.cfg.imap_url} ({exc!r})"
            ) from None
        self._dropped = asyncio.Event()
        return f"{self.cfg.address} ({self.cfg.mailbox} at {self.cfg.imap_url})"

    # -- serve -----------------------------------------------------------------------------
    async def session(self, backoff: kit.Backoff) -> Exception:
        imap = self.imap
        assert imap is not None
        self._in_hand.clear()
        try:
            first = True
            while not self.stopping:
                await self._read_new(imap)
                await self._mark(imap)
                if first:
                    backoff.reset()
                    self.up()
                    first = False
                await self._idle(imap)
            return kit.Unreachable("stopping")
        except (OSError, TimeoutError, aioimaplib.Abort, aioimaplib.Error, ConnectionError) as exc:
            return kit.Unreachable(f"IMAP connection lost ({exc!r})")
        finally:
            with contextlib.suppress(Exception):
                imap.protocol.transport.close()

    async def _read_new(self, imap: aioimaplib.IMAP4) -> None:
        found = await imap.uid_search("UNSEEN")
        if found.result != "OK":
            raise OSError(f"UID SEARCH failed: {found.lines}")
        uids = [u for u in _text(found.lines[0]).split() if u.isdigit()]
        for uid in uids:
            if uid not in self._in_hand:
                await self._take(imap, uid)

    async def _take(self, imap: aioimaplib.IMAP4, uid: str) -> None:
        got = await imap.uid("fetch", uid, "(BODY.PEEK[])")
        raw = next((bytes(x) for x in got.lines if isinstance(x, bytearray)), None)
        if got.result != "OK" or raw is None:
            return
        received, why = read_mail(raw)
        if received is None or not self._answerable(received, why):
            self._to_mark.add(uid)
            return
        self._in_hand.add(uid)
        thread = self.threads.setdefault(received.root, Thread())
        thread.subject = thread.subject or received.subject
        thread.references = tuple(dict.fromkeys((*received.references, received.message_id)))
        chat = f"private:{received.sender}:thread:{received.root}"
        taken = kit.Taken()
        self.inbound.message(
            chat, received.message_id, lambda: self._incoming(chat, received), taken
        )
        self.spawn(self._after(taken, uid))

    def _answerable(self, received: Received, why: str | None) -> bool:
        if why is not None:
            self.log.info("e-mail: not answered: {}", why)
            return False
        if received.sender == self.cfg.address:
            return False
        if not self.cfg.allows(received.sender):
            self.log.info(
                "e-mail from {} not answered: not in channels.email.allowed_senders",
                received.sender,
            )
            return False
        return True

    async def _after(self, taken: kit.Taken, uid: str) -> None:
        stored = await taken.outcome
        if stored:
            self._to_mark.add(uid)
        else:
            self._in_hand.discard(uid)  # read again at the next look
        self._wake.set()

    async def _mark(self, imap: aioimaplib.IMAP4) -> None:
        marking, self._to_mark = sorted(self._to_mark, key=int), set()
        if marking:
            done = await imap.uid("store", ",".join(marking), "+FLAGS", "(\\Seen)")
            if done.result != "OK":
                self._to_mark.update(marking)

    async def _idle(self, imap: aioimaplib.IMAP4) -> None:
        if self._wake.is_set():
            self._wake.clear()
            return
        idle = await imap.idle_start(timeout=self.cfg.idle_timeout)
        push = asyncio.ensure_future(imap.wait_server_push(self.cfg.idle_timeout))
        wake = asyncio.ensure_future(self._wake.wait())
        dropped = asyncio.ensure_future(self._dropped.wait())
        try:
            await asyncio.wait({idle, push, wake, dropped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for job in (push, wake, dropped):
                job.cancel()
        if self._dropped.is_set():
            raise ConnectionError("the IMAP connection was cut")
        self._wake.clear()
        if imap.has_pending_idle():
            imap.idle_done()
        await asyncio.wait_for(idle, 15)

    async def _incoming(self, chat: str, received: Received) -> IncomingMessage | None:
        images = [kit.data_uri(data, kind) for kind, data in received.images][:4]
        # an audio attachment (a voice memo): for voice.stt
        voices = [kit.data_uri(data, kind) for kind, data in received.audio][:2]
        return self.incoming(
            chat,
            received.sender,
            received.text,
            is_group=False,
            sender_name=received.name or received.sender,
            chat_name=received.subject,
            images=images,
            audio=voices,
            message_id=received.message_id,
        )

    # -- close and tests -------------------------------------------------------------------
    async def close(self) -> None:
        imap, self.imap = self.imap, None
        if imap is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(imap.logout(), 3)

    async def drop_connection(self) -> None:
        """Cut the IMAP connection (tests): the channel reconnects."""
        self._dropped.set()
        if self.imap is not None:
            with contextlib.suppress(Exception):
                self.imap.protocol.transport.abort()
