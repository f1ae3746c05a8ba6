"""Who may reach the web inspector: the Host it is served as, a token when bound beyond loopback, and no
write from another site.

- **Host**: on a loopback address, a request must name a loopback host (``127.0.0.1``, ``localhost``,
  ``[::1]``): a page of another site that rebinds its DNS name to 127.0.0.1 is refused.
- **Token**: when one is set (always, off loopback), every request carries it: ``?token=`` once (answered
  with an HttpOnly, SameSite=Strict cookie and a redirect that drops it from the address), the cookie, or
  ``Authorization: Bearer``. It is compared in constant time and never logged.
- **Writes**: a POST whose ``Origin`` is not this server, or that the browser marks cross-site, is refused,
  so another page open in the same browser cannot pin, forget or erase.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

__all__ = ["COOKIE", "InspectorGuard", "is_loopback"]

COOKIE = "tiermem_ui"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) stays on this machine."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _hostname(authority: str) -> str:
    return urlsplit(f"//{authority}").hostname or ""


class InspectorGuard:
    """ASGI middleware refusing what :mod:`._guard` describes, before any route runs."""

    def __init__(self, app: Callable[..., Awaitable[None]], *, token: str | None, loopback: bool) -> None:
        self.app, self.token, self.loopback = app, token, loopback

    def _holds_token(self, request: Request) -> bool:
        assert self.token is not None
        header = request.headers.get("authorization", "")
        presented = [request.cookies.get(COOKIE, ""), header[7:] if header.lower().startswith("bearer ") else ""]
        return any(hmac.compare_digest(p.encode(), self.token.encode()) for p in presented if p)

    def refusal(self, request: Request) -> Response | None:
        """The answer refusing ``request``, or None to let it through."""
        host = _hostname(request.headers.get("host", ""))
        if self.loopback and not is_loopback(host):
            return PlainTextResponse(f"this inspector answers on 127.0.0.1 only, not as {host!r}", status_code=421)
        if self.token is not None:
            given = request.query_params.get("token")
            if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
                rest = urlencode([(k, v) for k, v in parse_qsl(request.url.query) if k != "token"])
                answer = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), status_code=303)
                answer.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
                return answer
            if not self._holds_token(request):
                message = "this inspector needs its token: open the address `tiermem ui` printed (…?token=…)"
                return PlainTextResponse(message, status_code=401)
        if request.method in UNSAFE:
            origin = request.headers.get("origin")
            cross = request.headers.get("sec-fetch-site") == "cross-site"
            if cross or (origin is not None and urlsplit(origin).netloc != request.headers.get("host")):
                return PlainTextResponse("a write from another site is refused", status_code=403)
        return None

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            refused = self.refusal(Request(scope))
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)
