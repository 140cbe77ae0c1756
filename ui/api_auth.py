"""The UI's login (`KAFKA_RAG_UI_AUTH=user:password`) for the machine interfaces on the same server.

Gradio's login form protects the chat and its own API, but not routes mounted beside it: the OpenAI-compatible
API (`/v1/...`) and the MCP endpoint (`/gradio_api/mcp...`). Their clients cannot fill in a form, so they send
the same credentials as `Authorization: Bearer user:password` (the OpenAI SDKs' `api_key`, an MCP client's
header) or as HTTP Basic. A pure ASGI middleware, so streamed responses pass through untouched.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

PROTECTED_PREFIXES = ("/v1/", "/gradio_api/mcp")
UNAUTHORIZED = (
    "Missing or wrong credentials: send the UI login (KAFKA_RAG_UI_AUTH) as the API key, "
    "i.e. 'Authorization: Bearer user:password'"
)


def credentials(header: str) -> str | None:
    """`user:password` from a Bearer or Basic `Authorization` header; None when there is none."""
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() == "bearer":
        return value.strip()
    if scheme.lower() == "basic":
        try:
            return base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return None


def authorized(header: str, auth: str) -> bool:
    """Whether `header` carries the `user:password` pair `auth` (compared in constant time)."""
    given = credentials(header)
    return given is not None and hmac.compare_digest(given.encode("utf-8"), auth.encode("utf-8"))


class ApiAuthMiddleware:
    """401 with an OpenAI-style error body for requests under `prefixes` without the login; others pass."""

    def __init__(self, app: ASGIApp, auth: str, prefixes: Sequence[str] = PROTECTED_PREFIXES) -> None:
        self.app = app
        self.auth = auth
        self.prefixes = tuple(prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.auth or not str(scope.get("path", "")).startswith(self.prefixes):
            await self.app(scope, receive, send)
            return
        header = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == b"authorization"), "")
        if authorized(header, self.auth):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            {
                "error": {
                    "message": UNAUTHORIZED,
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="kafka-rag"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
