"""The kit's REST pieces (`kit.rest`, `kit.errors.ApiError`), tested on their own against a
real local aiohttp server: a `ChannelApi` call sends its path, query, body and headers and
hands the JSON answer (None: not JSON) to the platform's check; the platform's errors are
classified: refused credentials, a rate limit with the wait it named, a 5xx as passing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from chatfn.channels.kit.errors import ApiError
from chatfn.channels.kit.rest import (
    PASSING_ERRORS,
    BearerApi,
    ChannelApi,
    CodedError,
    HttpError,
    SendErrors,
    Unavailable,
    by_status,
    retry_after,
)
from chatfn.common.messages import (
    CredentialsRefused,
    DeliveryRefused,
    RateLimited,
    Unreachable,
)
from tests.channels.test_kit_errors import TinyApiError
from tests.kit import serve


class TinyApi(ChannelApi):
    """A platform that answers `{"code": 0, "data": ...}`, or its error code and message."""

    def __init__(self, settings: Any, session: aiohttp.ClientSession, port: int) -> None:
        super().__init__(settings, session)
        self.port = port

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bot {self.cfg.token}"}

    def answered(self, path: str, response: aiohttp.ClientResponse, body: Any) -> Any:
        if response.status >= 500 or not isinstance(body, dict):
            raise Unavailable(f"{path}: HTTP {response.status}")
        if response.status != 200 or body.get("code"):
            wait = retry_after(response.headers)
            raise TinyApiError(response.status, int(body.get("code", 0)), body.get("msg", ""), wait)
        return body.get("data")


async def handler(request: web.Request) -> web.StreamResponse:
    what = request.match_info["what"]
    seen = {
        "method": request.method,
        "query": dict(request.query),
        "auth": request.headers.get("Authorization", ""),
        "json": await request.json() if request.can_read_body else None,
    }
    if what == "echo":
        return web.json_response({"code": 0, "data": seen})
    if what == "empty":
        return web.Response(status=200)
    if what == "text":
        return web.Response(text="<html>gateway</html>")
    if what == "badtoken":
        return web.json_response({"code": 40001, "msg": "token invalid"})
    if what == "unauthorized":
        return web.json_response({"code": 0, "msg": "who are you"}, status=401)
    if what == "slow":
        return web.json_response(
            {"code": 45009, "msg": "too fast"}, status=429, headers={"Retry-After": "3"}
        )
    if what == "broken":
        return web.json_response({"code": 1, "msg": "oops"}, status=502)
    if what == "refused":
        body = {"code": 1234, "msg": "no such chat", "message": "no such chat"}
        return web.json_response(body, status=400)
    if what == "bearer-error":
        return web.json_response(
            {"error": {"code": "E1", "message": "nope"}}, status=403, headers={"retry-after": "2"}
        )
    raise web.HTTPNotFound()


@pytest.fixture
async def port() -> AsyncIterator[int]:
    app = web.Application()
    app.router.add_route("*", "/api/{what}", handler)
    runner, bound = await serve(app)
    yield bound
    await runner.cleanup()


@pytest.fixture
async def api(port: int) -> AsyncIterator[TinyApi]:
    async with aiohttp.ClientSession() as session:
        yield TinyApi(SimpleNamespace(token="s3cret"), session, port)


async def test_a_call_sends_its_path_query_body_and_headers(api: TinyApi) -> None:
    seen = await api.call("POST", "/echo", params={"a": "1"}, json={"text": "hi"})
    assert seen == {
        "method": "POST",
        "query": {"a": "1"},
        "auth": "Bot s3cret",
        "json": {"text": "hi"},
    }


async def test_an_empty_or_non_json_answer_is_handed_over_as_none(api: TinyApi) -> None:
    for path in ("/empty", "/text"):
        with pytest.raises(Unavailable, match=f"{path}: HTTP 200"):
            await api.call("GET", path)


async def test_a_platform_code_of_refused_credentials_is_auth(api: TinyApi) -> None:
    with pytest.raises(TinyApiError) as raised:
        await api.call("GET", "/badtoken")
    err = raised.value
    assert (err.status, err.code, err.message) == (200, 40001, "token invalid")
    assert str(err) == "HTTP 200, code 40001: token invalid"
    assert err.is_auth and not err.is_rate_limit


async def test_http_401_is_auth_whatever_the_code(api: TinyApi) -> None:
    with pytest.raises(TinyApiError) as raised:
        await api.call("GET", "/unauthorized")
    assert raised.value.is_auth
    assert str(raised.value) == "HTTP 401: who are you"


async def test_a_rate_limit_carries_the_wait_it_named(api: TinyApi) -> None:
    with pytest.raises(TinyApiError) as raised:
        await api.call("GET", "/slow")
    assert raised.value.is_rate_limit and not raised.value.is_auth
    assert raised.value.retry_after == 3.0


async def test_a_5xx_is_passing_trouble(api: TinyApi) -> None:
    with pytest.raises(PASSING_ERRORS):
        await api.call("GET", "/broken")


async def test_a_refusal_is_neither_auth_nor_a_rate_limit(api: TinyApi) -> None:
    with pytest.raises(TinyApiError) as raised:
        await api.call("GET", "/refused")
    assert not raised.value.is_auth and not raised.value.is_rate_limit
    assert str(raised.value) == "HTTP 400, code 1234: no such chat"


def test_api_error_text_and_rate_code() -> None:
    assert str(ApiError(500, 0, "")) == "HTTP 500"
    assert TinyApiError(200, 45009, "slow").is_rate_limit
    assert TinyApiError(200, 0, "", retry_after=1.0).is_rate_limit
    assert not ApiError(200, 40001, "x").is_auth  # the platform's codes, not the kit's


def test_coded_error_text() -> None:
    err = CodedError(7, "bad chat", 400)
    assert str(err) == "7: bad chat" and (err.code, err.msg, err.status) == (7, "bad chat", 400)
    assert str(CodedError(0, "no code")) == "no code"


def test_unavailable_and_the_network_are_passing() -> None:
    for exc in (Unavailable("busy"), aiohttp.ClientError(), OSError(), TimeoutError()):
        assert isinstance(exc, PASSING_ERRORS)
    assert not isinstance(CodedError(1, "x"), PASSING_ERRORS)


def test_retry_after_reads_the_first_number_in_any_case() -> None:
    assert retry_after({"retry-after": "2.5"}) == 2.5
    assert retry_after({"Retry-After": ["4"]}) == 4.0
    assert retry_after({"Retry-After": "-1"}) == 0.0
    assert retry_after({"Retry-After": "soon"}) is None
    assert retry_after(None) is None
    assert retry_after({"X-Wait": "1", "Retry-After": "9"}, ("x-wait", "retry-after")) == 1.0


def test_by_status_classifies_a_send() -> None:
    texts = {"rate": "r", "refused": "c", "failing": "f", "rejected": "x"}
    slow = by_status(429, 5.0, **texts)
    assert isinstance(slow, RateLimited) and slow.retry_after == 5.0
    assert isinstance(by_status(401, None, **texts), CredentialsRefused)
    for status in (500, 503, 0):
        assert isinstance(by_status(status, None, **texts), Unreachable)
    refused = by_status(403, None, **texts)
    assert isinstance(refused, DeliveryRefused) and str(refused) == "x"


def test_send_errors_classify_the_clients_and_the_networks_errors() -> None:
    errors = SendErrors(HttpError, "the Tiny server", "channels.tiny.token")
    limited = errors.for_send(HttpError(429, "", "slow", 2.0), "c1")
    assert isinstance(limited, RateLimited) and limited.retry_after == 2.0
    auth = errors.for_send(HttpError(401, "", "bad"), "c1")
    assert isinstance(auth, CredentialsRefused)
    assert str(auth) == "the Tiny server refused channels.tiny.token (HTTP 401: bad)"
    net = errors.for_send(OSError("down"), "c1", "http://h")
    assert isinstance(net, Unreachable) and "not reachable at http://h" in str(net)
    assert errors.for_send(KeyError("bug"), "c1") is None
    login = errors.for_connect(HttpError(403, "", "no"), "/login", fix="set it")
    assert isinstance(login, CredentialsRefused) and str(login).endswith(": set it")
    assert isinstance(errors.for_connect(HttpError(502, "", "gw"), "/login"), Unreachable)
    bug = KeyError("bug")
    assert errors.for_connect(bug, "/login") is bug


class TinyBearer(BearerApi):
    token_key = "key"


class Settings:
    def secret_text(self, name: str) -> str:
        return f"<{name}>"


async def test_bearer_api_sends_the_token_and_reads_json(port: int) -> None:
    api = TinyBearer(Settings())
    try:
        url = f"http://127.0.0.1:{port}/api"
        seen = await api.json_call("PUT", f"{url}/echo", json={"x": 1})
        assert seen["data"]["auth"] == "Bearer <key>"
        assert await api.json_call("GET", f"{url}/empty") is None
        with pytest.raises(HttpError) as raised:
            await api.json_call("GET", f"{url}/text")
        assert str(raised.value) == "HTTP 200: an answer that is not JSON"
        with pytest.raises(HttpError) as raised:
            await api.json_call("GET", f"{url}/refused")
        assert (raised.value.status, raised.value.code) == (400, "1234")
        assert raised.value.message == "no such chat"
        with pytest.raises(HttpError) as raised:
            await api.json_call("GET", f"{url}/bearer-error")
        assert (raised.value.status, raised.value.retry_after) == (403, 2.0)
    finally:
        await api.aclose()


def test_http_error_answered_reads_code_and_message() -> None:
    err = HttpError.answered(
        403, b'{"error": {"code": "E1", "message": "nope"}}', 2.0, under="error"
    )
    assert (err.status, err.code, err.message, err.retry_after) == (403, "E1", "nope", 2.0)
    assert str(err) == "HTTP 403 E1: nope"
    plain = HttpError.answered(502, b"<html>bad gateway</html>", None)
    assert (plain.code, plain.message) == ("", "<html>bad gateway</html>")
