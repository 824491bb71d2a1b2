"""The e-mail channel: a mailbox read by IMAP with IDLE and answered by SMTP, one chat per
thread (channel.py; reading and writing mail mail.py, the way out send.py). This module is the
channel's declaration, found through the `chatfn.channels` entry point `email`; it needs the
`email` extra (aioimaplib, aiosmtplib)."""

from __future__ import annotations

from typing import Any

from chatfn.channels.email.settings import EmailSettings
from chatfn.channels.kit import Capabilities
from chatfn.channels.kit.declare import readme
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: EmailSettings) -> Any:
    from chatfn.channels.email.channel import EmailChannel

    return EmailChannel(host, settings)


async def check(settings: EmailSettings, online: bool) -> list[Probe]:
    if (why := settings.problem()) is not None:
        return [Probe("fail", why)]
    probes = [
        Probe("ok", f"IMAP {settings.imap_url}, SMTP {settings.smtp_url} as {settings.address}")
    ]
    if online:
        probes += [await imap_probe(settings), await smtp_probe(settings)]
    return probes


async def imap_probe(settings: EmailSettings) -> Probe:
    """Log in by IMAP and select the mailbox."""
    from chatfn.channels.email.channel import ImapRefused, imap_login

    name = "channel email IMAP login"
    try:
        client = await imap_login(settings)
    except ImapRefused as exc:
        why = f"IMAP server refused channels.email.username/password ({exc})"
        return Probe("fail", why, name=name)
    except Exception as exc:  # noqa: BLE001 - any failure is the probe's answer
        return Probe(
            "fail", f"IMAP server not reachable at {settings.imap_url} ({exc!r})", name=name
        )
    try:
        await client.logout()
    except Exception:  # noqa: BLE001, S110 - logged in: that was the question
        pass
    return Probe("ok", f"logged in to {settings.imap_url}, {settings.mailbox} selected", name=name)


async def smtp_probe(settings: EmailSettings) -> Probe:
    """Connect and log in by SMTP (no mail sent)."""
    import aiosmtplib

    name = "channel email SMTP login"
    host, port, mode = settings.smtp_address()
    client = aiosmtplib.SMTP(
        hostname=host,
        port=port,
        use_tls=mode == "tls",
        start_tls=mode == "starttls",
        timeout=settings.connect_timeout,
    )
    try:
        await client.connect()
        await client.login(settings.username, settings.secret_text("password"))
    except aiosmtplib.SMTPAuthenticationError as exc:
        why = f"SMTP server refused channels.email.username/password ({exc.code} {exc.message})"
        return Probe("fail", why, name=name)
    except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
        return Probe("fail", f"SMTP server not reachable at {settings.smtp_url} ({exc})", name=name)
    finally:
        if client.is_connected:
            try:
                await client.quit()
            except aiosmtplib.SMTPException:
                client.close()
    return Probe("ok", f"logged in to {settings.smtp_url}", name=name)


SPEC = ChannelSpec(
    name="email",
    settings=EmailSettings,
    factory=build,
    summary="E-mail (IMAP IDLE in, SMTP out, one chat per thread)",
    extra="email",
    check=check,
    readme=readme(__file__),
    capabilities=Capabilities(
        dms=True,
        replies=True,
        images_in=True,
        images_out=True,
        voice_in=True,
        voice_out=True,
        threads=True,
        confirm_stored=True,
        connection=("long connection",),
    ),
)
