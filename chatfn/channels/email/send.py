"""The way out by SMTP: a reply is one mail threaded under the message it answers
(`In-Reply-To`, `References`, `Re: ` + its subject), its text the Markdown made plain, images
attached. Its `Message-ID` is made from the outbox row (`<chatfn.<row>.<hash>@<domain>>`), so
a mail the outbox sends again after a crash is the same mail: the recipient's mail system
and client show it once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formataddr, formatdate, make_msgid
from typing import Any

import aiosmtplib

from chatfn.channels import kit
from chatfn.channels.email.settings import EmailSettings
from chatfn.channels.markdown import to_plain
from chatfn.common import audio
from chatfn.common.messages import OutgoingMessage

__all__ = ["EmailSender", "Thread", "ThreadRef", "compose", "parse_chat_id"]

MAX_IMAGE_OUT = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ThreadRef:
    to: str  # the correspondent's address
    root: str  # the thread's root Message-ID, without < >

    @property
    def key(self) -> str:
        return f"private:{self.to}:thread:{self.root}"


@dataclass(slots=True)
class Thread:
    """What the channel knows of a thread from the mail it read (for the reply's headers)."""

    subject: str = ""
    references: tuple[str, ...] = ()


def parse_chat_id(chat_id: str) -> ThreadRef:
    kind, _, rest = chat_id.partition(":")
    to, sep, root = rest.partition(":thread:")
    if kind != "private" or not sep or "@" not in to or not root or " " in root:
        raise ValueError(
            f"not an e-mail chat id: {chat_id!r} (expected private:<address>:thread:<message id>)"
        )
    return ThreadRef(to, root)


def message_id(out: OutgoingMessage, domain: str) -> str:
    if out.event_id is None:
        return make_msgid(domain=domain)
    digest = hashlib.sha256(f"{out.chat_id}\n{out.text}".encode()).hexdigest()[:12]
    return f"<chatfn.{out.event_id}.{digest}@{domain}>"


def compose(
    out: OutgoingMessage, ref: ThreadRef, thread: Thread, cfg: EmailSettings, images: list[bytes]
) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = formataddr((cfg.display_name, cfg.address)) if cfg.display_name else cfg.address
    msg["To"] = ref.to
    subject = thread.subject or "your message"
    msg["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = message_id(out, cfg.address.rsplit("@", 1)[-1])
    answered = out.reply_to or (thread.references[-1] if thread.references else ref.root)
    msg["In-Reply-To"] = f"<{answered}>"
    chain = [r for r in (ref.root, *thread.references, answered) if r]
    msg["References"] = " ".join(f"<{r}>" for r in dict.fromkeys(chain))
    msg["Auto-Submitted"] = "auto-replied"  # RFC 3834: other bots must not answer it
    msg.set_content(to_plain(out.text) if out.text.strip() else "")
    for index, data in enumerate(images):
        kind = kit.image_mime(data) or "image/png"
        msg.add_attachment(
            data,
            maintype="image",
            subtype=kind.split("/", 1)[1],
            filename=f"image{index + 1}.{kind.split('/', 1)[1]}",
        )
    for index, ref_ in enumerate(out.audio):  # the reply spoken (voice.tts): an attachment
        spoken = audio.decode_audio_uri(ref_)
        if spoken is None:
            continue  # a URL: the text is the answer
        subtype = spoken[0].split("/", 1)[1]
        msg.add_attachment(
            spoken[1],
            maintype="audio",
            subtype=subtype,
            filename=f"reply{index + 1}.{subtype}",
        )
    return msg


class EmailSender(kit.PlatformSender[ThreadRef], platform="email", label="e-mail"):
    """Sends replies by SMTP; `client` is the channel (its threads)."""

    cfg: EmailSettings

    parse_chat = staticmethod(parse_chat_id)

    def classify(self, exc: Exception, key: str) -> Exception | None:
        if isinstance(exc, aiosmtplib.SMTPAuthenticationError):
            return kit.CredentialsRefused(
                f"SMTP server refused channels.email.username/password ({exc.code} {exc.message})"
            )
        if isinstance(exc, aiosmtplib.SMTPRecipientsRefused):
            return kit.DeliveryRefused(f"SMTP server refused the recipient of {key}: {exc}")
        if isinstance(exc, aiosmtplib.SMTPResponseException):
            if 400 <= exc.code < 500:
                return kit.Unreachable(f"SMTP server: {exc.code} {exc.message} (try later)")
            return kit.DeliveryRefused(
                f"SMTP server refused the mail to {key}: {exc.code} {exc.message}"
            )
        if isinstance(exc, aiosmtplib.SMTPException | OSError | TimeoutError):
            return kit.Unreachable(f"SMTP server not reachable at {self.cfg.smtp_url} ({exc})")
        return None

    async def send_parts(self, ref: ThreadRef, out: OutgoingMessage, owed: kit.Owed) -> Any:
        images = [kit.decode_image(i, MAX_IMAGE_OUT, "e-mail") for i in out.images]
        data = [i for i in images if isinstance(i, bytes)]
        thread = self.client.threads.get(ref.root) or Thread()
        msg = compose(out, ref, thread, self.cfg, data)
        host, port, mode = self.cfg.smtp_address()

        async def send() -> Any:
            return await aiosmtplib.send(
                msg,
                hostname=host,
                port=port,
                username=self.cfg.username,
                password=self.cfg.secret_text("password"),
                use_tls=mode == "tls",
                start_tls=mode == "starttls",
                timeout=self.cfg.connect_timeout,
            )

        await self.call(ref.key, send)
        owed.sent = len(owed.parts)
        return str(msg["Message-ID"])
