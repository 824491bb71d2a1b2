"""The e-mail channel: a mailbox read by IMAP with IDLE and answered by SMTP, one chat per
thread (channel.py; reading and writing mail mail.py, the way out send.py). This module is the
channel's declaration, found through the `chatfn.channels` entry point `email`; it needs the
`email` extra (aioimaplib, aiosmtplib)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.email.settings import EmailSettings
from chatfn.channels.kit.declare import CHAT, asked, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: EmailSettings) -> Any:
    from chatfn.channels.email.channel import EmailChannel

    return EmailChannel(host, settings)


def offline(settings: EmailSettings) -> list[Probe]:
    return [
        Probe("ok", f"IMAP {settings.imap_url}, SMTP {settings.smtp_url} as {settings.address}")
    ]


async def online(settings: EmailSettings) -> list[Probe]:
    return [await imap_probe(settings), await smtp_probe(settings)]


#: Log in by IMAP and select the mailbox, then log out: the channel's own connect and close
#: (kit/probe.py). connect() reads by IMAP only: the SMTP login is smtp_probe's.
imap_probe = connects(build, "channel email IMAP login")


async def smtp_probe(settings: EmailSettings) -> Probe:
    """Connect and log in by SMTP (no mail sent)."""
    import aiosmtplib

    host, port, mode = settings.smtp_address()
    client = aiosmtplib.SMTP(
        hostname=host,
        port=port,
        use_tls=mode == "tls",
        start_tls=mode == "starttls",
        timeout=settings.connect_timeout,
    )

    async def ask() -> str:
        await client.connect()
        await client.login(settings.username, settings.secret_text("password"))
        return f"logged in to {settings.smtp_url}"

    def failed(exc: Exception) -> str | None:
        if isinstance(exc, aiosmtplib.SMTPAuthenticationError):
            return (
                f"SMTP server refused channels.email.username/password ({exc.code} {exc.message})"
            )
        if isinstance(exc, (aiosmtplib.SMTPException, OSError, TimeoutError)):
            return f"SMTP server not reachable at {settings.smtp_url} ({exc})"
        return None

    async def close() -> None:
        if client.is_connected:
            try:
                await client.quit()
            except aiosmtplib.SMTPException:
                client.close()

    return await asked("channel email SMTP login", ask, failed, close)


check = checks(offline, online)

SPEC = ChannelSpec(
    name="email",
    settings=EmailSettings,
    factory=build,
    summary="E-mail (IMAP IDLE in, SMTP out, one chat per thread)",
    extra="email",
    check=check,
    readme=readme(__file__),
    capabilities=replace(
        CHAT,
        groups=False,
        mentions=False,
        threads=True,
        confirm_stored=True,
        connection=("long connection",),
    ),
)
