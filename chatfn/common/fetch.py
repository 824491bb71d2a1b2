"""The one door for every fetch the bot makes on a user's behalf: an image URL in a message, a
knowledge source added with `/kb add`, any media a plugin downloads from a URL it was given.

    from function_calls import fetch, FetchError   # the plugin API's names for it
    got = await fetch(url, allow=ctx.config.bot.fetch, max_bytes=5_000_000, timeout=10)

The URL is the user's, so the fetch is bounded on every side, and each bound frees what it holds
when it is reached (the read is asynchronous: no thread is left behind):

- Addresses: loopback, private, link-local (169.254.169.254, the cloud metadata service),
  shared (100.64/10), multicast, unspecified and reserved addresses are refused, an IPv4 address
  inside an IPv6 one (`::ffff:127.0.0.1`, 6to4, NAT64) judged as itself. The check is on the
  addresses actually connected to: a literal in the URL (odd forms too: `2130706433`, `127.1`,
  `0x7f.1`) before connecting, a name by the connection's own resolver, which hands aiohttp
  only the addresses it allows (nothing is resolved twice, so there is no DNS-rebinding window),
  and again at every redirect hop. `bot.fetch.allow_hosts` and `bot.fetch.allow_networks` let
  named hosts or networks through, for deployments whose media is internal. No proxy from the
  environment is used: a proxy would resolve the name itself.
- Time: one deadline (`timeout` seconds) over the lookups, connects, redirects and the read.
- Size: a Content-Length over `max_bytes` is refused before reading; the read loop counts what
  arrives and stops as soon as it passes `max_bytes`. A body sent in several writes is read to
  its end.
- Redirects: followed here, at most `MAX_REDIRECTS`, http and https only.

Errors are `FetchError`s of a few kinds, so a caller answers with one short sentence. A refused
address and a connection refused get the same answer from the built-ins, so replies do not tell
an internal port that is open from one that is closed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import aiohttp
from aiohttp.abc import AbstractResolver
from yarl import URL

from chatfn.common.blocking import getaddrinfo

if TYPE_CHECKING:  # a TypedDict from aiohttp 3.10 on; at run time these are plain dicts
    from aiohttp import web
    from aiohttp.abc import ResolveResult

__all__ = [
    "MAX_REDIRECTS",
    "FetchAllow",
    "FetchError",
    "FetchFailed",
    "FetchRefused",
    "FetchStatus",
    "FetchTooLarge",
    "FetchTooSlow",
    "FetchWrongType",
    "Fetched",
    "IPNetwork",
    "fetch",
    "is_internal",
    "read_limited",
]

MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class FetchError(Exception):
    """A fetch that gave nothing usable; `url` is the URL that was asked for."""

    def __init__(self, url: str, detail: str) -> None:
        super().__init__(f"{detail} ({url[:200]})")
        self.url = url
        self.detail = detail


class FetchRefused(FetchError):
    """The address is one the bot does not fetch for users (internal), or not http(s)."""


class FetchTooLarge(FetchError):
    """The body is (or says it is) larger than `max_bytes`."""


class FetchTooSlow(FetchError):
    """The whole fetch did not finish within its `timeout`."""


class FetchStatus(FetchError):
    """The server answered with an HTTP error status (`status`)."""

    def __init__(self, url: str, status: int) -> None:
        super().__init__(url, f"HTTP {status}")
        self.status = status


class FetchWrongType(FetchError):
    """The Content-Type is not one the caller accepts (`content_type` says which it was)."""

    def __init__(self, url: str, content_type: str) -> None:
        super().__init__(url, f"content type {content_type!r}")
        self.content_type = content_type


class FetchFailed(FetchError):
    """The network failed (no such host, connection refused or reset, a body cut short), or
    the redirects went on past `MAX_REDIRECTS`."""


@dataclass(frozen=True, slots=True)
class Fetched:
    data: bytes
    # The media type, lowercase, without parameters ("" when the server sent none).
    content_type: str
    # Where the body came from, after redirects.
    url: str


class FetchAllow(Protocol):
    """What may be fetched although internal (`bot.fetch` in config.yaml has this shape)."""

    @property
    def allow_hosts(self) -> Iterable[str]: ...

    @property
    def allow_networks(self) -> Iterable[IPNetwork]: ...


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (mapped, 6to4, NAT64), if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def is_internal(address: IPAddress) -> bool:
    """Whether the bot refuses this address to users: anything not globally reachable
    (loopback, private, link-local, shared, unspecified, reserved) or multicast."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_v4(address)
        if inner is not None:  # the packets end up at the IPv4 address: judge that one
            return is_internal(inner)
    return (
        not address.is_global
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )


class _Allowance:
    """`FetchAllow` read once: host names lowercase without a trailing dot, `*.example.org`
    for every name under example.org."""

    def __init__(self, allow: FetchAllow | None) -> None:
        hosts = [h.lower().rstrip(".") for h in (allow.allow_hosts if allow else ())]
        self.hosts = frozenset(h for h in hosts if not h.startswith("*."))
        self.suffixes = tuple(h[1:] for h in hosts if h.startswith("*."))
        self.networks: tuple[IPNetwork, ...] = tuple(allow.allow_networks if allow else ())

    def host(self, host: str) -> bool:
        name = host.lower().rstrip(".")
        return name in self.hosts or name.endswith(self.suffixes)

    def address(self, address: IPAddress) -> bool:
        if not is_internal(address):
            return True
        return any(address.version == n.version and address in n for n in self.networks)


