"""What the web server refuses before Gradio sees it: password guessing, uploads, oversized requests.

An ASGI middleware (`guard_middleware()` goes into `launch(app_kwargs=...)`):

- Login: after `LOGIN_FAILURES` wrong passwords from one client address, `POST /login` answers 429 with
  `Retry-After` for a back-off that doubles with each further failure (up to `MAX_BACKOFF_S`); the right
  password is refused too while the back-off runs. A success clears the client's count.
- Uploads: the app has no file inputs, so Gradio's upload routes answer 403 to everyone.
- Request bodies over `MAX_BODY_BYTES` (by Content-Length) answer 413.

Clients are told apart by their address; behind a reverse proxy all share the proxy's, so the limit then
applies to all of them together (configure the proxy's own limit per client instead).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from typing import Any

from starlette.middleware import Middleware

log = logging.getLogger(__name__)

LOGIN_FAILURES = 5  # wrong passwords allowed before the back-off starts
BACKOFF_S = 2.0  # the first back-off; each further failure doubles it
MAX_BACKOFF_S = 300.0
MAX_BODY_BYTES = 2_097_152  # a question is capped at 250,000 characters; nothing the app takes is bigger
CLIENTS_MAX = 10_000  # addresses remembered (the least recently seen are forgotten)
UPLOAD_PATHS = ("/upload", "/gradio_api/upload")
LOGIN_PATHS = ("/login", "/login/")


class LoginThrottle:
    """Failures and back-off per client address; thread-safe."""

    def __init__(self, failures: int = LOGIN_FAILURES, backoff_s: float = BACKOFF_S) -> None:
        self.failures = failures
        self.backoff_s = backoff_s
        self._clients: OrderedDict[str, tuple[int, float]] = OrderedDict()  # address -> (failures, blocked until)
        self._lock = threading.Lock()

    def retry_after(self, client: str) -> float:
        """Seconds this client must still wait; 0 when it may try."""
        with self._lock:
            _, until = self._clients.get(client, (0, 0.0))
        return max(until - time.monotonic(), 0.0)

    def failed(self, client: str) -> None:
        with self._lock:
            count = self._clients.pop(client, (0, 0.0))[0] + 1
            until = 0.0
            if count >= self.failures:
                until = time.monotonic() + min(self.backoff_s * 2 ** (count - self.failures), MAX_BACKOFF_S)
            self._clients[client] = (count, until)
            while len(self._clients) > CLIENTS_MAX:
                self._clients.popitem(last=False)
        if count == self.failures:
            log.warning("Login: %d wrong passwords from %s; backing off", count, client)

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._clients.pop(client, None)


class Guard:
    """The ASGI middleware; see the module docstring."""

    def __init__(self, app: Any, throttle: LoginThrottle | None = None) -> None:
        self.app = app
        self.throttle = throttle or LoginThrottle(LOGIN_FAILURES, BACKOFF_S)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = scope.get("path", ""), scope.get("method", "GET")
        if method == "POST" and path.rstrip("/") in UPLOAD_PATHS:
            await _reply(send, 403, {"detail": "Uploads are disabled: this app takes no files."})
            return
        length = dict(scope.get("headers") or []).get(b"content-length", b"0")
        if length.isdigit() and int(length) > MAX_BODY_BYTES:
            await _reply(send, 413, {"detail": f"Request body over {MAX_BODY_BYTES} bytes."})
            return
        if method != "POST" or path not in LOGIN_PATHS:
            await self.app(scope, receive, send)
            return
        client = (scope.get("client") or ("unknown", 0))[0]
        wait = self.throttle.retry_after(client)
        if wait > 0:
            seconds = int(wait) + 1
            await _reply(
                send,
                429,
                {"detail": f"Too many failed logins: try again in {seconds} s."},
                ((b"retry-after", str(seconds).encode()),),
            )
            return
        status: list[int] = []

        async def watch(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        await self.app(scope, receive, watch)
        if status and status[0] == 400:
            self.throttle.failed(client)
        elif status and status[0] < 300:
            self.throttle.succeeded(client)


async def _reply(send: Any, status: int, body: dict[str, Any], headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
            + list(headers),
        }
    )
    await send({"type": "http.response.body", "body": payload})


def guard_middleware(throttle: LoginThrottle | None = None) -> list[Middleware]:
    """The middleware list for `Blocks.launch(app_kwargs={"middleware": ...})`."""
    return [Middleware(Guard, throttle=throttle)]
