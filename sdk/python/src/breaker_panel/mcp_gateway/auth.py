"""A bearer token in front of the gateway's streamable HTTP app (`--auth-token-file`)."""

from __future__ import annotations

import hmac
import json
from typing import Any

__all__ = ["BearerAuth"]


class BearerAuth:
    """ASGI middleware: an HTTP request without `Authorization: Bearer <token>` gets 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self._authorized(scope):
            body = json.dumps(
                {"error": "unauthorized", "detail": "send Authorization: Bearer <token>"}
            ).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="breaker-panel-mcp"'),
                (b"content-length", str(len(body)).encode()),
            ]
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Any) -> bool:
        given = b""
        for name, value in scope.get("headers", ()):
            if name.lower() == b"authorization":
                given = value
                break
        scheme, _, token = given.strip().partition(b" ")
        # Constant time: the token is the only thing between the network and every tool.
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._expected)