def _literal(host: str) -> IPAddress | None:
    """The address a URL's host is written as, if it is one: the usual forms, and the old
    numeric ones the C library still reads (`2130706433`, `127.1`, `0x7f.1`, `0177.1`)."""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        pass
    if host and all(c in "0123456789abcdefxABCDEFX." for c in host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


class _CheckedResolver(AbstractResolver):
    """aiohttp's resolver for user fetches: looks names up on the `lookups` pool (never on
    asyncio's default executor) and returns only the addresses the allowance permits, so the
    connection goes to an address that was checked and to no other."""

    def __init__(self, allow: _Allowance) -> None:
        self.allow = allow

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        infos = await getaddrinfo(host, port, family, socket.AI_ADDRCONFIG)
        named = self.allow.host(host)
        found: list[ResolveResult] = []
        refused: list[str] = []
        for fam, _type, proto, _name, sockaddr in infos:
            text = str(sockaddr[0])
            if not named and not self.allow.address(ipaddress.ip_address(text.split("%")[0])):
                refused.append(text)
                continue
            if fam == socket.AF_INET6 and len(sockaddr) > 3 and sockaddr[3]:
                text = f"{text.split('%')[0]}%{sockaddr[3]}"  # a scoped (link-local) address
            found.append(
                {
                    "hostname": host,
                    "host": text,
                    "port": int(sockaddr[1]),
                    "family": fam,
                    "proto": proto,
                    "flags": socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
                }
            )
        if not found:
            raise FetchRefused(host, f"{host} is internal ({', '.join(sorted(set(refused)))})")
        return found

    async def close(self) -> None:
        return None


def _check_url(url: URL, allow: _Allowance) -> None:
    """Refuse a scheme other than http(s), and a literal address the allowance does not
    permit; a name is checked by the resolver, on the addresses it connects to."""
    if url.scheme not in ("http", "https") or not url.host:
        raise FetchRefused(str(url), "only http and https URLs are fetched")
    host = url.raw_host or url.host
    if allow.host(host):
        return
    literal = _literal(host)
    if literal is not None and not allow.address(literal):
        raise FetchRefused(str(url), f"{literal} is internal")


async def read_limited(response: aiohttp.ClientResponse | web.BaseRequest, max_bytes: int) -> bytes:
    """The whole body, to its end, refused as soon as it passes `max_bytes` (what the sender
    declares is checked first): a response the bot fetched, or a request a platform POSTed
    (a webhook). `.content.read(n)` returns only what has arrived so far: a body sent in
    several writes would be cut short."""
    declared = response.content_length
    if declared is not None and declared > max_bytes:
        raise FetchTooLarge(str(response.url), f"declared {declared} bytes > {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > max_bytes:
            raise FetchTooLarge(str(response.url), f"more than {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _media_type(response: aiohttp.ClientResponse) -> str:
    raw = response.headers.get("Content-Type") or ""
    return raw.split(";")[0].strip().lower()


async def _follow(
    session: aiohttp.ClientSession,
    url: URL,
    allow: _Allowance,
    max_bytes: int,
    accept: Callable[[str], bool] | None,
    headers: Mapping[str, str] | None = None,
) -> Fetched:
    origin: URL | None = None
    for _hop in range(MAX_REDIRECTS + 1):
        _check_url(url, allow)
        origin = origin or url.origin()
        # The caller's headers (a platform's token) go only to the origin it named.
        sent = headers if headers and url.origin() == origin else None
        async with session.get(url, allow_redirects=False, headers=sent) as response:
            location = response.headers.get("Location")
            if response.status in _REDIRECTS and location:
                url = response.url.join(URL(location))
                continue
            if not 200 <= response.status < 300:
                raise FetchStatus(str(url), response.status)
            kind = _media_type(response)
            if accept is not None and not accept(kind):
                raise FetchWrongType(str(url), kind)
            data = await read_limited(response, max_bytes)
            return Fetched(data, kind, str(response.url))
    raise FetchFailed(str(url), f"more than {MAX_REDIRECTS} redirects")


async def fetch(
    url: str,
    *,
    allow: FetchAllow | None = None,
    max_bytes: int,
    timeout: float,
    accept: Callable[[str], bool] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Fetched:
    """GET `url` on a user's behalf, within every bound above; raises a `FetchError`.

    `allow`: the internal hosts and networks this deployment lets through (`bot.fetch`; None:
    none). `accept(media_type)` refuses a Content-Type before the body is read (an HTML page
    where an image was expected). `headers` (a platform's Authorization for media it names)
    are sent to `url`'s origin only: a redirect to another host does not carry them."""
    allowance = _Allowance(allow)
    try:
        target = URL(url)
    except (TypeError, ValueError):
        raise FetchRefused(url, "not a URL") from None
    connector = aiohttp.TCPConnector(
        resolver=_CheckedResolver(allowance), use_dns_cache=False, limit=MAX_REDIRECTS + 1
    )
    try:
        async with (
            asyncio.timeout(timeout),
            aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=None),
                headers={"User-Agent": "chatfn"},
            ) as session,
        ):
            return await _follow(session, target, allowance, max_bytes, accept, headers)
    except FetchRefused as exc:
        if exc.url != url:  # the resolver knows only the host: name the URL asked for
            raise FetchRefused(url, exc.detail) from None
        raise
    except TimeoutError:
        raise FetchTooSlow(url, f"not done within {timeout:g} s") from None
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        raise FetchFailed(url, f"{type(exc).__name__}: {exc}"[:300]) from None
