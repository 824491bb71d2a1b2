"""Reading and writing mail: what a received message says (its thread, sender, text without
the quoted history, images), whether the bot may answer it, and a reply threaded under it.

One thread is one chat: its root is the first Message-ID of `References` (RFC 5322 section
3.6.4), else `In-Reply-To`, else the message's own Message-ID. A reply carries `In-Reply-To`
the message answered and `References` the root and that message, and `Re: ` + the subject.
The bot never answers a bounce or an automatic reply (RFC 3834 `Auto-Submitted` other than
`no`, an empty or MAILER-DAEMON sender, a delivery report, `Precedence: bulk/junk/list`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import getaddresses, make_msgid, parseaddr
from typing import Any

__all__ = ["Received", "automatic", "read_mail", "thread_root"]

_IDS = re.compile(r"<([^<>\s]+)>")
_WROTE = re.compile(r"^On .{3,200} wrote:\s*$|^-{2,}\s*Original Message\s*-{2,}", re.I)


@dataclass(slots=True)
class Received:
    message_id: str  # without < >
    root: str  # the thread's root Message-ID, without < >
    sender: str  # the From address, lower case
    name: str
    subject: str
    text: str
    images: list[tuple[str, bytes]] = field(default_factory=list)  # (content type, data)
    audio: list[tuple[str, bytes]] = field(default_factory=list)  # voice memos, for voice.stt
    references: list[str] = field(default_factory=list)


def _parts(msg: Any, maintype: str) -> list[tuple[str, bytes]]:
    """(content type, data) of the message's parts of `maintype` (attachments or inline)."""
    found = []
    for part in msg.walk():
        if part.get_content_maintype() == maintype:
            data = part.get_payload(decode=True)
            if isinstance(data, bytes) and data:
                found.append((part.get_content_type(), data))
    return found


def ids(value: str | None) -> list[str]:
    return _IDS.findall(value or "")


def thread_root(message_id: str, in_reply_to: str | None, references: str | None) -> str:
    return next(iter(ids(references) or ids(in_reply_to)), message_id)


def automatic(msg: EmailMessage, return_path: str | None) -> str | None:
    """Why `msg` must not be answered (a bounce or an automatic reply), or None."""
    auto = str(msg.get("Auto-Submitted") or "no").strip().lower()
    if auto != "no":
        return f"Auto-Submitted: {auto}"
    if return_path is not None and return_path.strip() in ("<>", ""):
        return "an empty Return-Path (a bounce)"
    sender = parseaddr(str(msg.get("From") or ""))[1].lower()
    if sender.split("@", 1)[0] in ("mailer-daemon", "postmaster", ""):
        return f"sent by {sender or 'no one'}"
    if msg.get_content_type() == "multipart/report":
        return "a delivery or read report"
    if str(msg.get("Precedence") or "").strip().lower() in ("bulk", "junk", "list"):
        return f"Precedence: {msg.get('Precedence')}"
    if msg.get("X-Autoreply") or msg.get("X-Autorespond") or msg.get("List-Id"):
        return "an automatic reply or a mailing list"
    return None


def without_quote(text: str) -> str:
    """The new text of a reply: lines quoted with `>` and what follows an "On ... wrote:" or
    an "Original Message" line dropped, the signature (after "-- ") too."""
    kept: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if _WROTE.match(line.strip()) or line.rstrip() == "--":
            break
        if line.startswith(">"):
            continue
        kept.append(line)
    return "\n".join(kept).strip()


def _text_of(msg: EmailMessage) -> str:
    part = msg.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, ValueError):  # an unknown charset
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    if part.get_content_subtype() == "html":
        content = re.sub(r"<(script|style)[^>]*>.*?</\1>", "", content, flags=re.S | re.I)
        content = re.sub(r"<br\s*/?>|</p>|</div>", "\n", content, flags=re.I)
        content = re.sub(r"<[^>]+>", "", content)
    return str(content)


def read_mail(raw: bytes) -> tuple[Received | None, str | None]:
    """The message `raw` as Received, or (None, why it is not answered)."""
    msg = BytesParser(policy=policy.default).parsebytes(raw)
    assert isinstance(msg, EmailMessage)
    why = automatic(msg, msg.get("Return-Path"))
    if why is not None:
        return None, why
    name, sender = parseaddr(str(msg.get("From") or ""))
    message_id = next(iter(ids(str(msg.get("Message-ID") or ""))), "")
    if not message_id:
        message_id = make_msgid(domain="no-message-id.invalid")[1:-1]
    references = ids(str(msg.get("References") or ""))
    root = thread_root(message_id, msg.get("In-Reply-To"), msg.get("References"))
    images = _parts(msg, "image")
    audio = _parts(msg, "audio")
    return (
        Received(
            message_id=message_id,
            root=root,
            sender=sender.lower(),
            name=name,
            subject=str(msg.get("Subject") or ""),
            text=without_quote(_text_of(msg)),
            images=images,
            audio=audio,
            references=references or ids(str(msg.get("In-Reply-To") or "")),
        ),
        None,
    )


def recipients(msg: EmailMessage) -> list[str]:
    return [a.lower() for _, a in getaddresses([str(v) for v in msg.get_all("To", [])]) if a]
