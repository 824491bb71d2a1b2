"""Logging the Matrix channel in: the access token checked with /account/whoami (and that
it is `user_id`'s), or a password login for `device_id` whose token is kept in the store and
used next time (a new device on every start would lose the transaction-id scope that keeps a
resend from posting twice). The AsyncClient is made here too, with nio's own retries off."""

from __future__ import annotations

from nio import AsyncClient, AsyncClientConfig, LoginResponse, WhoamiResponse

from chatfn.channels import kit
from chatfn.channels.matrix.settings import MatrixSettings
from chatfn.channels.matrix.store import SyncStore

__all__ = ["AUTH_ERRORS", "login", "make_client"]

AUTH_ERRORS = {"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN", "M_FORBIDDEN", "M_USER_DEACTIVATED"}


def make_client(settings: MatrixSettings) -> AsyncClient:
    """An AsyncClient that hands every error back instead of retrying on its own: the
    channel and the sender decide what a 429 or a dropped connection means."""
    config = AsyncClientConfig(
        max_limit_exceeded=0,
        max_timeouts=0,
        request_timeout=60,
        encryption_enabled=False,
        store_sync_tokens=False,
    )
    return AsyncClient(
        settings.homeserver or "",
        settings.user_id or "",
        device_id=settings.device_id,
        config=config,
    )


async def login(client: AsyncClient, cfg: MatrixSettings, store: SyncStore) -> str:
    """Logged in (who and which device, the channel's start-up line), or CredentialsRefused
    (the homeserver refused us: the line says what to fix) or Unreachable."""
    user_id = cfg.user_id or ""
    refused = f"Matrix refused the login of {user_id}: "
    token = cfg.secret_text("access_token") or str(store.data.get("access_token") or "")
    if token:
        client.access_token = token
        client.user_id = user_id
        whoami = await client.whoami()
        if isinstance(whoami, WhoamiResponse):
            if whoami.user_id != user_id:
                raise kit.CredentialsRefused(
                    f"{refused}channels.matrix.access_token belongs to {whoami.user_id}, not "
                    f"channels.matrix.user_id {user_id}"
                )
            if whoami.device_id:
                client.device_id = whoami.device_id
            return f"{user_id} (device {client.device_id}) on {cfg.homeserver}"
        code = str(whoami.status_code or "")
        if code not in AUTH_ERRORS:
            why = f"{code or whoami.transport_response}: {whoami.message}"
            raise kit.Unreachable(f"Matrix homeserver whoami failed ({why})")
        if cfg.access_token is not None or cfg.password is None:
            raise kit.CredentialsRefused(
                f"{refused}channels.matrix.access_token was refused ({code}: {whoami.message});"
                " log in again and put the new token there"
            )
        await store.save(access_token=None)  # a kept token that expired: log in again
    login = await client.login(cfg.secret_text("password"), device_name="chatfn")
    if not isinstance(login, LoginResponse):
        code = str(login.status_code or "")
        why = f"password login failed ({code}: {login.message})"
        if code in AUTH_ERRORS:
            raise kit.CredentialsRefused(
                f"{refused}{why}; check channels.matrix.user_id and channels.matrix.password"
            )
        raise kit.Unreachable(f"Matrix homeserver {why}")
    await store.save(access_token=login.access_token, device_id=login.device_id)
    return f"logged in as {user_id} (device {login.device_id}) on {cfg.homeserver}"
