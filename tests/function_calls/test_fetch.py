"""The fetch helper (chatfn/common/fetch.py), against a real local server that misbehaves:
internal addresses refused in every spelling, before connecting and at every redirect hop,
unless allowed; the deadline and the size limit end the download and close its connection;
a body sent in several writes is read whole."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from chatfn.common.fetch import (
    FetchFailed,
    FetchRefused,
    FetchStatus,
    FetchTooLarge,
    FetchTooSlow,
    FetchWrongType,
    fetch,
    is_internal,
)
from tests.fakes.images import png
from tests.fakes.slow_files import TWO_PARTS, SlowFiles
from tests.kit import until

LOOPBACK = ipaddress.ip_network("127.0.0.0/8")


@dataclass
class Allow:
    allow_hosts: list[str] = field(default_factory=list)
    allow_networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = field(
        default_factory=list
    )


LOCAL = Allow(allow_networks=[LOOPBACK])


@pytest.fixture
async def files() -> AsyncIterator[SlowFiles]:
    async with SlowFiles(interval=0.05) as server:
        yield server


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "localhost", "2130706433", "127.1", "0x7f.1", "0177.0.0.1", "[::ffff:127.0.0.1]"],
)
async def test_loopback_in_every_spelling_is_refused_before_connecting(
    files: SlowFiles, host: str
) -> None:
    port = files.url.rsplit(":", 1)[1]
    with pytest.raises(FetchRefused):
        await fetch(f"http://{host}:{port}/cat.png", max_bytes=10_000, timeout=5)
    assert files.requests == []  # nothing reached the server


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",  # the cloud metadata service
        "http://10.1.2.3/x.png",
        "http://192.168.0.1/x.png",
        "http://172.16.0.1/x.png",
        "http://100.100.100.200/latest/meta-data/",  # shared space (a cloud's metadata)
        "http://224.0.0.1/x.png",
        "http://0.0.0.0/x.png",
        "http://[::1]/x.png",
        "http://[fe80::1]/x.png",
        "http://[fd00::1]/x.png",
        "http://[64:ff9b::7f00:1]/x.png",  # NAT64 of 127.0.0.1
        "http://[2002:a00:1::]/x.png",  # 6to4 of 10.0.0.1
        "file:///etc/passwd",
        "ftp://example.com/x.png",
    ],
)
async def test_internal_addresses_and_other_schemes_are_refused(url: str) -> None:
    started = time.monotonic()
    with pytest.raises(FetchRefused):
        await fetch(url, max_bytes=10_000, timeout=5)
    assert time.monotonic() - started < 1  # refused, not tried


def test_public_addresses_are_not_internal() -> None:
    for text in ("1.1.1.1", "93.184.216.34", "2606:4700::1111", "::ffff:1.1.1.1"):
        assert not is_internal(ipaddress.ip_address(text)), text


async def test_allowed_networks_and_hosts_are_fetched(files: SlowFiles) -> None:
    got = await fetch(f"{files.url}/cat.png", allow=LOCAL, max_bytes=10_000, timeout=5)
    assert (got.data, got.content_type) == (png(), "image/png")
    port = files.url.rsplit(":", 1)[1]
    named = Allow(allow_hosts=["LocalHost"])
    got = await fetch(f"http://localhost:{port}/cat.png", allow=named, max_bytes=10_000, timeout=5)
    assert got.data == png()


async def test_every_redirect_hop_is_checked(files: SlowFiles) -> None:
    """An allowed host that redirects to an address that is not allowed: refused at the
    second hop, after the first answered."""
    port = files.url.rsplit(":", 1)[1]
    named = Allow(allow_hosts=["localhost"])
    for target in (f"{files.url}/cat.png", f"http://127.1:{port}/cat.png"):
        url = f"http://localhost:{port}/redirect?to={target}"
        with pytest.raises(FetchRefused):
            await fetch(url, allow=named, max_bytes=10_000, timeout=5)
    assert files.requests == [f"/redirect?to={files.url}/cat.png"] + [
        f"/redirect?to=http://127.1:{port}/cat.png"
    ]
    # allowed all the way: followed
    got = await fetch(f"{files.url}/redirect?to=/cat.png", allow=LOCAL, max_bytes=10_000, timeout=5)
    assert got.data == png() and got.url == f"{files.url}/cat.png"


async def test_a_redirect_loop_ends(files: SlowFiles) -> None:
    with pytest.raises(FetchFailed, match="more than 5 redirects"):
        await fetch(f"{files.url}/loop", allow=LOCAL, max_bytes=100, timeout=5)
    assert files.requests == ["/loop"] * 6


async def test_the_deadline_ends_a_trickle_and_closes_its_connection(files: SlowFiles) -> None:
    started = time.monotonic()
    with pytest.raises(FetchTooSlow):
        await fetch(f"{files.url}/trickle/1.png", allow=LOCAL, max_bytes=6_000_000, timeout=0.5)
    assert 0.45 < time.monotonic() - started < 1.5
    await until(lambda: files.dropped == 1 and files.trickling == 0, 3, "connection not closed")


async def test_the_size_limit_ends_an_endless_body(files: SlowFiles) -> None:
    with pytest.raises(FetchTooLarge):
        await fetch(f"{files.url}/endless", allow=LOCAL, max_bytes=1_000_000, timeout=5)
    await until(lambda: files.dropped == 1, 3, "connection not closed")
    # declared too large: refused before reading
    with pytest.raises(FetchTooLarge, match="declared"):
        await fetch(f"{files.url}/trickle/1.png", allow=LOCAL, max_bytes=1_000_000, timeout=5)


async def test_a_body_in_two_writes_is_read_whole(files: SlowFiles) -> None:
    got = await fetch(f"{files.url}/two-parts", allow=LOCAL, max_bytes=1_000_000, timeout=5)
    assert got.data == TWO_PARTS


async def test_status_type_and_network_errors_have_their_kinds(files: SlowFiles) -> None:
    with pytest.raises(FetchStatus) as status:
        await fetch(f"{files.url}/missing", allow=LOCAL, max_bytes=100, timeout=5)
    assert status.value.status == 404
    with pytest.raises(FetchWrongType):
        await fetch(
            f"{files.url}/page",
            allow=LOCAL,
            max_bytes=100,
            timeout=5,
            accept=lambda kind: kind.startswith("image/"),
        )
    await files.stop()
    with pytest.raises(FetchFailed):  # connection refused
        await fetch(f"{files.url}/cat.png", allow=LOCAL, max_bytes=100, timeout=5)
