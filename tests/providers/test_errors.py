"""One HTTP-status mapping shared by every adapter."""

from __future__ import annotations

import pytest

from providers.errors import (
    ProviderAuthError,
    ProviderBadRequest,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
    error_for_status,
)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, ProviderBadRequest),
        (401, ProviderAuthError),
        (403, ProviderAuthError),
        (404, ProviderBadRequest),
        (408, ProviderTimeout),
        (422, ProviderBadRequest),
        (429, ProviderRateLimited),
        (500, ProviderUnavailable),
        (503, ProviderUnavailable),
        (504, ProviderTimeout),
        (529, ProviderUnavailable),
    ],
)
def test_error_for_status(status: int, kind: type) -> None:
    err = error_for_status(status, "boom", "p")
    assert type(err) is kind and (err.status, err.provider, str(err)) == (status, "p", "boom")
