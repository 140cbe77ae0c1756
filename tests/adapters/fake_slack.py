"""A fake Slack Web API on 127.0.0.1 for the Slack adapter tests (Slack itself is unreachable here).

It speaks the real wire protocol the way slack_sdk's `WebClient` uses it: `POST /api/<method>` with a
JSON or form body or `GET` with a query string, a bearer token, `{"ok": ...}` answers, HTTP 429 with
`Retry-After` when rate limited. It keeps the channels' messages, so `conversations.replies` returns
what was posted, and it enforces the Block Kit limits that real Slack rejects (`invalid_blocks`).
Every call is recorded with its parsed parameters; `wait_for` polls for calls made from the bot's
lazy-listener threads.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

BOT_TOKEN = "xoxb-fake-bot-token-0123456789"
BOT_USER_ID = "UBOT0001"
BOT_ID = "BBOT0001"
TEAM_ID = "T0000001"
APP_ID = "A0000001"


@dataclass(frozen=True)
class Call:
    """One request the fake received, with the status it answered."""

    method: str
    params: dict[str, Any]
    status: int
    response: dict[str, Any]


@dataclass(frozen=True)
class _Failure:
    status: int
    retry_after: int | None
    error: str | None


class FakeSlack:
    """The fake server and its state; use `with FakeSlack() as slack:` to run it on a free port."""

    def __init__(self, token: str = BOT_TOKEN) -> None:
        self.token = token
        self._lock = threading.Condition()
        self._calls: list[Call] = []
        self._failures: dict[str, list[_Failure]] = {}
        self._messages: dict[str, list[dict[str, Any]]] = {}  # channel -> messages in ts order
        self._clock = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-slack", daemon=True)

    @property
    def url(self) -> str:
        """The `base_url` to give `WebClient`."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/api/"

    def __enter__(self) -> FakeSlack:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # --- test controls -------------------------------------------------------------------------

    def fail_next(
        self, method: str, *, status: int = 429, retry_after: int | None = 1, error: str | None = None
    ) -> None:
        """Answer the next call of `method` with HTTP `status` (429 + Retry-After) or `ok: false, error`."""
        with self._lock:
            self._failures.setdefault(method, []).append(_Failure(status, retry_after, error))

    def add_message(
        self,
        channel: str,
        text: str,
        *,
        user: str,
        ts: str | None = None,
        thread_ts: str | None = None,
        bot_id: str | None = None,
    ) -> str:
        """Put a message in the channel as if someone had posted it; returns its ts."""
        with self._lock:
            return self._store(
                channel,
                {"type": "message", "user": user, "text": text, **({"bot_id": bot_id} if bot_id else {})},
                ts,
                thread_ts,
            )

    def calls(self, method: str | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self._calls if method is None or c.method == method]

    def wait_for(self, method: str, count: int = 1, timeout: float = 30.0) -> list[Call]:
        """Block until `method` has been called `count` times (successfully or not); return those calls."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                found = [c for c in self._calls if c.method == method]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [c.method for c in self._calls]
                    raise AssertionError(f"{method} called {len(found)} times, expected {count}; calls: {seen}")
                self._lock.wait(left)

    def thread(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        """The thread's messages as Slack would show them now (root first)."""
        with self._lock:
            return [
                dict(m)
                for m in self._messages.get(channel, [])
                if m["ts"] == thread_ts or m.get("thread_ts") == thread_ts
            ]

    def message(self, channel: str, ts: str) -> dict[str, Any]:
        """One message as Slack would show it now."""
        with self._lock:
            return dict(next(m for m in self._messages.get(channel, []) if m["ts"] == ts))

    # --- the API -------------------------------------------------------------------------------

    def _next_ts(self) -> str:
        return f"{1_700_000_000 + next(self._clock)}.000100"

    def _store(self, channel: str, message: dict[str, Any], ts: str | None, thread_ts: str | None) -> str:
        message = {**message, "ts": ts or self._next_ts()}
        if thread_ts and thread_ts != message["ts"]:
            message["thread_ts"] = thread_ts
            root = next((m for m in self._messages.get(channel, []) if m["ts"] == thread_ts), None)
            if root is not None:
                root["thread_ts"] = thread_ts
                root["reply_count"] = root.get("reply_count", 0) + 1
        messages = self._messages.setdefault(channel, [])
        messages.append(message)
        messages.sort(key=lambda m: _ts_key(m["ts"]))
        return message["ts"]

    def _answer(self, method: str, params: dict[str, Any], token: str | None) -> tuple[int, dict[str, Any], dict]:
        failures = self._failures.get(method)
        if failures:
            failure = failures.pop(0)
            if failure.error:
                return 200, {"ok": False, "error": failure.error}, {}
            headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
            return failure.status, {"ok": False, "error": "ratelimited"}, headers
        if token is None:
            return 200, {"ok": False, "error": "not_authed"}, {}
        if token != self.token:
            return 200, {"ok": False, "error": "invalid_auth"}, {}
        handler = getattr(self, "_api_" + method.replace(".", "_"), None)
        if handler is None:
            return 200, {"ok": False, "error": "unknown_method"}, {}
        return 200, handler(params), {}

    def _api_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://fake.slack.com/",
            "team": "Fake",
            "user": "kafka-rag",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _api_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        problem = check_message(params)
        if problem:
            return {"ok": False, "error": problem}
        message = {
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "app_id": APP_ID,
            "text": params.get("text", ""),
            "blocks": params.get("blocks", []),
        }
        ts = self._store(params["channel"], message, None, params.get("thread_ts"))
        return {"ok": True, "channel": params["channel"], "ts": ts, "message": {**message, "ts": ts}}

    def _api_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        problem = check_message(params)
        if problem:
            return {"ok": False, "error": problem}
        for message in self._messages.get(params["channel"], []):
            if message["ts"] == params.get("ts"):
                if message.get("user") != BOT_USER_ID:
                    return {"ok": False, "error": "cant_update_message"}
                message["text"] = params.get("text", "")
                message["blocks"] = params.get("blocks", [])
                message["edited"] = {"user": BOT_USER_ID, "ts": self._next_ts()}
                return {
                    "ok": True,
                    "channel": params["channel"],
                    "ts": message["ts"],
                    "text": message["text"],
                }
        return {"ok": False, "error": "message_not_found"}

    def _api_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        if not params.get("user"):
            return {"ok": False, "error": "user_not_in_channel"}
        problem = check_message(params)
        if problem:
            return {"ok": False, "error": problem}
        return {"ok": True, "message_ts": self._next_ts()}

    def _api_conversations_replies(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = params.get("channel"), params.get("ts")
        if not channel or channel not in self._messages:
            return {"ok": False, "error": "channel_not_found"}
        thread = [dict(m) for m in self._messages[channel] if m["ts"] == ts or m.get("thread_ts") == ts]
        if not thread:
            return {"ok": False, "error": "thread_not_found"}
        return {"ok": True, "messages": thread, "has_more": False}

    # --- HTTP ----------------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._handle(b"")

            def do_POST(self) -> None:
                self._handle(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def _handle(self, raw: bytes) -> None:
                parts = urlsplit(self.path)
                if not parts.path.startswith("/api/"):
                    self.send_error(404)
                    return
                method = parts.path[len("/api/") :]
                params = _parse(parts.query, raw, self.headers.get("Content-Type", ""))
                auth = self.headers.get("Authorization", "")
                token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else params.pop("token", None)
                with fake._lock:
                    status, body, headers = fake._answer(method, params, token)
                    fake._calls.append(Call(method, params, status, body))
                    fake._lock.notify_all()
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def _parse(query: str, raw: bytes, content_type: str) -> dict[str, Any]:
    params: dict[str, Any] = dict(parse_qsl(query))
    if raw and content_type.startswith("application/json"):
        params.update(json.loads(raw))
    elif raw:
        params.update(parse_qsl(raw.decode("utf-8")))
    for key in ("blocks", "attachments"):
        if isinstance(params.get(key), str):
            params[key] = json.loads(params[key])
    return params


def check_message(params: dict[str, Any]) -> str | None:
    """The errors real Slack gives for a malformed message (the limits from the Block Kit reference)."""
    if not params.get("channel"):
        return "channel_not_found"
    blocks = params.get("blocks") or []
    if not params.get("text") and not blocks:
        return "no_text"
    if len(blocks) > 50:
        return "invalid_blocks"
    for block in blocks:
        if block.get("type") == "section" and not 0 < len(block["text"]["text"]) <= 3000:
            return "invalid_blocks"
        if block.get("type") == "context" and not 0 < len(block["elements"]) <= 10:
            return "invalid_blocks"
        if block.get("type") == "actions":
            for element in block["elements"]:
                if len(element.get("value", "")) > 2000 or len(element["text"]["text"]) > 75:
                    return "invalid_blocks"
    if sum(len(text) for text in _texts(blocks)) > 13_000:  # undocumented; slackapi/bolt-js#2509
        return "msg_blocks_too_long"
    return None


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "text" and isinstance(item, str):
                yield item
            else:
                yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


def _ts_key(ts: str) -> tuple[int, int]:
    seconds, _, micros = ts.partition(".")
    return int(seconds), int(micros or 0)
