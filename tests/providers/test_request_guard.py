"""Real model requests are refused in tests unless a test opts in (providers/request_guard.py,
turned on by the chatfn pytest plugin): refused before anything is sent, so no network is
needed to prove it. The requests here go to an httpx mock transport, never a socket."""

from __future__ import annotations

import textwrap

import httpx2
import pytest
from openai import AsyncOpenAI, DefaultAsyncHttpx2Client

from chatfn.testing import ModelRequestRefused
from providers.config import ModelConfig
from providers.factory import build_model
from providers.openai_compat import OpenAICompatModel
from providers.request_guard import check_model_request, is_loopback_host
from providers.types import Message

pytest_plugins = ["pytester"]

HELLO = [Message(role="user", content="hi")]
COMPLETION = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
}


def mocked(base_url: str, seen: list[str]) -> OpenAICompatModel:
    """An OpenAI model whose client says `base_url` and answers from memory (no socket)."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(str(request.url))
        return httpx2.Response(200, json=COMPLETION)

    http = DefaultAsyncHttpx2Client(transport=httpx2.MockTransport(answer))
    client = AsyncOpenAI(api_key="k", base_url=base_url, http_client=http, max_retries=0)
    cfg = ModelConfig(provider="openai", model="gpt-4o-mini", api_key="k", base_url=base_url)
    return OpenAICompatModel("main", cfg, client=client)


async def test_a_request_to_a_real_host_is_refused_before_it_is_sent(
    chatfn_model_request_guard: list[str],
) -> None:
    seen: list[str] = []
    model = mocked("https://api.openai.com/v1", seen)
    with pytest.raises(ModelRequestRefused, match="allow_model_requests") as refused:
        await model.complete(HELLO)
    with pytest.raises(ModelRequestRefused):
        [e async for e in model.stream(HELLO)]
    assert "https://api.openai.com/v1" in str(refused.value)
    assert "CHATFN_ALLOW_MODEL_REQUESTS" in str(refused.value)
    assert seen == []  # nothing left the process
    assert len(chatfn_model_request_guard) == 2
    chatfn_model_request_guard.clear()  # refused on purpose: not a failure of this test


@pytest.mark.allow_model_requests
async def test_a_test_that_opts_in_sends_it() -> None:
    seen: list[str] = []
    model = mocked("https://api.openai.com/v1", seen)
    response = await model.complete(HELLO)
    assert response.content == "hi"
    assert seen == ["https://api.openai.com/v1/chat/completions"]


async def test_loopback_servers_are_let_through() -> None:
    for url in ("http://127.0.0.1:8000/v1", "http://localhost:1/v1", "http://[::1]:9/v1"):
        seen: list[str] = []
        assert (await mocked(url, seen).complete(HELLO)).content == "hi"
        assert seen == [f"{url}/chat/completions"]


@pytest.mark.parametrize(
    ("provider", "env"),
    [("openai", "OPENAI_BASE_URL"), ("anthropic", "ANTHROPIC_BASE_URL"), ("gemini", "")],
)
async def test_every_adapter_checks_where_its_client_sends(
    provider: str,
    env: str,
    monkeypatch: pytest.MonkeyPatch,
    chatfn_model_request_guard: list[str],
) -> None:
    """The SDK's default host (no base_url in config) is refused, for each provider; the
    address is the client's own, so an environment variable pointing it at loopback counts."""
    if env:
        monkeypatch.delenv(env, raising=False)
    model = build_model("m", ModelConfig(provider=provider, model="x", api_key="k"))
    with pytest.raises(ModelRequestRefused, match="during a test"):
        await model.complete(HELLO)
    assert len(chatfn_model_request_guard) == 1
    chatfn_model_request_guard.clear()
    if env:
        monkeypatch.setenv(env, "http://127.0.0.1:9/v1")
        local = build_model("m", ModelConfig(provider=provider, model="x", api_key="k"))
        inner = getattr(local, "inner", local)  # under the prompt-tools wrapper, if any
        check_model_request("m", inner.endpoint())


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST.", True),
        ("api.localhost", True),
        ("10.0.0.1", False),
        ("192.168.1.5", False),
        ("api.openai.com", False),
        ("localhost.evil.com", False),
        ("", False),
    ],
)
def test_loopback_is_judged_without_resolving(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


@pytest.mark.allow_model_requests  # the inner run's guard is what is tested; ours stays out
def test_the_plugin_opt_ins(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a suite with chatfn installed: refused and the test failed (even when the code under
    test swallowed the exception); the marker, the ini option and the environment allow."""
    pytester.makepyfile(
        test_inner=textwrap.dedent(
            """
            import pytest
            from providers.request_guard import check_model_request

            def send():
                check_model_request("m", "https://api.example.com/v1")

            def test_refused():
                send()

            def test_swallowed():
                try:
                    send()
                except RuntimeError:
                    pass  # a bot turning the failure into a reply

            @pytest.mark.allow_model_requests
            def test_marked():
                send()
            """
        )
    )
    args = [
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
    ]
    monkeypatch.delenv("CHATFN_ALLOW_MODEL_REQUESTS", raising=False)
    result = pytester.runpytest_inprocess(*args)
    result.assert_outcomes(passed=2, failed=1, errors=1)  # swallowed: failed at teardown
    result.stdout.fnmatch_lines(["*ModelRequestRefused*api.example.com*allow_model_requests*"])
    result.stdout.fnmatch_lines(["*1 real model request(s) refused*"])

    result = pytester.runpytest_inprocess(*args, "-o", "chatfn_allow_model_requests=true")
    result.assert_outcomes(passed=3)

    monkeypatch.setenv("CHATFN_ALLOW_MODEL_REQUESTS", "1")
    result = pytester.runpytest_inprocess(*args)
    result.assert_outcomes(passed=3)
