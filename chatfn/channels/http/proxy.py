"""What a request says about its own origin (scheme, host, port), with or without a reverse
proxy in front (`channels.http.trust_proxy`).

Behind a TLS proxy the channel sees plain HTTP from the proxy, so `request.secure` is False
and the Host header may be the proxy's upstream name. A proxy that is trusted says what the
browser used in `X-Forwarded-Proto` and `X-Forwarded-Host`; without the setting those headers
are ignored, since anyone can send them to a channel that is reachable directly. Of a header
that holds a list (a proxy that appends), the last entry counts: it is the one written by the
proxy next to the channel, the earlier ones came from whoever spoke to that proxy."""

from __future__ import annotations

from aiohttp import web
from yarl import URL

Origin = tuple[str, str, int]


def _forwarded(request: web.Request, name: str) -> str:
    """The last entry of an `X-Forwarded-*` header, lower case; "" when absent."""
    values = [v.strip() for v in request.headers.get(name, "").split(",")]
    return values[-1].lower() if values else ""


def scheme_of(request: web.Request, trust_proxy: bool) -> str:
    """ "https" or "http": what the browser used to reach us."""
    if trust_proxy:
        forwarded = _forwarded(request, "X-Forwarded-Proto")
        if forwarded in ("http", "https"):
            return forwarded
    return "https" if request.secure else "http"


def is_https(request: web.Request, trust_proxy: bool) -> bool:
    """Whether cookies set on this request's answer should be `Secure`."""
    return scheme_of(request, trust_proxy) == "https"


def parse_origin(text: str) -> Origin | None:
    """`scheme://host[:port]` as (scheme, host, port) with the default port filled in; None for
    anything else (`null`, a path, an unknown scheme)."""
    try:
        url = URL(text.strip())
    except ValueError:
        return None
    if url.scheme not in ("http", "https") or not url.host or url.port is None:
        return None
    if url.path not in ("", "/") or url.query_string or url.fragment or url.user:
        return None
    return url.scheme, url.host.lower().rstrip("."), url.port


def own_origin(request: web.Request, trust_proxy: bool) -> Origin | None:
    """The origin the browser addressed: the scheme (see `scheme_of`) and the Host header, or
    the trusted proxy's `X-Forwarded-Host`; None when the host is missing or malformed."""
    host = _forwarded(request, "X-Forwarded-Host") if trust_proxy else ""
    host = host or request.headers.get("Host", "")
    if not host or any(c in host for c in "/?#@ "):
        return None
    return parse_origin(f"{scheme_of(request, trust_proxy)}://{host}")


def show(origin: Origin | None) -> str:
    """An origin as a browser writes it, for messages."""
    if origin is None:
        return "?"
    scheme, host, port = origin
    default = {"http": 80, "https": 443}[scheme]
    return f"{scheme}://{host}" if port == default else f"{scheme}://{host}:{port}"
