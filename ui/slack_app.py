"""Slack adapter: mentions and DMs answered in their thread, with sources and 👍/👎 feedback.

One Bolt `App` serves both run modes of `kafka-rag slack`: Socket Mode (SLACK_APP_TOKEN; an outbound
WebSocket, no public URL) and HTTP Events mode (`--http`; Slack posts signed requests to
`/slack/events`, verified with SLACK_SIGNING_SECRET). Events are acknowledged at once and answered in
a lazy listener; retried deliveries and duplicate event ids are dropped before any work is done.
Tokens are read from the environment here, passed only to slack_sdk, and never logged.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from slack_bolt import App, BoltContext, BoltRequest, BoltResponse
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
from slack_bolt.error import BoltError
from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rag import (
    Answer,
    Assistant,
    ConfigurationError,
    KafkaRagError,
    Settings,
    append_feedback,
    check_writable,
    feedback_record,
)
from ui.slack_render import (
    ABSTAIN_TEXT,
    APOLOGY_TEXT,
    EMPTY_QUESTION_TEXT,
    FEEDBACK_ACTIONS,
    PLACEHOLDER_TEXT,
    THANKS_TEXT,
    answer_blocks,
    error_text,
    fallback_text,
    history_from_replies,
    text_from_slack,
)

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
SEEN_TTL_S = 15 * 60  # Slack retries an event for about 5 minutes (now, +1 min, +5 min)
SEEN_MAX = 10_000
THREADS_MAX = 2_000  # threads whose history is kept in memory
TURNS_MAX = 20  # history turns kept per thread (the oldest are dropped)
ANSWERS_MAX = 5_000  # answers kept for feedback votes
REPLIES_LIMIT = 100  # messages read from conversations.replies when a thread is not in memory
SAVE_FAILED_TEXT = "Sorry, your feedback could not be saved. Please try again later."


class Asker(Protocol):
    """The one thing the bot needs from the service (an `Assistant` fits)."""

    def ask(self, question: str, history: Sequence[Mapping[str, str]] = ()) -> Answer: ...


@dataclass(frozen=True)
class SlackCredentials:
    """Secrets from the environment; `repr` never shows them."""

    bot_token: str = field(repr=False)
    signing_secret: str = field(repr=False, default="")
    app_token: str = field(repr=False, default="")


def read_credentials(environ: Mapping[str, str], *, http: bool) -> SlackCredentials:
    """The tokens the chosen mode needs; a missing or malformed one names itself and where to find it."""
    bot_token = environ.get("SLACK_BOT_TOKEN", "").strip()
    if not bot_token:
        raise ConfigurationError(
            "SLACK_BOT_TOKEN is not set: export the app's Bot User OAuth Token (xoxb-…) "
            "from its OAuth & Permissions page"
        )
    if not bot_token.startswith("xoxb-"):
        raise ConfigurationError("SLACK_BOT_TOKEN is not a bot token: it should start with xoxb-")
    if http:
        secret = environ.get("SLACK_SIGNING_SECRET", "").strip()
        if not secret:
            raise ConfigurationError(
                "SLACK_SIGNING_SECRET is not set: HTTP mode verifies every request with it "
                "(Basic Information → App Credentials → Signing Secret)"
            )
        return SlackCredentials(bot_token=bot_token, signing_secret=secret)
    app_token = environ.get("SLACK_APP_TOKEN", "").strip()
    if not app_token:
        raise ConfigurationError(
            "SLACK_APP_TOKEN is not set: Socket Mode needs an app-level token (xapp-…) with "
            "connections:write (Basic Information → App-Level Tokens), or run with --http"
        )
    if not app_token.startswith("xapp-"):
        raise ConfigurationError("SLACK_APP_TOKEN is not an app-level token: it should start with xapp-")
    return SlackCredentials(bot_token=bot_token, app_token=app_token)


def web_client(token: str, *, base_url: str | None = None) -> WebClient:
    """A WebClient that waits out HTTP 429 (Retry-After) twice before giving up."""
    client = WebClient(token=token, base_url=base_url or WebClient.BASE_URL, timeout=30)
    client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=2))
    return client


class _Recent:
    """A bounded, thread-safe map that forgets the least recently used keys and, optionally, old ones."""

    def __init__(self, max_items: int, ttl_s: float | None = None) -> None:
        self._items: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self._max = max_items
        self._ttl = ttl_s
        self._lock = threading.Lock()

    def add(self, key: Hashable) -> bool:
        """Remember `key`; False when it was already seen (and not yet forgotten)."""
        with self._lock:
            if self._live(key):
                return False
            self._set(key, True)
            return True

    def get(self, key: Hashable) -> Any:
        with self._lock:
            return self._items[key][1] if self._live(key) else None

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._set(key, value)

    def update(self, key: Hashable, change: Callable[[Any], Any]) -> None:
        """Replace the value with `change(old value or None)`, atomically."""
        with self._lock:
            self._set(key, change(self._items[key][1] if self._live(key) else None))

    def _live(self, key: Hashable) -> bool:
        entry = self._items.get(key)
        if entry is None:
            return False
        if self._ttl is not None and time.monotonic() - entry[0] > self._ttl:
            del self._items[key]
            return False
        self._items.move_to_end(key)
        return True

    def _set(self, key: Hashable, value: Any) -> None:
        self._items[key] = (time.monotonic(), value)
        self._items.move_to_end(key)
        while len(self._items) > self._max:
            self._items.popitem(last=False)


class SlackBot:
    """The listeners: answer a message in its thread, remember the thread, record votes."""

    def __init__(self, assistant: Asker, feedback_path: Path) -> None:
        self.assistant = assistant
        self.feedback_path = feedback_path
        self._seen_events = _Recent(SEEN_MAX, SEEN_TTL_S)
        self._threads = _Recent(THREADS_MAX)  # (channel, thread root ts) -> tuple of history turns
        self._answers = _Recent(ANSWERS_MAX)  # answer id -> (Answer, history) for feedback

    def gate(self, request: BoltRequest, body: dict[str, Any], next_: Callable[[], BoltResponse]) -> BoltResponse:
        """Drop retries, duplicates, bot messages, edits and deletions with a 200, before authorizing."""
        if request.headers.get("x-slack-retry-num"):
            log.info(
                "Dropped a retried delivery of event %s (%s)",
                body.get("event_id"),
                (request.headers.get("x-slack-retry-reason") or ["?"])[0],
            )
            return BoltResponse(status=200, body="")
        event_id = body.get("event_id")
        if event_id and not self._seen_events.add(event_id):
            log.info("Dropped duplicate event %s", event_id)
            return BoltResponse(status=200, body="")
        event = body.get("event") or {}
        if event.get("type") in ("message", "app_mention") and (event.get("subtype") or event.get("bot_id")):
            return BoltResponse(status=200, body="")
        return next_()

    def answer_event(self, event: dict[str, Any], client: WebClient, context: BoltContext) -> None:
        """Post a placeholder in the thread, ask the assistant with the thread as history, then update it."""
        channel, ts = event["channel"], event["ts"]
        root = event.get("thread_ts") or ts
        question = text_from_slack(event.get("text", ""))
        if not question:
            self._post(client, channel, root, EMPTY_QUESTION_TEXT)
            return
        started = time.perf_counter()
        history = self._thread_history(client, channel, root, ts, context)
        placeholder_ts = self._post(client, channel, root, PLACEHOLDER_TEXT)
        if placeholder_ts is None:
            return
        try:
            answer = self.assistant.ask(question, history)
        except KafkaRagError as exc:
            log.warning("Could not answer in %s: %s", channel, exc)
            self._replace(client, channel, root, placeholder_ts, error_text(str(exc)))
            return
        except Exception:
            log.exception("Answering failed in %s", channel)
            self._replace(client, channel, root, placeholder_ts, APOLOGY_TEXT)
            return
        answer_id = f"{channel}:{placeholder_ts}"
        self._answers.put(answer_id, (answer, tuple(history)))
        turns = ({"role": "user", "content": question}, {"role": "assistant", "content": answer.text})
        self._threads.update((channel, root), lambda old: (*(old or ()), *turns)[-TURNS_MAX:])
        try:
            client.chat_update(
                channel=channel,
                ts=placeholder_ts,
                text=fallback_text(answer),
                blocks=answer_blocks(answer, answer_id),
                parse="none",
                link_names=False,
            )
        except (SlackClientError, OSError) as exc:
            log.error("Slack chat.update failed in %s: %s", channel, _slack_error(exc))
            self._replace(client, channel, root, placeholder_ts, APOLOGY_TEXT)
            return
        log.info(
            "Answered in %s (thread %s): %s, %d sources, %.0f ms",
            channel,
            root,
            "abstained" if answer.abstained else "answered",
            len(answer.citations),
            (time.perf_counter() - started) * 1000,
        )

    def record_feedback(
        self, ack: Callable[..., Any], body: dict[str, Any], action: dict[str, Any], client: WebClient
    ) -> None:
        """Append the vote to the feedback JSONL shared with the web UI, then thank the voter privately."""
        ack()
        container, message = body.get("container") or {}, body.get("message") or {}
        channel = (body.get("channel") or {}).get("id") or container.get("channel_id", "")
        user = (body.get("user") or {}).get("id", "")
        message_ts = container.get("message_ts") or message.get("ts", "")
        thread_ts = message.get("thread_ts") or container.get("thread_ts") or message_ts
        try:
            value = json.loads(action.get("value") or "{}")
        except ValueError:
            value = {}
        answer_id = value.get("answer", "")
        stored = self._answers.get(answer_id)
        if stored is not None:
            answer, history = stored
        else:  # the bot restarted since it answered: keep what the message itself still carries
            text = text_from_slack(message.get("text", ""))
            answer = Answer(
                question=value.get("question", ""),
                text=text,
                citations=(),
                abstained=text.startswith(ABSTAIN_TEXT),
                query="",
            )
            history = ()
        rating = "up" if action.get("action_id") == FEEDBACK_ACTIONS["up"] else "down"
        extra = {
            "channel": channel,
            "thread_ts": thread_ts,
            "message_ts": message_ts,
            "user": user,
            "answer_id": answer_id,
            **({} if stored is not None else {"recovered": True}),
        }
        try:
            append_feedback(
                self.feedback_path,
                feedback_record(answer, rating=rating, history=history, source="slack", extra=extra),
            )
            reply = THANKS_TEXT
        except OSError:
            log.exception("Could not append feedback to %s", self.feedback_path)
            reply = SAVE_FAILED_TEXT
        try:
            client.chat_postEphemeral(channel=channel, user=user, thread_ts=thread_ts, text=reply)
        except (SlackClientError, OSError) as exc:
            log.error("Slack chat.postEphemeral failed in %s: %s", channel, _slack_error(exc))

    def _thread_history(
        self, client: WebClient, channel: str, root: str, ts: str, context: BoltContext
    ) -> list[dict[str, str]]:
        cached = self._threads.get((channel, root))
        if cached is not None:
            return list(cached)
        if root == ts:
            return []
        try:
            replies = client.conversations_replies(channel=channel, ts=root, limit=REPLIES_LIMIT)
        except (SlackClientError, OSError) as exc:
            log.warning(
                "Answering without thread history, conversations.replies failed in %s: %s",
                channel,
                _slack_error(exc),
            )
            return []
        turns = history_from_replies(
            replies.get("messages") or [],
            before_ts=ts,
            bot_user_id=context.bot_user_id or "",
            bot_id=context.bot_id or "",
        )
        turns = turns[-TURNS_MAX:]
        self._threads.update((channel, root), lambda old: old if old is not None else tuple(turns))
        return turns

    def _post(self, client: WebClient, channel: str, root: str, text: str) -> str | None:
        try:
            response = client.chat_postMessage(
                channel=channel, thread_ts=root, text=text, unfurl_links=False, unfurl_media=False
            )
        except (SlackClientError, OSError) as exc:
            log.error("Slack chat.postMessage failed in %s: %s", channel, _slack_error(exc))
            return None
        return response["ts"]

    def _replace(self, client: WebClient, channel: str, root: str, ts: str, text: str) -> None:
        """Show `text` instead of the placeholder, or below it when the placeholder cannot be edited."""
        try:
            client.chat_update(channel=channel, ts=ts, text=text, blocks=[], parse="none", link_names=False)
        except (SlackClientError, OSError) as exc:
            log.error("Slack chat.update failed in %s: %s", channel, _slack_error(exc))
            self._post(client, channel, root, text)


def _slack_error(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if response is not None:
        return f"{response.status_code} {response.get('error', '')}".strip()
    return type(exc).__name__


def _ack(ack: Callable[..., Any]) -> None:
    ack()


def _is_direct_message(event: dict[str, Any]) -> bool:
    return event.get("channel_type") == "im"


def build_app(assistant: Asker, settings: Settings, *, client: WebClient, signing_secret: str) -> App:
    """The Bolt app with its listeners; `client` decides where Slack is (a fake server in tests)."""
    bot = SlackBot(assistant, settings.feedback_path)
    try:
        app = App(client=client, signing_secret=signing_secret, before_authorize=bot.gate, name="kafka-rag")
    except BoltError as exc:  # auth.test answered ok: false
        raise ConfigurationError(
            "Slack rejected SLACK_BOT_TOKEN at auth.test: copy the Bot User OAuth Token again, or reinstall the app"
        ) from exc
    except (SlackClientError, OSError) as exc:
        raise ConfigurationError(
            f"Cannot reach Slack at {client.base_url} ({type(exc).__name__}): "
            "check the network, or SLACK_API_URL when it is set"
        ) from exc
    app.event("app_mention")(ack=_ack, lazy=[bot.answer_event])
    app.event("message", matchers=[_is_direct_message])(ack=_ack, lazy=[bot.answer_event])
    app.action(re.compile(f"^({'|'.join(FEEDBACK_ACTIONS.values())})$"))(bot.record_feedback)
    return app


def http_app(app: App) -> Starlette:
    """ASGI app for HTTP Events mode: POST /slack/events (signature-checked by Bolt), GET /healthz."""

    async def events(request: Request) -> Response:
        if not _well_formed_signature(request.headers):  # Bolt would fail on int(timestamp) with a 500
            log.info("Refused a request with a malformed Slack signature header")
            return JSONResponse({"error": "invalid signature"}, status_code=401)
        bolt_request = to_bolt_request(request, await request.body())
        return to_starlette_response(await run_in_threadpool(app.dispatch, bolt_request))

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route(EVENTS_PATH, events, methods=["POST"]), Route("/healthz", healthz)])


def _well_formed_signature(headers: Mapping[str, str]) -> bool:
    """Both signature headers present and shaped as Slack sends them (digits; "v0=" and 64 hex digits)."""
    timestamp = headers.get("x-slack-request-timestamp", "")
    signature = headers.get("x-slack-signature", "")
    return (
        0 < len(timestamp) <= 12
        and timestamp.isascii()
        and timestamp.isdigit()
        and re.fullmatch(r"v0=[0-9a-f]{64}", signature) is not None
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `kafka-rag slack`."""
    parser.add_argument("--index", type=Path, help="index directory (default: KAFKA_RAG_INDEX_DIR or index/)")
    parser.add_argument(
        "--http",
        action="store_true",
        help="HTTP Events mode: Slack posts to /slack/events (default: Socket Mode)",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on with --http; put a TLS proxy in front (default: %(default)s)",
    )
    parser.add_argument("--port", type=int, default=3000, help="port to listen on with --http (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    """`kafka-rag slack`: check the tokens, load the index once, then serve until interrupted."""
    credentials = read_credentials(os.environ, http=args.http)
    settings = Settings.from_env(index_dir=args.index)
    check_writable(settings.feedback_path)  # before seconds of model loading, like the web UI
    assistant = Assistant.from_settings(settings)
    assistant.follow_versions()  # a nightly ingest is answered from without a restart
    client = web_client(credentials.bot_token, base_url=os.environ.get("SLACK_API_URL"))
    app = build_app(assistant, settings, client=client, signing_secret=credentials.signing_secret)
    log.setLevel(logging.INFO)  # a long-running server: say what it answered (never what it was sent)
    if args.http:
        import uvicorn

        log.info("Slack HTTP Events mode: listening on http://%s:%d%s", args.host, args.port, EVENTS_PATH)
        uvicorn.run(http_app(app), host=args.host, port=args.port, log_level="info")
    else:
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        log.info("Slack Socket Mode: connecting")
        SocketModeHandler(app, app_token=credentials.app_token).start()
    return 0
