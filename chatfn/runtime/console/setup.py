"""The console's first run (issue 39): with no `admin.users` configured, the bot prints a
one-time link (its start-up lines, `chatfn check`) holding a setup token; the page it opens
makes the first `owner` user, written to config.yaml. The token lasts an hour and one use.

The token is kept in `.chatfn-setup.json` beside the config file (mode 0600), so the running bot
and `chatfn check` print the same link; it is removed once the owner exists."""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import re
import secrets
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chatfn.runtime.console import config_file
from chatfn.runtime.console.errors import ConsoleError

if TYPE_CHECKING:
    from chatfn.runtime.settings import Settings

LIFETIME = timedelta(hours=1)
FILE = ".chatfn-setup.json"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_owner_lock = threading.Lock()


def needed(settings: Settings) -> bool:
    return not settings.admin.users


def _file(settings: Settings) -> Path:
    return config_file.config_path(settings).parent / FILE


def _read(settings: Settings) -> tuple[str, datetime] | None:
    try:
        kept = json.loads(_file(settings).read_text(encoding="utf-8"))
        return str(kept["token"]), datetime.fromisoformat(kept["expires_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def token(settings: Settings, now: datetime | None = None) -> tuple[str, datetime]:
    """The setup token and when it expires: the one kept while it lasts, else a new one."""
    now = now or datetime.now(UTC)
    kept = _read(settings)
    if kept is not None and kept[1] > now:
        return kept
    made = secrets.token_urlsafe(32), now + LIFETIME
    path = _file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump({"token": made[0], "expires_at": made[1].isoformat()}, out)
    return made


def valid(settings: Settings, given: str, now: datetime | None = None) -> bool:
    """Whether `given` is the unexpired, unused setup token (and no user exists yet)."""
    kept = _read(settings)
    if not needed(settings) or kept is None or not given:
        return False
    if kept[1] <= (now or datetime.now(UTC)):
        return False
    return hmac.compare_digest(given.encode(errors="replace"), kept[0].encode())


def link(settings: Settings, base_url: str) -> str:
    """`<base_url>/admin/setup?token=...` (a new token when the last one expired)."""
    return f"{base_url.rstrip('/')}/admin/setup?token={token(settings)[0]}"


def base_url(settings: Settings, port: int | None = None) -> str:
    http = getattr(settings.channels, "http", None)
    host = str(getattr(http, "host", "127.0.0.1") or "127.0.0.1")
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return f"http://{host}:{port or getattr(http, 'port', 8080)}"


def create_owner(settings: Settings, name: str, password_hash: str, given: str) -> Any:
    """Writes `admin.users.<name>` (role owner) to config.yaml, validated with the whole file,
    puts the user in the running settings and spends the token `given` (checked again here,
    under a lock: two forms sent at once make one owner). Returns the new AdminUser."""
    if not NAME.match(name):
        raise ConsoleError(400, "username: letters, digits, _ . - (at most 64)", "username")
    with _owner_lock:
        if not valid(settings, given):
            raise ConsoleError(403, "this setup link is used or expired: sign in")
        new = config_file.change(
            settings,
            [(("admin", "users", name), {"password_hash": password_hash, "role": "owner"})],
        )
        user = new.admin.users[name]
        settings.admin.users[name] = user
        with contextlib.suppress(OSError):
            _file(settings).unlink()
    return user
