"""An OpenAI-compatible chat API on the UI's server (`kafka-rag serve --openai-api`), for chat front-ends and SDKs.

    GET  /v1/models              → the one model, `kafka-rag`
    POST /v1/chat/completions    → the assistant's answer, streamed (`"stream": true`, server-sent events) or not

The last message is the question; earlier user and assistant messages are the history a follow-up is
read with (system messages are ignored: the assistant's rules are not negotiable). The reply is the
answer text with its `[n]` markers and the sources appended as a list (`ui.text_render`); the full
`Answer` rides along as `kafka_rag` in a non-streamed reply. Malformed requests get a 400 with an
OpenAI-style `{"error": {...}}` body; with `KAFKA_RAG_UI_AUTH` set, `ui.api_auth` asks for the login first.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from rag import Answer, Assistant, KafkaRagError, QuestionError
from ui import text_render

log = logging.getLogger(__name__)

MODEL = "kafka-rag"
INTERNAL_ERROR = "Something went wrong while answering. It has been logged; please try again."
_HISTORY_ROLES = ("user", "assistant")
_KNOWN_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


class RequestError(Exception):
    """A request the API refuses, with the HTTP status and the OpenAI error fields to send back."""

    def __init__(self, message: str, *, param: str | None = None, status: int = 400, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.status = status
        self.code = code


@dataclass(frozen=True)
class ChatRequest:
    model: str
    question: str
    history: tuple[dict[str, str], ...]
    stream: bool


def error_body(
    message: str, *, param: str | None = None, code: str | None = None, kind: str = "invalid_request_error"
) -> dict[str, Any]:
    """OpenAI's error shape, which its SDKs turn into `BadRequestError` and friends."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def parse_chat_request(body: Any) -> ChatRequest:
    """A chat-completions body → question, history and options; `RequestError` says what is wrong with it."""
    if not isinstance(body, Mapping):
        raise RequestError("The request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError("'model' is required: use 'kafka-rag' (see GET /v1/models)", param="model")
    if model != MODEL:
        raise RequestError(
            f"The model '{model}' does not exist: use '{MODEL}'", param="model", status=404, code="model_not_found"
        )
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError("'stream' must be true or false", param="stream")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty array of {role, content} objects", param="messages")
    turns = [_message(number, message) for number, message in enumerate(messages)]
    role, question = turns[-1]
    if role != "user" or not question.strip():
        raise RequestError(
            "The last message must be the user's question, with text content", param=f"messages[{len(turns) - 1}]"
        )
    history = tuple(
        {"role": r, "content": text_render.strip_sources(text) if r == "assistant" else text}
        for r, text in turns[:-1]
        if r in _HISTORY_ROLES and text.strip()
    )
    return ChatRequest(model, question, history, stream)


def _message(number: int, message: Any) -> tuple[str, str]:
    param = f"messages[{number}]"
    if not isinstance(message, Mapping) or message.get("role") not in _KNOWN_ROLES:
        raise RequestError(f"{param} must be an object with a role ({', '.join(_KNOWN_ROLES)})", param=param)
    content = message.get("content")
    if content is None:
        return message["role"], ""
    if isinstance(content, list):  # content parts: keep the text ones
        if not all(isinstance(part, Mapping) for part in content):
            raise RequestError(
                f"{param}.content parts must be objects like {{'type': 'text', 'text': ...}}", param=param
            )
        content = "\n".join(str(part.get("text", "")) for part in content if part.get("type") == "text")
    if not isinstance(content, str):
        raise RequestError(f"{param}.content must be a string or an array of content parts", param=param)
    return message["role"], content


def completion(request: ChatRequest, answer: Answer, *, completion_id: str, created: int) -> dict[str, Any]:
    """The non-streamed reply: the rendered answer as the assistant message, the Answer itself as `kafka_rag`."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": request.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text_render.render_answer(answer)},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},  # no tokenizer to count with
        "kafka_rag": answer.to_dict(),
    }


def chunk(
    request: ChatRequest, delta: dict[str, str], *, completion_id: str, created: int, finish: str | None = None
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": request.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }


def closing_text(streamed: str, answer: Answer) -> str:
    """What follows the streamed deltas: the sources list, after the checked answer when it differs.

    An LLM's raw tokens are streamed as they come; its checked answer (markers renumbered, unsupported
    sentences flagged, or the extractive fallback) can differ, and what was sent cannot be taken back.
    """
    rendered = text_render.render_answer(answer)
    if streamed == answer.text or streamed.endswith("\n\n" + answer.text):  # the latter: the extractive fallback
        return rendered[len(answer.text) :]
    return "\n\n---\n\nChecked against the sources:\n\n" + rendered


def routes(assistant: Assistant, concurrency: int) -> list[Route]:
    """The API's routes, to be passed to the server's app (`app_kwargs={"routes": ...}`)."""
    limiter = anyio.CapacityLimiter(concurrency)

    async def models(_: Request) -> Response:
        return JSONResponse(
            {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "kafka-rag"}]}
        )

    async def chat_completions(http: Request) -> Response:
        try:
            body = json.loads(await http.body())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return JSONResponse(error_body("The request body is not valid JSON"), status_code=400)
        try:
            request = parse_chat_request(body)
        except RequestError as exc:
            return JSONResponse(error_body(str(exc), param=exc.param, code=exc.code), status_code=exc.status)
        completion_id, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        if request.stream:
            events = _stream_events(assistant, request, limiter, completion_id=completion_id, created=created)
            return StreamingResponse(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        try:
            answer = await anyio.to_thread.run_sync(
                lambda: assistant.ask(request.question, request.history), limiter=limiter
            )
        except QuestionError as exc:
            return JSONResponse(error_body(str(exc), param="messages"), status_code=400)
        except KafkaRagError as exc:
            log.warning("API question failed: %s", exc)
            return JSONResponse(error_body(str(exc), kind="server_error"), status_code=500)
        except Exception:
            log.exception("assistant failed on an API question")
            return JSONResponse(error_body(INTERNAL_ERROR, kind="server_error"), status_code=500)
        return JSONResponse(completion(request, answer, completion_id=completion_id, created=created))

    return [
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    ]


async def _stream_events(
    assistant: Assistant, request: ChatRequest, limiter: anyio.CapacityLimiter, *, completion_id: str, created: int
) -> AsyncIterator[str]:
    """Server-sent events: a role chunk, text deltas, the sources, a stop chunk, `[DONE]`; an error event on failure."""

    def event(payload: dict[str, Any]) -> str:
        return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

    ids = {"completion_id": completion_id, "created": created}
    yield event(chunk(request, {"role": "assistant", "content": ""}, **ids))
    parts = assistant.stream(request.question, request.history)
    streamed = ""
    try:
        while True:
            part = await anyio.to_thread.run_sync(next, parts, None, limiter=limiter)
            if part is None:
                raise RuntimeError("Assistant.stream ended without a final Answer")
            if isinstance(part, Answer):
                yield event(chunk(request, {"content": closing_text(streamed, part)}, **ids))
                break
            streamed += part
            yield event(chunk(request, {"content": part}, **ids))
    except KafkaRagError as exc:
        log.warning("API question failed: %s", exc)
        yield event(error_body(str(exc), kind="server_error"))
        return
    except Exception:
        log.exception("assistant failed on a streamed API question")
        yield event(error_body(INTERNAL_ERROR, kind="server_error"))
        return
    yield event(chunk(request, {}, finish="stop", **ids))
    yield "data: [DONE]\n\n"
