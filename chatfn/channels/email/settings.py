"""`channels.email:`: the e-mail channel's settings: issue 36's keys `imap_url`, `smtp_url`,
`username`, `password`, `address` and `allowed_senders`."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from chatfn.channels.kit.settings import PlatformSettings

_IMAP = {"imaps": 993, "imap": 143}
_SMTP = {"smtps": 465, "smtp": 587, "smtp+plain": 25}


def _url(v: str, schemes: dict[str, int], example: str) -> str:
    parts = urlsplit(v)
    if parts.scheme not in schemes or not parts.hostname or parts.path not in ("", "/"):
        raise ValueError(f"expected a URL like {example}, got {v!r}")
    return v


class EmailSettings(PlatformSettings, send_rate=0.5):
    """A mailbox for the bot: read by IMAP (`imap_url`: `imaps://host[:993]`, or `imap://`
    unencrypted for a server on the same machine), written by SMTP (`smtp_url`:
    `smtps://host[:465]`, `smtp://host[:587]` with STARTTLS, or `smtp+plain://` unencrypted),
    one login (`username`, `password`) for both, mail sent as `address`, answered only when
    from `allowed_senders` (addresses, or domains as `example.org` / `@example.org`)."""

    # Where mail is read: imaps://host[:993] (or imap:// on the same machine).
    imap_url: str = ""
    # Where mail is sent: smtps://host[:465], smtp://host[:587] (STARTTLS) or smtp+plain://.
    smtp_url: str = ""
    # The login for both IMAP and SMTP.
    username: str = ""
    # Its password (`${VAR}` keeps it out of the file).
    password: SecretStr | None = None
    # The bot's address: the From of its mail.
    address: str = ""
    # Senders answered: addresses, or domains (`example.org` / `@example.org`); others' mail
    # is left alone.
    allowed_senders: list[str] = Field(default_factory=list)
    # The IMAP folder read.
    mailbox: str = "INBOX"
    # Seconds an IMAP IDLE lasts before it is renewed (RFC 2177: under 29 minutes).
    idle_timeout: float = Field(default=600.0, ge=5, le=1740)
    # The name shown in From.
    display_name: str = ""
    # Seconds to connect and log in to either server.
    connect_timeout: float = Field(default=30.0, gt=0)

    @field_validator("imap_url")
    @classmethod
    def _imap(cls, v: str) -> str:
        return _url(v, _IMAP, "imaps://imap.example.org") if v else v

    @field_validator("smtp_url")
    @classmethod
    def _smtp(cls, v: str) -> str:
        return _url(v, _SMTP, "smtps://smtp.example.org") if v else v

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        v = v.strip()
        if v and ("@" not in v or " " in v):
            raise ValueError(f"expected an address like bot@example.org, got {v!r}")
        return v.lower()

    @field_validator("allowed_senders")
    @classmethod
    def _allowed(cls, v: list[str]) -> list[str]:
        out = []
        for item in v:
            item = item.strip().lower()
            if not item or " " in item or "." not in item.rsplit("@", 1)[-1]:
                raise ValueError(f"expected an address or a domain, got {item!r}")
            out.append(item)
        return out

    def problem(self) -> str | None:
        for key in ("imap_url", "smtp_url", "username", "address"):
            if not getattr(self, key):
                return f"channels.email.{key} is not set"
        if self.password is None:
            return "channels.email.password is not set"
        if not self.allowed_senders:
            return (
                "channels.email.allowed_senders is empty: list the addresses or domains whose "
                "mail the bot answers (anyone can send mail)"
            )
        return None

    def imap_address(self) -> tuple[str, int, bool]:
        parts = urlsplit(self.imap_url)
        return parts.hostname or "", parts.port or _IMAP[parts.scheme], parts.scheme == "imaps"

    def smtp_address(self) -> tuple[str, int, str]:
        """(host, port, "tls" | "starttls" | "plain")."""
        parts = urlsplit(self.smtp_url)
        mode = {"smtps": "tls", "smtp": "starttls", "smtp+plain": "plain"}[parts.scheme]
        return parts.hostname or "", parts.port or _SMTP[parts.scheme], mode

    def allows(self, sender: str) -> bool:
        sender = sender.lower()
        domain = sender.rsplit("@", 1)[-1]
        return any(
            sender == a or domain == a.lstrip("@") or domain.endswith("." + a.lstrip("@"))
            for a in self.allowed_senders
        )
