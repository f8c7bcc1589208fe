"""The token in front of `lake dev`'s Dagster webserver: Jupyter's model, as ASGI middleware.

Dagster OSS has no authentication, and 127.0.0.1 is open to every local user, so every
HTTP request and websocket (GraphQL subscriptions) must carry the token `lake dev` made at
start: as `Authorization: Bearer <token>` (scripts), or as the HttpOnly cookie that the
address `lake dev` prints (`/?token=<token>`) sets on first visit, redirecting to the same
page without the token. Anything else gets 401 (a websocket is closed before it is
accepted: 403). A request that rides on the cookie must come from the UI's own origin: a
page another local user serves on another port of 127.0.0.1 is *same-site* to the browser
(ports do not count), which would send the cookie along, and the webserver runs GraphQL
mutations from a GET or a form POST; so such a request is refused when the browser says it
is cross-origin (`Sec-Fetch-Site`) or names another `Origin`.
"""

import hmac
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

#: `Sec-Fetch-Site` values of a request the UI's own page (or the user, typing the address) made.
OWN_PAGE = ("same-origin", "none")


class TokenGate:
    """ASGI middleware letting through only requests that carry `token` (module docstring)."""

    def __init__(self, app: ASGIApp, token: str, port: int) -> None:
        self.app = app
        self.token = token
        self.cookie = f"lake_dev_{port}"  # per port: two `lake dev`s on one host keep their own

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if self._matches(_bearer(headers)):
            await self.app(scope, receive, send)
            return
        if self._matches(_cookies(headers).get(self.cookie)):
            if _from_own_page(headers):
                await self.app(scope, receive, send)
            else:
                await _refuse(scope, send, 403, "lake dev: a request from another page is refused")
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        token = next((value for key, value in query if key == "token"), None)
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD") and self._matches(token):
            await self._log_in(scope, send, [(key, value) for key, value in query if key != "token"])
            return
        await _refuse(scope, send, 401, "lake dev: open the address `lake dev` printed (it carries the token), "
                                        "or send Authorization: Bearer <token> (LAKE_HOME/dagster-ui-token)")

    def _matches(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(presented.encode(), self.token.encode())

    async def _log_in(self, scope: Scope, send: Send, rest: list[tuple[str, str]]) -> None:
        """Set the cookie and send the browser to the same page without the token in its address."""
        location = scope.get("root_path", "") + scope["path"] + (f"?{urlencode(rest)}" if rest else "")
        cookie = f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict"
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", location.encode()), (b"set-cookie", cookie.encode()),
                                (b"cache-control", b"no-store"), (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})


def _bearer(headers: Headers) -> str | None:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


def _cookies(headers: Headers) -> dict[str, str]:
    pairs = (part.strip().partition("=") for part in headers.get("cookie", "").split(";"))
    return {name: value for name, _, value in pairs if name}


def _from_own_page(headers: Headers) -> bool:
    """False when the browser says the request comes from another origin (a same-site page on another port)."""
    site = headers.get("sec-fetch-site")
    if site is not None and site not in OWN_PAGE:
        return False
    origin = headers.get("origin")
    return origin is None or origin == f"http://{headers.get('host', '')}"


async def _refuse(scope: Scope, send: Send, status: int, message: str) -> None:
    if scope["type"] == "websocket":  # closing before accepting: the server answers the handshake with 403
        await send({"type": "websocket.close", "code": 1008})
        return
    body = (message + "\n").encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
