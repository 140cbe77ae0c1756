"""A faithful local fake of an OpenAI-compatible and an Ollama chat endpoint, for tests over real HTTP.

Speaks `POST /v1/chat/completions` (JSON, or SSE `data: {...}` chunks ending `data: [DONE]` when
`stream` is true), `GET /v1/models`, and Ollama's `POST /api/chat` (NDJSON stream or one JSON) and
`GET /api/tags`. Every request body is recorded. Each test scripts the behaviour it needs: the reply
(text, or a function of the request body), an HTTP error status, a delay before answering, or a
malformed body.

    with running_fake_llm(reply="Increase it [1].") as llm:
        ChatOpenAI(base_url=llm.openai_url, api_key="x", model="fake").invoke("hi")
        llm.requests[-1]["body"]["messages"]
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = str | Callable[[dict[str, Any]], str]


@dataclass
class FakeLLM:
    """The running fake: its URLs, what it received, and the script for its next answers."""

    base_url: str
    reply: Reply = "The knowledge base does not cover this."
    status: int = 200  # anything but 200 answers with that status and an error body
    delay_s: float = 0.0  # wait before sending anything (longer than a client timeout => timeout)
    malformed: bool = False  # send a body (or stream event) that is not valid JSON
    requests: list[dict[str, Any]] = field(default_factory=list)  # {"path", "headers" (lowercased), "body"}
    _stopping: threading.Event = field(default_factory=threading.Event, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def openai_url(self) -> str:
        return self.base_url + "/v1"

    def script(
        self, reply: Reply | None = None, *, status: int = 200, delay_s: float = 0.0, malformed: bool = False
    ) -> None:
        """Set how the following requests are answered."""
        if reply is not None:
            self.reply = reply
        self.status, self.delay_s, self.malformed = status, delay_s, malformed

    def chat_requests(self) -> list[dict[str, Any]]:
        """Bodies of the chat requests received so far (either API), oldest first."""
        return [r["body"] for r in self.requests if r["path"] in ("/v1/chat/completions", "/api/chat")]

    def _record(self, path: str, headers: dict[str, str], body: Any) -> None:
        headers = {k.lower(): v for k, v in headers.items()}
        with self._lock:
            self.requests.append({"path": path, "headers": headers, "body": body})

    def _reply_text(self, body: dict[str, Any]) -> str:
        return self.reply(body) if callable(self.reply) else self.reply


def split_tokens(text: str) -> list[str]:
    """Pieces the size of model tokens (a word and its trailing space), so streams have many deltas."""
    return re.findall(r"\S+\s*|\s+", text) or [""]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
        pass

    def do_GET(self) -> None:
        fake = self.server.fake
        fake._record(self.path, dict(self.headers), None)
        if self.path == "/v1/models":
            model = {"id": "fake", "object": "model", "owned_by": "fake"}
            self._json(200, {"object": "list", "data": [model]})
        elif self.path == "/api/tags":
            self._json(200, {"models": [{"name": "fake", "model": "fake", "size": 1}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "request body is not JSON"}})
            return
        fake._record(self.path, dict(self.headers), body)
        if fake.delay_s and fake._stopping.wait(fake.delay_s):
            return
        if self.path not in ("/v1/chat/completions", "/api/chat"):
            self._json(404, {"error": {"message": f"no route {self.path}"}})
        elif fake.status != 200:
            message = "fake endpoint failure"
            error = {"message": message, "type": "server_error"} if self.path.startswith("/v1") else message
            self._json(fake.status, {"error": error})
        elif self.path == "/v1/chat/completions":
            self._openai(body, fake._reply_text(body), fake.malformed)
        else:
            self._ollama(body, fake._reply_text(body), fake.malformed)

    def _openai(self, body: dict[str, Any], text: str, malformed: bool) -> None:
        model, created, rid = body.get("model", "fake"), int(time.time()), "chatcmpl-fake"
        usage = {"prompt_tokens": 10, "completion_tokens": len(split_tokens(text)), "total_tokens": 10}
        if not body.get("stream"):
            if malformed:
                self._send(200, "application/json", [b'{"id": "chatcmpl-fake", "choices": [{"message": '])
                return
            message = {"role": "assistant", "content": text}
            choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
            self._json(
                200,
                {
                    "id": rid,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [choice],
                    "usage": usage,
                },
            )
            return

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            event = {
                "id": rid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [choice],
            }
            return f"data: {json.dumps(event)}\n\n".encode()

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": piece}) for piece in split_tokens(text)]
        if malformed:
            events.insert(2, b'data: {"choices": [{"delta": \n\n')
        events.append(chunk({}, "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            usage_event = {
                "id": rid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": usage,
            }
            events.append(f"data: {json.dumps(usage_event)}\n\n".encode())
        events.append(b"data: [DONE]\n\n")
        self._send(200, "text/event-stream", events)

    def _ollama(self, body: dict[str, Any], text: str, malformed: bool) -> None:
        model, now = body.get("model", "fake"), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        done = {
            "model": model,
            "created_at": now,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "total_duration": 1000,
            "load_duration": 10,
            "prompt_eval_count": 10,
            "prompt_eval_duration": 100,
            "eval_count": len(split_tokens(text)),
            "eval_duration": 100,
        }
        if body.get("stream", True):
            head = {"model": model, "created_at": now, "done": False}
            lines = [
                json.dumps({**head, "message": {"role": "assistant", "content": piece}}).encode() + b"\n"
                for piece in split_tokens(text)
            ]
            if malformed:
                lines.insert(1, b'{"message": {"content": \n')
            lines.append(json.dumps(done).encode() + b"\n")
            self._send(200, "application/x-ndjson", lines)
        elif malformed:
            self._send(200, "application/json", [b'{"message": {"content": '])
        else:
            self._json(200, {**done, "message": {"role": "assistant", "content": text}})

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send(self, status: int, content_type: str, parts: list[bytes]) -> None:
        """Send the parts with chunked transfer encoding, flushing each, as a streaming server does."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for part in parts:
                self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout); nothing to finish


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeLLM

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up early (timeout tests) is expected, not an error


@contextmanager
def running_fake_llm(reply: Reply | None = None, **script: Any) -> Iterator[FakeLLM]:
    """Start the fake on 127.0.0.1 on a free port for the duration of the block."""
    server = _Server(("127.0.0.1", 0), _Handler)
    host, port = server.server_address[:2]
    fake = FakeLLM(base_url=f"http://{host}:{port}")
    fake.script(reply, **script)
    server.fake = fake
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake._stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
