"""The kit's one family of "the platform answered a call with an error" (`kit.errors`):
`ApiError`, `HttpError` and `CodedError` share `PlatformError`'s fields and classification
(refused credentials, a rate limit) and differ only in their text and the code's type; and
`ErrorKinds.for_send` (kit.classify) reads any member of the family the same way."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from chatfn.channels.kit import rest
from chatfn.channels.kit.classify import ErrorKinds
from chatfn.channels.kit.errors import ApiError, CodedError, HttpError, PlatformError
from chatfn.common.messages import (
    CredentialsRefused,
    DeliveryRefused,
    RateLimited,
    Unreachable,
)


class TinyApiError(ApiError):
    auth_codes = frozenset({40001})
    rate_codes = frozenset({45009})


class TinyHttpError(HttpError):
    auth_codes = frozenset({"token_expired"})
    rate_codes = frozenset({"slow_down"})


class TinyCodedError(CodedError):
    auth_codes = frozenset({40014})
    rate_codes = frozenset({45011})


KINDS = ErrorKinds("Tiny", "channels.tiny.token", (), (PlatformError,), (OSError,))


def test_the_three_are_one_family() -> None:
    for kind in (ApiError, HttpError, CodedError):
        assert issubclass(kind, PlatformError)
    # rest names the same classes it always named
    assert rest.HttpError is HttpError and rest.CodedError is CodedError


def test_each_members_text() -> None:
    assert str(ApiError(401, 5, "bad token")) == "HTTP 401, code 5: bad token"
    assert str(ApiError(500, 0, "")) == "HTTP 500"
    assert str(ApiError(400, 0, "no chat")) == "HTTP 400: no chat"
    assert str(HttpError(401, "api.token", "bad token")) == "HTTP 401 api.token: bad token"
    assert str(HttpError(502, "", "gw")) == "HTTP 502: gw"
    assert str(HttpError(0, "", "file too large")) == "HTTP 0: file too large"
    assert str(CodedError(5, "bad token")) == "5: bad token"
    assert str(CodedError(0, "no code", 400)) == "no code"


@pytest.mark.parametrize(
    ("err", "status", "code", "message", "wait"),
    [
        (ApiError(429, 7, "slow", 2.0), 429, 7, "slow", 2.0),
        (HttpError(429, "limited", "slow", 2.0), 429, "limited", "slow", 2.0),
        (CodedError(7, "slow", 429, 2.0), 429, 7, "slow", 2.0),
    ],
)
def test_the_same_fields(
    err: PlatformError[int] | PlatformError[str],
    status: int,
    code: int | str,
    message: str,
    wait: float,
) -> None:
    assert (err.status, err.code, err.message, err.retry_after) == (status, code, message, wait)


def test_coded_error_keeps_its_order_and_msg() -> None:
    err = CodedError(7, "bad chat", 400)
    assert (err.code, err.msg, err.message, err.status, err.retry_after) == (
        7,
        "bad chat",
        "bad chat",
        400,
        None,
    )
    assert CodedError(7, "x").status == 200


@pytest.mark.parametrize(
    ("auth", "rate", "plain"),
    [
        (TinyApiError(200, 40001, "a"), TinyApiError(200, 45009, "r"), TinyApiError(400, 1, "p")),
        (
            TinyHttpError(200, "token_expired", "a"),
            TinyHttpError(200, "slow_down", "r"),
            TinyHttpError(400, "bad", "p"),
        ),
        (TinyCodedError(40014, "a"), TinyCodedError(45011, "r"), TinyCodedError(1, "p", 400)),
    ],
)
def test_one_classification_for_every_member(
    auth: PlatformError[int] | PlatformError[str],
    rate: PlatformError[int] | PlatformError[str],
    plain: PlatformError[int] | PlatformError[str],
) -> None:
    assert auth.is_auth and not auth.is_rate_limit
    assert rate.is_rate_limit and not rate.is_auth
    assert not plain.is_auth and not plain.is_rate_limit


def test_http_401_and_429_whatever_the_code_and_the_codes_are_the_platforms() -> None:
    assert ApiError(401, 0, "").is_auth and ApiError(429, 0, "").is_rate_limit
    assert HttpError(401, "", "").is_auth and HttpError(429, "", "").is_rate_limit
    assert CodedError(0, "", 401).is_auth and CodedError(0, "", 429).is_rate_limit
    assert not ApiError(200, 40001, "").is_auth  # the platform's codes, not the kit's
    assert not HttpError(200, "slow_down", "").is_rate_limit
    assert not CodedError(40014, "").is_auth


def test_a_wait_named_is_a_limit_for_every_member() -> None:
    waits = (ApiError(200, 0, "", 1.0), HttpError(200, "", "", 1.0), CodedError(0, "", 200, 1.0))
    for err in waits:
        assert err.is_rate_limit


def _api(status: int, wait: float | None = None) -> PlatformError[int]:
    return ApiError(status, 3, "no", wait)


def _http(status: int, wait: float | None = None) -> PlatformError[str]:
    return HttpError(status, "no", "no", wait)


def _coded(status: int, wait: float | None = None) -> PlatformError[int]:
    return CodedError(3, "no", status, wait)


@pytest.mark.parametrize("build", [_api, _http, _coded])
def test_error_kinds_read_every_member(
    build: Callable[..., PlatformError[int] | PlatformError[str]],
) -> None:
    limited = KINDS.for_send(build(429, 3.0), "c1")
    assert isinstance(limited, RateLimited) and limited.retry_after == 3.0
    assert str(limited).startswith("Tiny rate limit sending to c1 (")
    auth = KINDS.for_send(build(401), "c1")
    assert isinstance(auth, CredentialsRefused)
    assert str(auth).startswith("Tiny refused channels.tiny.token (")
    failing = KINDS.for_send(build(503), "c1")
    assert isinstance(failing, Unreachable) and str(failing).startswith("Tiny answered ")
    refused = KINDS.for_send(build(400), "c1")
    assert isinstance(refused, DeliveryRefused)
    assert str(refused).startswith("Tiny refused the message to c1: ")
    assert KINDS.for_send(KeyError("bug"), "c1") is None
