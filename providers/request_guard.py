"""Real model requests refused while tests run, unless a test opts in.

A test suite talks to fake model servers on loopback (tests/fakes/cassette.py and the like). A
request that would leave the machine (a config that forgot its `base_url`, an environment with
`OPENAI_BASE_URL` or an API key set) costs money, needs the network and makes the test depend
on a model's mood; it should fail loudly instead, before anything is sent. chatfn's pytest
plugin (chatfn/testing.py) turns this guard on around every test, as pydantic-ai does with its
`ALLOW_MODEL_REQUESTS` flag; outside tests it is off and costs one boolean test per request.

Checked in `ServerModel.complete` / `stream` (providers/base.py), the one boundary every
adapter that talks to a server (OpenAI-compatible, Anthropic, Gemini) goes through, against the
address the SDK client will actually send to. Loopback (`localhost`, 127.0.0.0/8, ::1) is
always let through: that is where tests run their fake servers. Names are not resolved, so the
check never touches the network.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

#: How a test or a suite opts in, named in every refusal.
OPT_IN = (
    "mark the test @pytest.mark.allow_model_requests, or allow a whole run with "
    "`chatfn_allow_model_requests = true` (pytest ini options) or "
    "CHATFN_ALLOW_MODEL_REQUESTS=1"
)


class ModelRequestRefused(RuntimeError):
    """A real model request (to a host that is not loopback) while the guard is on.

    Not a ProviderError on purpose: the bot turns those into a polite reply or a fallback
    model, and a refused request must fail the test, not pass for an unavailable model."""


@dataclass
class _Guard:
    refusing: bool = False
    #: What was refused since the guard was turned on: the test plugin fails the test with it
    #: even when the bot caught the exception (a turn's failure becomes a reply).
    refused: list[str] = field(default_factory=list)


_guard = _Guard()


@contextlib.contextmanager
def refusing_model_requests(refuse: bool = True) -> Iterator[list[str]]:
    """Refuse real model requests inside (or, with `refuse=False`, allow them even inside an
    outer refusal); yields the list of refusals (one line each)."""
    previous = (_guard.refusing, _guard.refused)
    _guard.refusing, _guard.refused = refuse, []
    try:
        yield _guard.refused
    finally:
        _guard.refusing, _guard.refused = previous


def is_loopback_host(host: str) -> bool:
    """`localhost` (and names under it, RFC 6761) or a loopback IP literal. Not resolved."""
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_model_request(model: str, endpoint: str) -> None:
    """Raise ModelRequestRefused when the guard is on and `endpoint` (the base URL the
    request goes to) is not on loopback."""
    if not _guard.refusing:
        return
    host = urlsplit(endpoint).hostname or ""
    if is_loopback_host(host):
        return
    line = f"model {model!r}: a real model request to {endpoint} during a test"
    _guard.refused.append(line)
    raise ModelRequestRefused(f"{line} (only loopback servers are allowed); to send it, {OPT_IN}")
